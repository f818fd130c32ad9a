// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/* Tests of the encoder and transport against a real Unix socket. They run
 * under ASan and UBSan in `make test`. A fake clock drives the backoff. */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../ipc_client.h"
#include "frames.h"
#include "check.h"


static uint64_t fake_now = 1000;
static uint64_t fake_clock(void) { return fake_now; }

static char dir[64];

static void sock_path(char *out, const char *name) { snprintf(out, 108, "%s/%s", dir, name); }

static int listen_at(const char *path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  strcpy(sa.sun_path, path);
  unlink(path);
  CHECK(fd >= 0);
  CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
  CHECK(listen(fd, 8) == 0);
  return fd;
}

static int accept_nb(int lfd) {
  int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  CHECK(fd >= 0);
  return fd;
}

typedef struct buf {
  uint8_t *p;
  size_t n, cap;
} buf;

/* drain reads whatever the peer wrote so far. */
static void drain(int fd, buf *b) {
  for (;;) {
    if (b->cap - b->n < 65536) {
      b->cap = b->cap * 2 + 65536;
      b->p = realloc(b->p, b->cap);
      CHECK(b->p);
    }
    ssize_t r = read(fd, b->p + b->n, b->cap - b->n);
    if (r > 0) {
      b->n += (size_t)r;
      continue;
    }
    if (r == 0 || errno == EAGAIN) return;
    CHECK(0);
  }
}

/* accept_parse accepts the client's connection, reads what it sent so far
 * and parses it; every byte must form whole, valid frames. */
static parsed *accept_parse(int lfd, buf *b, int *fd) {
  *fd = accept_nb(lfd);
  drain(*fd, b);
  parsed *p = calloc(1, sizeof(parsed));
  CHECK(p != NULL);
  CHECK(parse_frames(b->p, b->n, p) == 0);
  CHECK(p->consumed == b->n);
  return p;
}

static ipc_record kernel_rec(const char *name, uint64_t start) {
  ipc_record r = {.kind = IPC_KIND_KERNEL, .device = 0, .stream = 7, .start = start, .end = start + 1000, .name = name, .correlation = 1};
  return r;
}

static void test_collector_absent(void) {
  char path[108];
  sock_path(path, "absent.sock");
  ipc_client c;
  CHECK(ipc_client_init(&c, path, 1, "h", 0, fake_clock) == 0);
  for (int i = 0; i < 1000; i++) {
    ipc_record r = kernel_rec("k", 1000 + (uint64_t)i);
    ipc_client_add(&c, &r);
  }
  ipc_client_flush(&c);
  CHECK(c.stats.dropped_records == 1000);
  CHECK(c.stats.connect_failures == 1); /* backoff: one attempt at this instant */
  fake_now += 100;
  ipc_client_flush(&c);
  CHECK(c.stats.connect_failures == 2);
  ipc_client_flush(&c);
  CHECK(c.stats.connect_failures == 2); /* next attempt waits 200 ms */
  ipc_client_close(&c);
}

static void test_stream_and_interning(void) {
  char path[108];
  sock_path(path, "stream.sock");
  int lfd = listen_at(path);
  ipc_client c;
  CHECK(ipc_client_init(&c, path, 4242, "node-7", 1, fake_clock) == 0);
  char name[64];
  for (int i = 0; i < 3000; i++) {
    /* A fresh buffer each time: interning must go by content. */
    snprintf(name, sizeof(name), "void vllm::kernel_%d<float>(float*)", i % 10);
    ipc_record r = kernel_rec(name, 1000000 + (uint64_t)i * 2000);
    ipc_client_add(&c, &r);
  }
  ipc_record m = {.kind = IPC_KIND_MEMCPY, .sub = 1, .device = 0, .start = 5, .end = 9, .bytes = 4096};
  ipc_client_add(&c, &m);
  ipc_client_flush(&c);
  int fd;
  buf b = {0};
  parsed *p = accept_parse(lfd, &b, &fd);
  CHECK(p->hellos == 1 && p->pid == 4242 && strcmp(p->host, "node-7") == 0);
  CHECK(p->strings == 10);
  for (int id = 1; id <= 10; id++) CHECK(p->name_defs[id] == 1);
  CHECK(p->kernels == 3000 && p->records == 3001);
  CHECK(c.stats.sent_records == 3001 && c.stats.dropped_records == 0);
  CHECK(p->stats_frames == 1);
  free(p);
  free(b.p);
  close(fd);
  close(lfd);
  ipc_client_close(&c);
}

