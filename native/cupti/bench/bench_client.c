// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/* bench_client measures the C side's cost per record: encode plus a
 * non-blocking socket write, with a reader thread draining the other end
 * as the collector would. It prints ns/record in Go benchmark format.
 *
 * With --connect it is instead the engine end of the end-to-end benchmark
 * (e2e/cupti_bench_test.go): it streams to a running collector's cupti
 * receiver at --rate records/s for --seconds, in bursts of --burst records
 * (a CUPTI buffer's worth is handed over at once), through the same
 * non-blocking ipc_client the injection library uses, and prints what it
 * sent and what it had to drop. --sndbuf-kb and --backlog-kb 0 give the
 * transport as it was before the backlog: system socket buffer, drop a
 * batch whenever the socket is full.
 *
 * It also measures what launch records (issue 13) add per launch: on the
 * launching thread, the callback's timestamp and queue push
 * (BenchmarkLaunchCallback); and in all, that plus draining the queue into
 * the stream, against the kernel record every launch costs anyway
 * (BenchmarkPerLaunch, impl=kernel_record versus impl=kernel_and_launch).
 *
 * And what a CUDA graph's signature costs once per instantiation in graph
 * mode, past the driver calls that list the nodes (BenchmarkGraphSignature:
 * sort and hash graph_sig.h does, per graph of n nodes). */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../graph_sig.h"
#include "../ipc_client.h"
#include "../launch_ring.h"

static volatile int stop;

static void *reader(void *arg) {
  int lfd = *(int *)arg;
  int fd = accept(lfd, NULL, NULL);
  static char b[1 << 20];
  while (!stop) {
    if (read(fd, b, sizeof(b)) <= 0) break;
  }
  close(fd);
  return NULL;
}

static uint64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void emit(void *arg, const ipc_launch *l) { ipc_client_add_launch(arg, l); }
static void discard(void *arg, const ipc_launch *l) {
  (void)arg;
  (void)l;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *kernel_name(int i) {
  static char store[64][80];
  static int ready;
  if (!ready) {
    for (int k = 0; k < 64; k++)
      snprintf(store[k], sizeof(store[k]), "void vllm::kernel_family_%d<c10::BFloat16, %d>(c10::BFloat16*, int)", k, k);
    ready = 1;
  }
  return store[i & 63];
}

static void sleep_until(double t) {
  struct timespec ts = {(time_t)t, (long)((t - (double)(time_t)t) * 1e9)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

/* stream is the --connect mode. */
static int stream(const char *path, double rate, double seconds, long burst, int sndbuf_kb, long backlog_kb) {
  ipc_client c;
  if (ipc_client_init(&c, path, (uint32_t)getpid(), "bench", 0, NULL)) return 1;
  c.sndbuf = sndbuf_kb * 1024;
  if (backlog_kb >= 0) c.backlog = (size_t)backlog_kb * 1024;
  double t0 = now_s();
  while (!ipc_client_connected(&c)) {
    if (now_s() - t0 > 10) {
      fprintf(stderr, "bench_client: no collector at %s\n", path);
      return 1;
    }
    ipc_client_flush(&c);
    sleep_until(now_s() + 0.01);
  }
  long total = (long)(rate * seconds), sent = 0;
  uint64_t t = 1700000000000000000ull;
  double start = now_s();
  for (long k = 0; sent < total; k++) {
    sleep_until(start + (double)(k * burst) / rate);
    long n = burst < total - sent ? burst : total - sent;
    for (long i = 0; i < n; i++, t += 4000) {
      ipc_record r = {.kind = IPC_KIND_KERNEL, .device = (uint16_t)(i & 1), .stream = 7, .start = t, .end = t + 3000,
                      .name = kernel_name((int)i), .correlation = (uint32_t)(sent + i)};
      ipc_client_add(&c, &r);
    }
    ipc_client_flush(&c);
    sent += n;
  }
  /* The last bytes: wait (bounded) until the socket took them. */
  double deadline = now_s() + 10;
  while (ipc_client_connected(&c) && c.pending_off < c.pending_len && now_s() < deadline) {
    struct pollfd p = {.fd = c.fd, .events = POLLOUT};
    if (poll(&p, 1, 10) > 0) ipc_client_flush(&c);
  }
  double dt = now_s() - start;
  printf("sent=%ld dropped=%llu seconds=%.3f\n", sent, (unsigned long long)c.stats.dropped_records, dt);
  ipc_client_close(&c);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--connect") == 0) {
    const char *path = argc > 2 ? argv[2] : "";
    double rate = 1e6, seconds = 3;
    long burst = 8192;
    int sndbuf = 4096;
    long backlog = -1; /* the library's */
    for (int i = 3; i + 1 < argc; i += 2) {
      if (strcmp(argv[i], "--rate") == 0) rate = atof(argv[i + 1]);
      else if (strcmp(argv[i], "--seconds") == 0) seconds = atof(argv[i + 1]);
      else if (strcmp(argv[i], "--burst") == 0) burst = atol(argv[i + 1]);
      else if (strcmp(argv[i], "--sndbuf-kb") == 0) sndbuf = atoi(argv[i + 1]);
      else if (strcmp(argv[i], "--backlog-kb") == 0) backlog = atol(argv[i + 1]);
    }
    if (rate <= 0 || seconds <= 0 || burst <= 0) return 2;
    return stream(path, rate, seconds, burst, sndbuf, backlog);
  }
  long n = argc > 1 ? atol(argv[1]) : 20000000;
  char dir[] = "/tmp/ipcbench.XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char path[108];
  snprintf(path, sizeof(path), "%s/b.sock", dir);
  int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  strcpy(sa.sun_path, path);
  if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1)) return 1;
  pthread_t t;
  pthread_create(&t, NULL, reader, &lfd);

  ipc_client c;
  if (ipc_client_init(&c, path, 1, "bench", 0, NULL)) return 1;
  const char *names[64];
  char store[64][80];
  for (int i = 0; i < 64; i++) {
    snprintf(store[i], sizeof(store[i]), "void vllm::kernel_family_%d<c10::BFloat16, %d>(c10::BFloat16*, int)", i, i);
    names[i] = store[i];
  }
  /* Warm up: connect and intern every name. */
  for (int i = 0; i < 4096; i++) {
    ipc_record r = {.kind = IPC_KIND_KERNEL, .start = (uint64_t)i, .end = (uint64_t)i + 1, .name = names[i % 64]};
    ipc_client_add(&c, &r);
  }
  ipc_client_flush(&c);
  c.stats.sent_records = c.stats.dropped_records = 0;

  double t0 = now_s();
  for (long i = 0; i < n; i++) {
    ipc_record r = {.kind = IPC_KIND_KERNEL, .device = (uint16_t)(i & 1), .stream = 7,
                    .start = 1700000000000000000ull + (uint64_t)i * 4000, .name = names[i & 63]};
    r.end = r.start + 3000;
    ipc_client_add(&c, &r);
  }
  ipc_client_flush(&c);
  double dt = now_s() - t0;
  printf("BenchmarkEncodeSend/impl=c\t%ld\t%.2f ns/op\t%.0f records/s\t%llu sent-records\t%llu dropped-records\n", n, dt * 1e9 / (double)n,
         (double)n / dt, (unsigned long long)c.stats.sent_records, (unsigned long long)c.stats.dropped_records);

  /* Launch records. One launch and its kernel record per op; the queue is
   * drained every 4096 launches, as a completed buffer of kernels drains
   * it in the library. */
  launch_ring *lr = lr_new();
  if (lr == NULL) return 1;
  long m = n / 4;
  for (int with = 0; with <= 1; with++) {
    t0 = now_s();
    for (long i = 0; i < m; i++) {
      if (with) {
        ipc_launch l = {.kind = IPC_LAUNCH_KERNEL, .domain = IPC_DOMAIN_RUNTIME, .correlation = (uint32_t)i, .tid = 7};
        lr_push(lr, &l, realtime_ns);
      }
      ipc_record r = {.kind = IPC_KIND_KERNEL, .device = 0, .stream = 7, .start = 1700000000000000000ull + (uint64_t)i * 4000,
                      .name = names[i & 63], .correlation = (uint32_t)i};
      r.end = r.start + 3000;
      if (with && (i & 4095) == 0) {
        uint64_t mark;
        lr_drain(lr, emit, &c, realtime_ns, &mark);
      }
      ipc_client_add(&c, &r);
    }
    uint64_t mark;
    lr_drain(lr, emit, &c, realtime_ns, &mark);
    ipc_client_flush(&c);
    dt = now_s() - t0;
    printf("BenchmarkPerLaunch/impl=%s\t%ld\t%.2f ns/op\n", with ? "kernel_and_launch" : "kernel_record", m, dt * 1e9 / (double)m);
  }
  /* What the launching thread pays: timestamp and push, drained by another
   * thread as the flush thread does. */
  t0 = now_s();
  for (long i = 0; i < m; i++) {
    ipc_launch l = {.kind = IPC_LAUNCH_KERNEL, .domain = IPC_DOMAIN_RUNTIME, .correlation = (uint32_t)i, .tid = 7};
    lr_push(lr, &l, realtime_ns);
    if ((i & 4095) == 4095) {
      uint64_t mark;
      lr_drain(lr, discard, NULL, realtime_ns, &mark);
    }
  }
  dt = now_s() - t0;
  printf("BenchmarkLaunchCallback/impl=push\t%ld\t%.2f ns/op\t%llu dropped-launches\n", m, dt * 1e9 / (double)m,
         (unsigned long long)atomic_load(&lr->dropped));
  free(lr);
  /* Graphs shaped as vLLM captures them: a piecewise piece of about 16
   * kernels of a dozen kinds, a full decode graph of an 80-layer model, and
   * Graphsignal's node cap; kernel nodes with memset and empty ones. */
  static const int sizes[] = {16, 1200, GRAPH_SIG_MAX_NODES};
  graph_tok *toks = malloc(sizeof(graph_tok) * GRAPH_SIG_MAX_NODES);
  for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]) && toks; si++) {
    int nodes = sizes[si];
    long reps = 20000000 / nodes;
    uint64_t sink = 0;
    t0 = now_s();
    for (long r = 0; r < reps; r++) {
      for (int i = 0; i < nodes; i++) {
        int t = i % 16 == 15 ? 2 : i % 16 == 14 ? 5 : 0;
        toks[i].type = graph_node_type_name(t);
        toks[i].name = t == 0 ? kernel_name(i % 12) : NULL;
      }
      sink += graph_sig_hash(toks, (size_t)nodes);
    }
    dt = now_s() - t0;
    printf("BenchmarkGraphSignature/nodes=%d\t%ld\t%.0f ns/op\t%.1f ns/node\t%llu sink\n", nodes, reps,
           dt * 1e9 / (double)reps, dt * 1e9 / (double)reps / nodes, (unsigned long long)(sink & 1));
  }
  free(toks);
  stop = 1;
  ipc_client_close(&c);
  pthread_join(t, NULL);
  close(lfd);
  unlink(path);
  rmdir(dir);
  return 0;
}
