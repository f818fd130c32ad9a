// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/* See ipc_client.h. Everything here is plain C and POSIX so that it is
 * built and tested with gcc, ASan and UBSan where CUDA does not exist. */
#define _GNU_SOURCE
#include "ipc_client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define BACKOFF_MIN_MS 100u
#define BACKOFF_MAX_MS 30000u
#define STATS_EVERY_MS 1000u

static const char overflow_name[] = "<inferprof: kernel name table full>";

uint64_t ipc_monotonic_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Little-endian stores that do not depend on the host's byte order. */
static void put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_header(uint8_t *p, uint8_t type, uint32_t len) {
  put32(p, IPC_MAGIC);
  p[4] = IPC_VERSION;
  p[5] = type;
  put16(p + 6, 0);
  put32(p + 8, len);
}

static uint32_t fnv1a(const char *s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) {
    h ^= (uint8_t)s[i];
    h *= 16777619u;
  }
  return h;
}

/* intern_slow finds or adds a name by content; returns its index. */
static uint32_t intern_slow(ipc_client *c, const char *s, size_t n) {
  if (n > IPC_MAX_STRING) n = IPC_MAX_STRING;
  uint32_t h = fnv1a(s, n);
  uint32_t mask = IPC_NAME_SLOTS - 1;
  for (uint32_t i = h & mask;; i = (i + 1) & mask) {
    int32_t idx = c->slots[i];
    if (idx < 0) {
      if (c->nnames >= IPC_MAX_NAMES || c->arena_len + n > IPC_NAME_ARENA) {
        c->stats.names_overflow++;
        return c->overflow_id;
      }
      memcpy(c->arena + c->arena_len, s, n);
      ipc_name *nm = &c->names[c->nnames];
      nm->off = (uint32_t)c->arena_len;
      nm->len = (uint32_t)n;
      nm->hash = h;
      nm->sent_gen = 0;
      c->arena_len += n;
      c->slots[i] = (int32_t)c->nnames;
      return c->nnames++;
    }
    ipc_name *nm = &c->names[idx];
    if (nm->hash == h && nm->len == n && memcmp(c->arena + nm->off, s, n) == 0) return (uint32_t)idx;
  }
}

/* intern maps a kernel-name pointer to a name index. CUPTI hands the same
 * pointer for every launch of a kernel, so a pointer cache skips hashing;
 * the content is still compared, so a reused pointer cannot mislabel. */
static uint32_t intern(ipc_client *c, const char *s) {
  if (s == NULL) s = "<unknown>";
  size_t slot = ((uintptr_t)s >> 4) & (IPC_PTR_CACHE - 1);
  if (c->ptr_keys[slot] == s) {
    const ipc_name *nm = &c->names[c->ptr_vals[slot]];
    if (strncmp(c->arena + nm->off, s, nm->len) == 0 && (nm->len == IPC_MAX_STRING || s[nm->len] == '\0'))
      return c->ptr_vals[slot];
  }
  uint32_t idx = intern_slow(c, s, strlen(s));
  if (idx != c->overflow_id) {
    c->ptr_keys[slot] = s;
    c->ptr_vals[slot] = idx;
  }
  return idx;
}