static void test_reconnect_resends_names(void) {
  char path[108];
  sock_path(path, "reconnect.sock");
  int lfd = listen_at(path);
  ipc_client c;
  CHECK(ipc_client_init(&c, path, 1, NULL, 0, fake_clock) == 0);
  ipc_record r = kernel_rec("flash_fwd_kernel", 10);
  ipc_client_add(&c, &r);
  ipc_client_flush(&c);
  int fd = accept_nb(lfd);
  close(fd); /* the collector restarts */
  /* The next sends hit a closed socket: the client drops, counts, and waits. */
  for (int i = 0; i < 3 && ipc_client_connected(&c); i++) {
    ipc_client_add(&c, &r);
    ipc_client_flush(&c);
  }
  CHECK(!ipc_client_connected(&c));
  CHECK(c.stats.dropped_records >= 1);
  ipc_client_add(&c, &r); /* within backoff: dropped, no reconnect */
  CHECK(!ipc_client_connected(&c));
  fake_now += 200;
  ipc_client_add(&c, &r);
  CHECK(ipc_client_connected(&c));
  ipc_client_flush(&c);
  fd = accept_nb(lfd);
  buf b = {0};
  drain(fd, &b);
  parsed *p = calloc(1, sizeof(parsed));
  CHECK(parse_frames(b.p, b.n, p) == 0);
  CHECK(p->hellos == 1);
  CHECK(p->strings == 1 && strcmp(p->last_name, "flash_fwd_kernel") == 0);
  CHECK(p->kernels == 1);
  CHECK(c.stats.connects == 2);
  free(p);
  free(b.p);
  close(fd);
  close(lfd);
  ipc_client_close(&c);
}

/* A burst larger than the socket buffer, as one CUPTI buffer is, with the
 * collector momentarily not reading: nothing is dropped while it fits the
 * backlog, and everything arrives once the collector reads again. */
static void test_burst_rides_on_backlog(void) {
  char path[108];
  sock_path(path, "burst.sock");
  int lfd = listen_at(path);
  ipc_client c;
  CHECK(ipc_client_init(&c, path, 1, "h", 0, fake_clock) == 0);
  c.sndbuf = 4096;
  const uint64_t total = 20000; /* about 1.1 MB of frames */
  for (uint64_t i = 0; i < total; i++) {
    ipc_record r = kernel_rec("burst_kernel", i * 10);
    ipc_client_add(&c, &r);
  }
  ipc_client_flush(&c);
  CHECK(c.stats.dropped_records == 0);
  CHECK(c.pending_len - c.pending_off > 512 * 1024); /* most of it waits in the backlog */
  int fd = accept_nb(lfd);
  buf b = {0};
  for (int i = 0; i < 1000000 && c.pending_off < c.pending_len; i++) {
    drain(fd, &b);
    ipc_client_flush(&c);
  }
  drain(fd, &b);
  parsed *p = calloc(1, sizeof(parsed));
  CHECK(parse_frames(b.p, b.n, p) == 0);
  CHECK(p->consumed == b.n);
  CHECK(p->records == total && p->kernels == total);
  CHECK(c.stats.sent_records == total && c.stats.dropped_records == 0);
  free(p);
  free(b.p);
  close(fd);
  close(lfd);
  ipc_client_close(&c);
}

static void test_slow_collector_never_blocks(void) {
  char path[108];
  sock_path(path, "slow.sock");
  int lfd = listen_at(path);
  ipc_client c;
  CHECK(ipc_client_init(&c, path, 1, "h", 0, fake_clock) == 0);
  c.sndbuf = 4096;
  const uint64_t total = 200000;
  char name[32];
  for (uint64_t i = 0; i < total; i++) {
    snprintf(name, sizeof(name), "kernel_%d", (int)(i % 100));
    ipc_record r = kernel_rec(name, i * 10);
    ipc_client_add(&c, &r);
    if (i % 1024 == 0) ipc_client_flush(&c);
  }
  ipc_client_flush(&c);
  CHECK(c.stats.dropped_records > 0); /* 200,000 records are more than the backlog holds */
  int fd = accept_nb(lfd);
  buf b = {0};
  /* The collector catches up; the client sends its backlog, ending with
   * the frame it cut. */
  for (int i = 0; i < 1000000 && c.pending_off < c.pending_len; i++) {
    drain(fd, &b);
    fake_now += 1;
    ipc_client_flush(&c);
  }
  CHECK(c.pending_off >= c.pending_len);
  drain(fd, &b);
  parsed *p = calloc(1, sizeof(parsed));
  CHECK(parse_frames(b.p, b.n, p) == 0);
  CHECK(p->consumed == b.n); /* only whole frames arrived */
  CHECK(p->records == c.stats.sent_records);
  CHECK(c.stats.sent_records + c.stats.dropped_records == total);
  free(p);
  free(b.p);
  close(fd);
  close(lfd);
  ipc_client_close(&c);
}

static void test_name_table_is_bounded(void) {
  char path[108];
  sock_path(path, "names.sock");
  int lfd = listen_at(path);
  ipc_client c;
  CHECK(ipc_client_init(&c, path, 1, "h", 0, fake_clock) == 0);
  int fd = -1;
  buf b = {0};
  char name[64];
  for (int i = 0; i < IPC_MAX_NAMES + 10; i++) {
    snprintf(name, sizeof(name), "distinct_kernel_%d", i);
    ipc_record r = kernel_rec(name, (uint64_t)i);
    ipc_client_add(&c, &r);
    if (fd < 0) fd = accept_nb(lfd);
    if (i % 256 == 0) {
      ipc_client_flush(&c);
      drain(fd, &b);
    }
  }
  ipc_client_flush(&c);
  drain(fd, &b);
  CHECK(c.stats.names_overflow == 10);
  parsed *p = calloc(1, sizeof(parsed));
  CHECK(parse_frames(b.p, b.n, p) == 0);
  CHECK(p->kernels == IPC_MAX_NAMES + 10);
  CHECK(p->strings == IPC_MAX_NAMES + 1); /* every name once, plus the overflow name */
  CHECK(p->name_defs[IPC_MAX_NAMES + 1] == 1);
  free(p);
  free(b.p);
  close(fd);
  close(lfd);
  ipc_client_close(&c);
}

/* Every connection opens with hello, identity and the devices known so
 * far; a device learned later follows at once; launches and marks go in
 * their own frames between records frames. */