int ipc_client_init(ipc_client *c, const char *path, uint32_t pid, const char *host,
                    uint64_t start_unix_ns, ipc_clock_fn now_ms) {
  memset(c, 0, sizeof(*c));
  c->fd = -1;
  c->rec_hdr = -1;
  c->pid = pid;
  c->start_unix_ns = start_unix_ns;
  c->now_ms = now_ms ? now_ms : ipc_monotonic_ms;
  c->backoff_ms = BACKOFF_MIN_MS;
  if (path == NULL || strlen(path) >= sizeof(c->path)) return -1;
  strcpy(c->path, path);
  if (host) {
    strncpy(c->host, host, IPC_MAX_HOST);
    c->host[IPC_MAX_HOST] = '\0';
  }
  c->buf = malloc(IPC_BUF_SIZE);
  c->pending = malloc(IPC_BACKLOG);
  c->backlog = IPC_BACKLOG;
  c->batch_names = malloc(sizeof(uint16_t) * (IPC_MAX_NAMES + 1));
  c->names = calloc(IPC_MAX_NAMES + 1, sizeof(ipc_name));
  c->arena = malloc(IPC_NAME_ARENA + sizeof(overflow_name));
  c->slots = malloc(sizeof(int32_t) * IPC_NAME_SLOTS);
  c->ptr_keys = calloc(IPC_PTR_CACHE, sizeof(char *));
  c->ptr_vals = calloc(IPC_PTR_CACHE, sizeof(uint32_t));
  c->graphs = malloc(sizeof(ipc_graph) * IPC_MAX_GRAPHS);
  c->graph_slots = calloc(IPC_GRAPH_SLOTS, sizeof(uint64_t));
  c->batch_graphs = malloc(sizeof(uint32_t) * IPC_MAX_GRAPHS);
  if (!c->buf || !c->pending || !c->batch_names || !c->names || !c->arena || !c->slots || !c->ptr_keys ||
      !c->ptr_vals || !c->graphs || !c->graph_slots || !c->batch_graphs) {
    ipc_client_close(c);
    return -1;
  }
  for (uint32_t i = 0; i < IPC_NAME_SLOTS; i++) c->slots[i] = -1;
  /* The overflow name lives past the table so it is always available. */
  c->overflow_id = IPC_MAX_NAMES;
  ipc_name *ov = &c->names[IPC_MAX_NAMES];
  ov->off = IPC_NAME_ARENA;
  ov->len = (uint32_t)strlen(overflow_name);
  memcpy(c->arena + IPC_NAME_ARENA, overflow_name, ov->len);
  return 0;
}

int ipc_client_connected(const ipc_client *c) { return c->fd >= 0; }

static void disconnect(ipc_client *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->pending_len = c->pending_off = 0;
  c->next_connect_ms = c->now_ms() + c->backoff_ms;
}

/* try_connect opens a non-blocking connection when the backoff allows. */
static void try_connect(ipc_client *c) {
  uint64_t now = c->now_ms();
  if (c->fd >= 0 || now < c->next_connect_ms) return;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path, c->path, strlen(c->path));
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    /* Absent (ENOENT, ECONNREFUSED) or its backlog is full (EAGAIN). */
    if (fd >= 0) close(fd);
    c->stats.connect_failures++;
    c->next_connect_ms = now + c->backoff_ms;
    c->backoff_ms = c->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : c->backoff_ms * 2;
    return;
  }
  if (c->sndbuf > 0) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &c->sndbuf, sizeof(c->sndbuf));
  c->fd = fd;
  c->gen++;
  c->hello_sent = 0;
  c->backoff_ms = BACKOFF_MIN_MS;
  c->stats.connects++;
}

/* send_nb writes what the socket takes now. It returns the bytes written,
 * or -1 when the connection is broken. */