static void test_identity_devices_launches(void) {
  char path[108];
  sock_path(path, "ident.sock");
  int lfd = listen_at(path);
  ipc_client c;
  CHECK(ipc_client_init(&c, path, 4242, "node-7", 1, fake_clock) == 0);
  ipc_client_set_identity(&c, 4000, "7d9f0c1e-instance", "vllm");
  ipc_device d0 = {.ordinal = 0, .uuid = {0x5a, 0x3f}};
  ipc_client_add_device(&c, &d0);
  ipc_launch l = {.kind = IPC_LAUNCH_KERNEL, .domain = IPC_DOMAIN_RUNTIME, .correlation = 41, .tid = 4243, .time = 7};
  ipc_client_add_launch(&c, &l);
  ipc_record r = kernel_rec("k", 1000);
  r.correlation = 41;
  ipc_client_add(&c, &r);
  ipc_launch g = {.kind = IPC_LAUNCH_GRAPH, .domain = IPC_DOMAIN_DRIVER, .correlation = 42, .tid = 4243, .time = 8};
  ipc_client_add_launch(&c, &g);
  ipc_launch mark = {.kind = IPC_LAUNCH_MARK, .time = 9};
  ipc_client_add_launch(&c, &mark);
  ipc_client_flush(&c);
  ipc_device d1 = {.ordinal = 1, .flags = IPC_DEVICE_MIG, .uuid = {0x5b}, .mig = {0x7c}};
  ipc_client_add_device(&c, &d1);
  ipc_client_flush(&c);
  int fd;
  buf b = {0};
  parsed *p = accept_parse(lfd, &b, &fd);
  CHECK(p->identities == 1 && p->identity_at_start == 1);
  CHECK(p->ppid == 4000 && strcmp(p->instance, "7d9f0c1e-instance") == 0 && strcmp(p->service, "vllm") == 0);
  CHECK(p->device_frames == 2);
  CHECK(p->last_ordinal == 1 && p->last_device_flags == IPC_DEVICE_MIG && p->last_uuid[0] == 0x5b && p->last_mig[0] == 0x7c);
  CHECK(p->launches == 2 && p->marks == 1 && p->last_mark == 9);
  CHECK(p->last_launch_kind == IPC_LAUNCH_GRAPH && p->last_launch_domain == IPC_DOMAIN_DRIVER);
  CHECK(p->last_launch_corr == 42 && p->last_launch_tid == 4243 && p->last_launch_time == 8);
  CHECK(p->kernels == 1);

  /* A new connection says who it is again, with both devices. */
  close(fd);
  ipc_client_add(&c, &r);
  ipc_client_flush(&c); /* finds the connection closed */
  fake_now += 1000;
  ipc_client_add(&c, &r);
  ipc_client_flush(&c);
  buf b2 = {0};
  parsed *p2 = accept_parse(lfd, &b2, &fd);
  CHECK(p2->hellos == 1 && p2->identity_at_start == 1 && p2->device_frames == 2);
  CHECK(strcmp(p2->instance, "7d9f0c1e-instance") == 0);
  free(p);
  free(p2);
  free(b.p);
  free(b2.p);
  close(fd);
  close(lfd);
  ipc_client_close(&c);
}

/* Launches with no collector are dropped and counted. */
static void test_launches_dropped_without_collector(void) {
  char path[108];
  sock_path(path, "nolaunch.sock");
  ipc_client c;
  CHECK(ipc_client_init(&c, path, 1, "h", 0, fake_clock) == 0);
  ipc_launch l = {.kind = IPC_LAUNCH_KERNEL, .correlation = 1};
  for (int i = 0; i < 10; i++) ipc_client_add_launch(&c, &l);
  CHECK(c.stats.launches_dropped == 10);
  ipc_client_close(&c);
}

static ipc_record graph_rec(uint32_t id, uint64_t start) {
  ipc_record r = {.kind = IPC_KIND_GRAPH, .device = 0, .stream = 7, .start = start, .end = start + 5000, .graph_id = id};
  return r;
}

/* A graph's signature goes out once per connection, before the first graph
 * record with either of its ids; an id nobody registered goes out bare. */
static void test_graph_signatures(void) {
  char path[108];
  sock_path(path, "graphs.sock");
  int lfd = listen_at(path);
  ipc_client c;
  CHECK(ipc_client_init(&c, path, 1, "h", 0, fake_clock) == 0);
  ipc_graph a = {.graph_id = 1, .exec_id = 101, .signature = 0x1111222233334444ull, .nodes = 3};
  ipc_graph b = {.graph_id = 2, .signature = 0x5555666677778888ull, .nodes = 9, .flags = IPC_GRAPH_NAMES_MISSING};
  ipc_client_add_graph(&c, &a);
  ipc_client_add_graph(&c, &b);
  for (int i = 0; i < 3; i++) {
    ipc_record g = graph_rec(101, 1000 + (uint64_t)i * 10000), k = kernel_rec("eager", 2000 + (uint64_t)i * 10000);
    ipc_client_add(&c, &g);
    ipc_client_add(&c, &k);
  }
  ipc_record g2 = graph_rec(2, 50000), unknown = graph_rec(999, 60000);
  ipc_client_add(&c, &g2);
  ipc_client_add(&c, &g2);
  ipc_client_add(&c, &unknown);
  ipc_client_flush(&c);
  int fd;
  buf bb = {0};
  parsed *p = accept_parse(lfd, &bb, &fd);
  CHECK(p->graph_frames == 2 && p->graphs == 6 && p->graphs_signed == 5);
  CHECK(p->graph_ids[0][0] == 1 && p->graph_ids[0][1] == 101 && p->graph_sigs[0] == a.signature);
  CHECK(p->graph_ids[1][0] == 2 && p->graph_ids[1][1] == 0 && p->graph_sigs[1] == b.signature);
  CHECK(p->last_graph_nodes == 9 && p->last_graph_flags == IPC_GRAPH_NAMES_MISSING);
  free(p);
  /* The collector restarts: the new connection gets the signature again,
   * here through the graph's other id. */
  close(fd);
  for (int i = 0; i < 3 && ipc_client_connected(&c); i++) {
    ipc_client_add(&c, &g2);
    ipc_client_flush(&c);
  }
  CHECK(!ipc_client_connected(&c));
  fake_now += 30000;
  ipc_record g1 = graph_rec(1, 70000);
  ipc_client_add(&c, &g1);
  ipc_client_flush(&c);
  bb.n = 0;
  p = accept_parse(lfd, &bb, &fd);
  CHECK(p->graph_frames == 1 && p->graphs == 1 && p->graphs_signed == 1 && p->last_graph_record_sig == a.signature);
  free(p);
  free(bb.p);
  close(fd);
  close(lfd);
  ipc_client_close(&c);
}

/* Graph and executable ids are separate counters: where a later graph's
 * executable id equals an earlier graph's id, the later graph wins. */
static void test_graph_id_takeover(void) {
  char path[108];
  sock_path(path, "takeover.sock");
  int lfd = listen_at(path);
  ipc_client c;
  CHECK(ipc_client_init(&c, path, 1, "h", 0, fake_clock) == 0);
  ipc_graph a = {.graph_id = 5, .exec_id = 1, .signature = 0xAAAA, .nodes = 1};
  ipc_graph b = {.graph_id = 9, .exec_id = 5, .signature = 0xBBBB, .nodes = 1};
  ipc_client_add_graph(&c, &a);
  ipc_client_add_graph(&c, &b);
  ipc_record r = graph_rec(5, 1000);
  ipc_client_add(&c, &r);
  ipc_client_flush(&c);
  int fd;
  buf bb = {0};
  parsed *p = accept_parse(lfd, &bb, &fd);
  CHECK(p->graphs_signed == 1 && p->last_graph_record_sig == 0xBBBB);
  free(p);
  free(bb.p);
  close(fd);
  close(lfd);
  ipc_client_close(&c);
}

/* The table keeps IPC_MAX_GRAPHS graphs; one more forgets them all and is
 * counted in stats. */