static long send_nb(ipc_client *c, const uint8_t *p, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = send(c->fd, p + done, n - done, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w > 0) {
      done += (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return -1;
  }
  return (long)done;
}

/* close_records_frame writes the header of the open records or launches
 * frame, now that its length is known. */
static void close_records_frame(ipc_client *c) {
  if (c->rec_hdr < 0) return;
  size_t payload = c->len - (size_t)c->rec_hdr - IPC_HEADER_SIZE;
  put_header(c->buf + c->rec_hdr, c->rec_type, (uint32_t)payload);
  c->rec_hdr = -1;
}

/* open_records_frame starts a records or launches frame of fixed-size
 * records, closing another open one. */
static void open_records_frame(ipc_client *c, uint8_t type, uint16_t size) {
  if (c->rec_hdr >= 0 && c->rec_type == type) return;
  close_records_frame(c);
  c->rec_hdr = (long)c->len;
  c->rec_type = type;
  put16(c->buf + c->len + IPC_HEADER_SIZE, size);
  put16(c->buf + c->len + IPC_HEADER_SIZE + 2, 0);
  c->len += IPC_HEADER_SIZE + IPC_RECORDS2_PREFIX;
}

static void reset_batch(ipc_client *c) {
  c->len = 0;
  c->rec_hdr = -1;
  c->batch_records = 0;
  c->batch_nnames = 0;
  c->batch_ngraphs = 0;
}

/* drop_batch forgets the batch; its names count as unsent again. */
static void drop_batch(ipc_client *c) {
  c->stats.dropped_records += c->batch_records;
  for (uint32_t i = 0; i < c->batch_nnames; i++) c->names[c->batch_names[i]].sent_gen = 0;
  for (uint32_t i = 0; i < c->batch_ngraphs; i++) c->graphs[c->batch_graphs[i]].sent_gen = 0;
  reset_batch(c);
}

/* backlog_batch moves the batch behind the backlog, or drops it when the
 * backlog has no room: the collector is more than IPC_BACKLOG behind. */
static void backlog_batch(ipc_client *c) {
  if (c->len == 0) return;
  size_t room = c->backlog < IPC_BACKLOG ? c->backlog : IPC_BACKLOG;
  if (c->pending_off > 0 && c->pending_len + c->len > room) {
    memmove(c->pending, c->pending + c->pending_off, c->pending_len - c->pending_off);
    c->pending_len -= c->pending_off;
    c->pending_off = 0;
  }
  if (c->pending_len + c->len > room) {
    drop_batch(c);
    return;
  }
  memcpy(c->pending + c->pending_len, c->buf, c->len);
  c->pending_len += c->len;
  c->stats.sent_records += c->batch_records;
  reset_batch(c);
}

static size_t device_frame(const ipc_device *d, uint8_t *p) {
  put_header(p, IPC_FRAME_DEVICE, IPC_DEVICE_SIZE);
  put16(p + 12, d->ordinal);
  put16(p + 14, d->flags);
  put32(p + 16, 0);
  memcpy(p + 20, d->uuid, 16);
  memcpy(p + 36, d->mig, 16);
  return IPC_HEADER_SIZE + IPC_DEVICE_SIZE;
}

#define HELLO_MAX                                                                            \
  (IPC_HEADER_SIZE + 18 + IPC_MAX_HOST + IPC_HEADER_SIZE + 10 + 2 * IPC_MAX_IDENT +          \
   IPC_MAX_DEVICES * (IPC_HEADER_SIZE + IPC_DEVICE_SIZE))

/* hello_frame writes what opens every connection: hello, identity and the
 * devices known so far (docs/cupti-wire.md, frames 1, 8 and 9). */
static size_t hello_frame(ipc_client *c, uint8_t *p) {
  size_t hl = strlen(c->host);
  put_header(p, IPC_FRAME_HELLO, (uint32_t)(18 + hl));
  put32(p + 12, c->pid);
  put32(p + 16, c->hello_flags);
  put64(p + 20, c->start_unix_ns);
  put16(p + 28, (uint16_t)hl);
  memcpy(p + 30, c->host, hl);
  size_t n = IPC_HEADER_SIZE + 18 + hl;
  size_t il = strlen(c->instance), sl = strlen(c->service);
  uint8_t *q = p + n;
  put_header(q, IPC_FRAME_IDENTITY, (uint32_t)(10 + il + sl));
  put32(q + 12, c->ppid);
  put32(q + 16, 0);
  q[20] = (uint8_t)il;
  memcpy(q + 21, c->instance, il);
  q[21 + il] = (uint8_t)sl;
  memcpy(q + 22 + il, c->service, sl);
  n += IPC_HEADER_SIZE + 10 + il + sl;
  for (uint32_t i = 0; i < c->ndevices; i++) n += device_frame(&c->devices[i], p + n);
  return n;
}

/* append_stats queues the cumulative counters, then liveness and the clock
 * offset (docs/cupti-wire.md, frames 4, 6 and 7). */
static int append_stats(ipc_client *c) {
  size_t need = 3 * IPC_HEADER_SIZE + IPC_STATS_SIZE + IPC_LIVENESS_SIZE + IPC_CLOCK_SIZE;
  if (c->len + need > IPC_BUF_SIZE) return 0; /* next flush: the batch is full */
  close_records_frame(c);
  uint8_t *p = c->buf + c->len;
  put_header(p, IPC_FRAME_STATS, IPC_STATS_SIZE);
  put64(p + 12, c->stats.dropped_records);
  put64(p + 20, c->stats.cupti_dropped);
  put64(p + 28, c->stats.names_overflow);
  put64(p + 36, c->stats.pool_exhausted);
  put64(p + 44, c->stats.overflow_dropped);
  put64(p + 52, c->stats.rate_limited);
  put64(p + 60, c->stats.launches_dropped);
  put64(p + 68, c->stats.graph_resets);
  p += IPC_HEADER_SIZE + IPC_STATS_SIZE;
  const ipc_liveness *l = &c->live;
  put_header(p, IPC_FRAME_LIVENESS, IPC_LIVENESS_SIZE);
  put64(p + 12, l->last_buffer_unix_ns);
  put64(p + 20, l->launches);
  put64(p + 28, l->buffers_completed);
  put32(p + 36, l->free_buffers);
  put32(p + 40, l->total_buffers);
  put32(p + 44, l->state);
  put32(p + 48, l->resumes);
  put32(p + 52, l->cupti_version);
  put32(p + 56, 0);
  p += IPC_HEADER_SIZE + IPC_LIVENESS_SIZE;
  put_header(p, IPC_FRAME_CLOCK, IPC_CLOCK_SIZE);
  put64(p + 12, (uint64_t)c->clock.offset_ns);
  put64(p + 20, c->clock.error_ns);
  put64(p + 28, c->clock.sampled_unix_ns);
  c->len += need;
  return 1;
}

void ipc_client_status(ipc_client *c) { c->last_stats_ms = c->now_ms() - STATS_EVERY_MS; }

void ipc_client_flush(ipc_client *c) {
  close_records_frame(c);
  try_connect(c);
  if (c->fd < 0) {
    drop_batch(c);
    return;
  }
  /* The backlog first: it holds the tail of a frame the socket took only
   * partly, so anything sent before it would break the stream. */
  if (c->pending_off < c->pending_len) {
    long w = send_nb(c, c->pending + c->pending_off, c->pending_len - c->pending_off);
    if (w < 0) {
      drop_batch(c);
      disconnect(c);
      return;
    }
    c->pending_off += (size_t)w;
    if (c->pending_off < c->pending_len) {
      backlog_batch(c); /* still congested: keep the batch if there is room */
      return;
    }
    c->pending_len = c->pending_off = 0;
  }
  if (!c->hello_sent) {
    uint8_t hello[HELLO_MAX];
    size_t n = hello_frame(c, hello);
    long w = send_nb(c, hello, n);
    if (w < 0) {
      drop_batch(c);
      disconnect(c);
      return;
    }
    if ((size_t)w < n) {
      if (w > 0) {
        memcpy(c->pending, hello + w, n - (size_t)w);
        c->pending_len = n - (size_t)w;
        c->pending_off = 0;
        c->hello_sent = 1;
        backlog_batch(c);
        return;
      }
      drop_batch(c);
      return;
    }
    c->hello_sent = 1;
  }
  uint64_t now = c->now_ms();
  if (now - c->last_stats_ms >= STATS_EVERY_MS && append_stats(c)) c->last_stats_ms = now;
  if (c->len == 0) return;
  long w = send_nb(c, c->buf, c->len);
  if (w < 0) {
    drop_batch(c);
    disconnect(c);
    return;
  }
  if ((size_t)w < c->len) {
    /* Keep the rest: the collector will get whole frames. */
    memcpy(c->pending, c->buf + w, c->len - (size_t)w);
    c->pending_len = c->len - (size_t)w;
    c->pending_off = 0;
  }
  c->stats.sent_records += c->batch_records;
  reset_batch(c);
}

/* graph_slot returns the slot of id: the one holding it, or the empty one
 * where it goes. A slot packs the id (high half) and graph index + 1. Graph
 * and executable ids are separate counters, so a later graph can take an id
 * over; the slot then points to it (Graphsignal's map does the same). */
static uint32_t graph_slot(const ipc_client *c, uint32_t id) {
  uint32_t mask = IPC_GRAPH_SLOTS - 1;
  for (uint32_t i = (id * 2654435761u) & mask;; i = (i + 1) & mask) {
    uint64_t v = c->graph_slots[i];
    if (v == 0 || (uint32_t)(v >> 32) == id) return i;
  }
}

static void graph_put(ipc_client *c, uint32_t id, uint32_t gi) {
  c->graph_slots[graph_slot(c, id)] = (uint64_t)id << 32 | (gi + 1);
}

void ipc_client_add_graph(ipc_client *c, const ipc_graph *g) {
  if (g->graph_id == 0 && g->exec_id == 0) return;
  if (c->ngraphs == IPC_MAX_GRAPHS) {
    /* A workload that keeps capturing graphs: start over rather than grow. */
    memset(c->graph_slots, 0, sizeof(uint64_t) * IPC_GRAPH_SLOTS);
    c->ngraphs = 0;
    c->batch_ngraphs = 0; /* frames already in the batch stay; nothing to roll back */
    c->stats.graph_resets++;
  }
  uint32_t gi = c->ngraphs++;
  c->graphs[gi] = *g;
  c->graphs[gi].sent_gen = 0;
  /* The executable's id last: it wins where the two counters meet. */
  if (g->graph_id) graph_put(c, g->graph_id, gi);
  if (g->exec_id) graph_put(c, g->exec_id, gi);
}

/* graph_unsent returns the index of the graph a graph record names when its
 * signature is not yet sent on this connection, else -1. */
static int32_t graph_unsent(const ipc_client *c, const ipc_record *r) {
  if (r->kind != IPC_KIND_GRAPH || r->graph_id == 0 || c->ngraphs == 0) return -1;
  uint64_t v = c->graph_slots[graph_slot(c, r->graph_id)];
  if (v == 0) return -1;
  uint32_t gi = (uint32_t)v - 1;
  return c->graphs[gi].sent_gen != c->gen ? (int32_t)gi : -1;
}

/* put_graph_frame defines a graph's signature ahead of its records. */
static void put_graph_frame(ipc_client *c, uint32_t gi) {
  ipc_graph *g = &c->graphs[gi];
  close_records_frame(c);
  uint8_t *p = c->buf + c->len;
  put_header(p, IPC_FRAME_GRAPH, IPC_GRAPH_SIZE);
  put32(p + 12, g->graph_id);
  put32(p + 16, g->exec_id);
  put64(p + 20, g->signature);
  put32(p + 28, g->nodes);
  put32(p + 32, g->flags);
  c->len += IPC_HEADER_SIZE + IPC_GRAPH_SIZE;
  g->sent_gen = c->gen;
  c->batch_graphs[c->batch_ngraphs++] = gi;
}

void ipc_client_add(ipc_client *c, const ipc_record *r) {
  if (c->fd < 0) {
    try_connect(c);
    if (c->fd < 0) {
      c->stats.dropped_records++;
      return;
    }
  }
  uint32_t id = 0;
  if (r->kind == IPC_KIND_KERNEL) {
    uint32_t idx = intern(c, r->name);
    ipc_name *nm = &c->names[idx];
    if (nm->sent_gen != c->gen) {
      /* Define the name before the first record that uses it. */
      size_t need = IPC_HEADER_SIZE + 6 + nm->len + IPC_HEADER_SIZE + IPC_RECORDS2_PREFIX + IPC_RECORD2_SIZE;
      if (c->len + need > IPC_BUF_SIZE) ipc_client_flush(c);
      if (c->fd < 0) {
        c->stats.dropped_records++;
        return;
      }
      close_records_frame(c);
      uint8_t *p = c->buf + c->len;
      put_header(p, IPC_FRAME_STRING, 6 + nm->len);
      put32(p + 12, idx + 1);
      put16(p + 16, (uint16_t)nm->len);
      memcpy(p + 18, c->arena + nm->off, nm->len);
      c->len += IPC_HEADER_SIZE + 6 + nm->len;
      nm->sent_gen = c->gen;
      c->batch_names[c->batch_nnames++] = (uint16_t)idx;
    }
    id = idx + 1;
  }
  int32_t gi = graph_unsent(c, r);
  if (gi >= 0) {
    size_t need = 2 * IPC_HEADER_SIZE + IPC_GRAPH_SIZE + IPC_RECORDS2_PREFIX + IPC_RECORD2_SIZE;
    if (c->len + need > IPC_BUF_SIZE) ipc_client_flush(c);
    if (c->fd < 0) {
      c->stats.dropped_records++;
      return;
    }
    put_graph_frame(c, (uint32_t)gi);
  }
  if (c->len + IPC_HEADER_SIZE + IPC_RECORDS2_PREFIX + IPC_RECORD2_SIZE > IPC_BUF_SIZE) {
    ipc_client_flush(c);
    if (c->fd < 0) {
      c->stats.dropped_records++;
      return;
    }
    if ((r->kind == IPC_KIND_KERNEL && c->names[id - 1].sent_gen != c->gen) || graph_unsent(c, r) >= 0) {
      ipc_client_add(c, r); /* the flush dropped the name's or graph's definition */
      return;
    }
  }
  open_records_frame(c, IPC_FRAME_RECORDS2, IPC_RECORD2_SIZE);
  uint8_t *p = c->buf + c->len;
  p[0] = r->kind;
  p[1] = r->sub;
  put16(p + 2, r->device);
  put32(p + 4, r->stream);
  put64(p + 8, r->start);
  put64(p + 16, r->end < r->start ? r->start : r->end);
  put32(p + 24, id);
  put32(p + 28, r->correlation);
  put64(p + 32, r->bytes);
  put32(p + 40, r->graph_id);
  put32(p + 44, 0);
  put64(p + 48, r->graph_node);
  c->len += IPC_RECORD2_SIZE;
  c->batch_records++;
}

void ipc_client_add_launch(ipc_client *c, const ipc_launch *l) {
  if (c->fd < 0) {
    try_connect(c);
    if (c->fd < 0) {
      c->stats.launches_dropped++;
      return;
    }
  }
  if (c->len + IPC_HEADER_SIZE + IPC_RECORDS2_PREFIX + IPC_LAUNCH_SIZE > IPC_BUF_SIZE) {
    ipc_client_flush(c);
    if (c->fd < 0) {
      c->stats.launches_dropped++;
      return;
    }
  }
  open_records_frame(c, IPC_FRAME_LAUNCHES, IPC_LAUNCH_SIZE);
  uint8_t *p = c->buf + c->len;
  p[0] = l->kind;
  p[1] = l->domain;
  put16(p + 2, 0);
  put32(p + 4, l->correlation);
  put32(p + 8, l->tid);
  put32(p + 12, 0);
  put64(p + 16, l->time);
  c->len += IPC_LAUNCH_SIZE;
}

static void copy_cut(char *dst, const char *src) {
  size_t n = src ? strlen(src) : 0;
  if (n > IPC_MAX_IDENT) n = IPC_MAX_IDENT;
  if (n) memcpy(dst, src, n);
  dst[n] = '\0';
}

void ipc_client_set_identity(ipc_client *c, uint32_t ppid, const char *instance, const char *service) {
  c->ppid = ppid;
  copy_cut(c->instance, instance);
  copy_cut(c->service, service);
}

void ipc_client_add_device(ipc_client *c, const ipc_device *d) {
  uint32_t i = 0;
  while (i < c->ndevices && c->devices[i].ordinal != d->ordinal) i++;
  if (i == IPC_MAX_DEVICES) return;
  c->devices[i] = *d;
  if (i == c->ndevices) c->ndevices++;
  /* A connection that already said hello gets the frame now; a new one
   * gets every device after its hello. */
  if (c->fd < 0 || !c->hello_sent) return;
  if (c->len + IPC_HEADER_SIZE + IPC_DEVICE_SIZE > IPC_BUF_SIZE) ipc_client_flush(c);
  if (c->fd < 0 || !c->hello_sent) return;
  close_records_frame(c);
  c->len += device_frame(d, c->buf + c->len);
}

void ipc_client_drop_fd(ipc_client *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->pending_len = c->pending_off = 0;
  reset_batch(c);
}

void ipc_client_close(ipc_client *c) {
  if (c->buf && c->fd >= 0) ipc_client_flush(c);
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  free(c->buf);
  free(c->pending);
  free(c->batch_names);
  free(c->names);
  free(c->arena);
  free(c->slots);
  free((void *)c->ptr_keys);
  free(c->ptr_vals);
  free(c->graphs);
  free(c->graph_slots);
  free(c->batch_graphs);
  c->graphs = NULL;
  c->graph_slots = NULL;
  c->batch_graphs = NULL;
  c->buf = c->pending = NULL;
  c->batch_names = NULL;
  c->names = NULL;
  c->arena = NULL;
  c->slots = NULL;
  c->ptr_keys = NULL;
  c->ptr_vals = NULL;
}