static void test_graph_table_resets(void) {
  char path[108];
  sock_path(path, "gtable.sock");
  int lfd = listen_at(path);
  ipc_client c;
  CHECK(ipc_client_init(&c, path, 1, "h", 0, fake_clock) == 0);
  for (uint32_t i = 1; i <= IPC_MAX_GRAPHS + 1; i++) {
    ipc_graph g = {.graph_id = i, .exec_id = 100000 + i, .signature = i, .nodes = 1};
    ipc_client_add_graph(&c, &g);
  }
  CHECK(c.stats.graph_resets == 1 && c.ngraphs == 1);
  ipc_record first = graph_rec(100001, 1000), last = graph_rec(100000 + IPC_MAX_GRAPHS + 1, 2000);
  ipc_client_add(&c, &first);
  ipc_client_add(&c, &last);
  ipc_client_status(&c);
  ipc_client_flush(&c);
  int fd;
  buf bb = {0};
  parsed *p = accept_parse(lfd, &bb, &fd);
  CHECK(p->graphs == 2 && p->graphs_signed == 1 && p->last_graph_record_sig == IPC_MAX_GRAPHS + 1);
  CHECK(p->stats_frames == 1 && p->stat_graph_resets == 1);
  free(p);
  free(bb.p);
  close(fd);
  close(lfd);
  ipc_client_close(&c);
}

/* Under congestion batches are dropped; a dropped batch may have held a
 * graph's frame, which must then go out again: no graph record that
 * arrives precedes its signature. */
static void test_graph_frames_survive_drops(void) {
  char path[108];
  sock_path(path, "gdrop.sock");
  int lfd = listen_at(path);
  ipc_client c;
  CHECK(ipc_client_init(&c, path, 1, "h", 0, fake_clock) == 0);
  c.sndbuf = 4096;
  c.backlog = 16384;
  for (uint32_t i = 1; i <= 40; i++) {
    ipc_graph g = {.graph_id = i, .signature = 0x900 + i, .nodes = 2};
    ipc_client_add_graph(&c, &g);
  }
  int fd = -1;
  buf bb = {0};
  for (uint64_t i = 0; i < 60000; i++) {
    ipc_record r = (i % 500 == 0) ? graph_rec((uint32_t)(i / 500) % 40 + 1, i * 10) : kernel_rec("k", i * 10);
    ipc_client_add(&c, &r);
    if (fd < 0) fd = accept_nb(lfd);
    if (i % 1024 == 0) ipc_client_flush(&c);
    if (i % 8192 == 0) drain(fd, &bb); /* the collector reads now and then */
  }
  ipc_client_flush(&c);
  for (int i = 0; i < 1000000 && c.pending_off < c.pending_len; i++) {
    drain(fd, &bb);
    ipc_client_flush(&c);
  }
  drain(fd, &bb);
  CHECK(c.stats.dropped_records > 0);
  parsed *p = calloc(1, sizeof(parsed));
  CHECK(parse_frames(bb.p, bb.n, p) == 0 && p->consumed == bb.n);
  CHECK(p->graphs > 0 && p->graphs_signed == p->graphs);
  free(p);
  free(bb.p);
  close(fd);
  close(lfd);
  ipc_client_close(&c);
}

static void test_bad_init(void) {
  ipc_client c;
  char longpath[200];
  memset(longpath, 'a', sizeof(longpath) - 1);
  longpath[sizeof(longpath) - 1] = 0;
  CHECK(ipc_client_init(&c, longpath, 1, NULL, 0, NULL) == -1);
  CHECK(ipc_client_init(&c, NULL, 1, NULL, 0, NULL) == -1);
}

int main(void) {
  snprintf(dir, sizeof(dir), "/tmp/ipctest.XXXXXX");
  CHECK(mkdtemp(dir) != NULL);
  test_collector_absent();
  test_identity_devices_launches();
  test_launches_dropped_without_collector();
  test_stream_and_interning();
  test_reconnect_resends_names();
  test_slow_collector_never_blocks();
  test_burst_rides_on_backlog();
  test_name_table_is_bounded();
  test_graph_signatures();
  test_graph_id_takeover();
  test_graph_table_resets();
  test_graph_frames_survive_drops();
  test_bad_init();
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  if (system(cmd) != 0) return 1;
  printf("ipc_client tests: ok\n");
  return 0;
}
