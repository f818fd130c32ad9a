// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/* cupti_inject.c: the thin CUPTI layer of libinferprof_cupti.so.
 *
 * The CUDA driver loads this library when CUDA_INJECTION64_PATH names it and
 * calls InitializeInjection, the only exported symbol. It enables CUPTI
 * activity records, turns them into ipc_record and hands them to ipc_client,
 * which streams them to the collector's cupti receiver without blocking.
 *
 * Rules (docs/cupti-receiver.md, "Injection library"):
 *  - never block or crash the engine: failures log, count, and return;
 *  - never hand CUPTI a NULL buffer where that crashes it (API < 27, see
 *    pytorch/kineto libkineto/src/CuptiActivityApi.cpp
 *    kCuptiBufferRejectionMinVersion): an overflow buffer takes the records,
 *    which are dropped and counted;
 *  - our lock is never held while calling CUPTI;
 *  - at exit: stop and join the flush thread (bounded), force a flush, send
 *    once more, disable; a forked child makes no CUPTI call at all;
 *  - in graph mode, each instantiated CUDA graph gets Graphsignal's
 *    structural signature (graph_sig.h), once, off the launch path. */
#define _GNU_SOURCE
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <cupti_version.h>
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cupti_v2.h"
#include "graph_sig.h"
#include "identity.h"
#include "ipc_client.h"
#include "launch_ring.h"
#include "layouts.h"
#include "limits.h"

#define EXPORT __attribute__((visibility("default")))

/* CUPTI below this API version crashes on a NULL buffer (CUDA 12.9 is 27). */
#define CUPTI_REJECT_MIN_VERSION 27u

static int debug_on;

static void logf_(const char *level, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, "[inferprof-cupti] %s: %s\n", level, msg);
}

#define LOG_WARN(...) logf_("warn", __VA_ARGS__)
#define LOG_DEBUG(...)                         \
  do {                                         \
    if (debug_on) logf_("debug", __VA_ARGS__); \
  } while (0)

/* CUPTI_CALL logs a failed call and returns its result; it never aborts. */
#define CUPTI_CALL(call)                                             \
  ({                                                                 \
    CUptiResult _r = (call);                                         \
    if (_r != CUPTI_SUCCESS) {                                       \
      const char *_s = "?";                                          \
      cuptiGetResultString(_r, &_s);                                 \
      LOG_WARN("%s -> %d (%s)", #call, (int)_r, _s);                 \
    } else {                                                         \
      LOG_DEBUG("%s -> ok", #call);                                  \
    }                                                                \
    _r;                                                              \
  })

enum { KIND_KERNEL = 1, KIND_MEMCPY = 2, KIND_MEMSET = 4, KIND_SYNC = 8 };

/* Configuration, from INFERPROF_* environment variables
 * (docs/cupti-receiver.md has the table). */
static struct {
  char endpoint[108];
  long flush_ms;
  long buffers;
  long buffer_kb;
  int graph_mode;
  unsigned kinds;
  double rate, graph_rate; /* launches/s per thread; 0 = every launch */
  duty duty;
  long resume_ms; /* 0 = never take CUPTI back from another profiler */
  long exit_ms;
  int multi_sub; /* use multi-subscriber mode where CUPTI offers it */
  long sndbuf_kb;
  int launches; /* send launch records, so the collector ties kernels to engine steps */
} cfg;

static long env_long(const char *name, long def, long lo, long hi) {
  const char *v = getenv(name);
  if (v == NULL || *v == '\0') return def;
  char *end;
  long x = strtol(v, &end, 10);
  if (*end != '\0' || x < lo || x > hi) {
    LOG_WARN("%s=%s is not a number in [%ld, %ld]; using %ld", name, v, lo, hi, def);
    return def;
  }
  return x;
}

static unsigned parse_kinds(const char *v) {
  const unsigned all = KIND_KERNEL | KIND_MEMCPY | KIND_MEMSET | KIND_SYNC;
  if (v == NULL || *v == '\0' || strcmp(v, "all") == 0) return all;
  unsigned k = 0;
  char buf[128];
  snprintf(buf, sizeof(buf), "%s", v);
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (strcmp(t, "kernel") == 0) k |= KIND_KERNEL;
    else if (strcmp(t, "memcpy") == 0) k |= KIND_MEMCPY;
    else if (strcmp(t, "memset") == 0) k |= KIND_MEMSET;
    else if (strcmp(t, "sync") == 0) k |= KIND_SYNC;
    else {
      LOG_WARN("INFERPROF_CUPTI_KINDS=%s: unknown kind %s (kernel, memcpy, memset, sync, all); using all", v, t);
      return all;
    }
  }
  return k;
}

/* The cupti receiver's default too (internal/unixsock/defaults.go, whose
   test reads this line). */
#define INFERPROF_DEFAULT_ENDPOINT "/tmp/inferprof/cupti.sock"

static void load_config(void) {
  debug_on = getenv("INFERPROF_CUPTI_DEBUG") && strcmp(getenv("INFERPROF_CUPTI_DEBUG"), "1") == 0;
  const char *ep = getenv("INFERPROF_CUPTI_ENDPOINT");
  if (ep == NULL || *ep == '\0') ep = INFERPROF_DEFAULT_ENDPOINT;
  if (strlen(ep) >= sizeof(cfg.endpoint)) {
    LOG_WARN("INFERPROF_CUPTI_ENDPOINT is longer than a socket path may be; using the default");
    ep = INFERPROF_DEFAULT_ENDPOINT;
  }
  strcpy(cfg.endpoint, ep);
  cfg.flush_ms = env_long("INFERPROF_CUPTI_FLUSH_MS", 200, 10, 10000);
  cfg.buffers = env_long("INFERPROF_CUPTI_BUFFERS", 8, 2, 64);
  /* NVIDIA recommends 1 to 10 MB per buffer (CUPTI guide, Activity API). */
  cfg.buffer_kb = env_long("INFERPROF_CUPTI_BUFFER_KB", 2048, 1024, 10240);
  const char *gm = getenv("INFERPROF_CUPTI_GRAPH_MODE");
  cfg.graph_mode = 0;
  if (gm && strcmp(gm, "graph") == 0) {
    cfg.graph_mode = 1;
  } else if (gm && *gm && strcmp(gm, "node") != 0) {
    LOG_WARN("INFERPROF_CUPTI_GRAPH_MODE=%s is not node or graph; using node", gm);
  }
  cfg.kinds = parse_kinds(getenv("INFERPROF_CUPTI_KINDS"));
  if (!(cfg.kinds & KIND_KERNEL)) LOG_WARN("INFERPROF_CUPTI_KINDS has no kernel: only copies, memsets and syncs are recorded");
  cfg.rate = (double)env_long("INFERPROF_CUPTI_RATE_LIMIT", 0, 0, 1000000);
  cfg.graph_rate = (double)env_long("INFERPROF_CUPTI_GRAPH_RATE_LIMIT", 0, 0, 1000000);
  const char *dc = getenv("INFERPROF_CUPTI_DUTY_CYCLE");
  if (duty_parse(dc, &cfg.duty) != 0)
    LOG_WARN("INFERPROF_CUPTI_DUTY_CYCLE=%s is not ON_MS/PERIOD_MS with 0 < ON <= PERIOD and PERIOD >= 100; always on", dc);
  cfg.resume_ms = env_long("INFERPROF_CUPTI_RESUME_MS", 300000, 0, 86400000);
  cfg.exit_ms = env_long("INFERPROF_CUPTI_EXIT_MS", 500, 0, 10000);
  cfg.multi_sub = (int)env_long("INFERPROF_CUPTI_MULTI_SUBSCRIBER", 1, 0, 1);
  /* CUPTI hands over a buffer (thousands of records) at a time and the
   * library encodes it in about a millisecond: a socket buffer of a few MB
   * rides out a collector descheduled for tens of ms instead of dropping.
   * The kernel caps it at net.core.wmem_max. */
  cfg.sndbuf_kb = env_long("INFERPROF_CUPTI_SNDBUF_KB", 4096, 0, 65536);
  cfg.launches = (int)env_long("INFERPROF_CUPTI_LAUNCHES", 1, 0, 1);
}

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static uint64_t realtime_ns(void) { return clock_ns(CLOCK_REALTIME); }
static uint64_t mono_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

/* ---- state ---- */

static uint32_t cupti_version;
static int can_reject; /* CUPTI accepts a NULL buffer */
static CUpti_SubscriberHandle subscriber;
/* multi_sub: subscribed with cuptiSubscribe_v2 in multi-subscriber mode;
 * from then on every activity call must be the v2 one (cupti_v2.h). */
static int multi_sub;
static ip_cupti_v2 v2;
static _Atomic int forked_child;
static _Atomic int stopping;
static int active; /* init succeeded */

static pthread_mutex_t client_mu = PTHREAD_MUTEX_INITIALIZER;
static ipc_client client;

static _Atomic int64_t clock_offset_ns; /* Unix ns minus CUPTI ns */
static _Atomic uint64_t cupti_dropped, pool_exhausted, overflow_dropped, rate_limited;
static _Atomic uint64_t launches, buffers_requested, buffers_completed, last_buffer_unix;
static _Atomic uint32_t resumes;
static _Atomic int displaced, duty_off;

/* Launch records (issue 13): the callbacks queue each kernel and graph
 * launch with its correlation id, thread and wall-clock time; the queue is
 * drained into the stream before every buffer of kernel records, so the
 * collector has a kernel's launch before the kernel. */
static launch_ring *lring; /* NULL: launch records off */
static uint64_t lring_dropped_sent; /* ring drops already added to the stats */
static __thread uint32_t my_tid;
static __thread int rt_depth; /* inside a runtime launch: its driver call is not a second launch */

/* Device ordinals seen in records, and those whose UUID was looked up. */
static _Atomic uint64_t seen_devs;
static uint64_t looked_up_devs;

/* ---- buffers ---- */

static uint8_t *pool;
static size_t pool_buf_size;
static _Atomic uint64_t pool_free;

/* The overflow buffers take records when the pool is empty and CUPTI cannot
 * be refused. Their records are counted and dropped. When both are out, the
 * first is lent again: CUPTI then writes two streams into it, which is
 * harmless because nothing in it is read but the record count. */
#define OVERFLOW_SLOTS 2
#define OVERFLOW_SIZE (1u << 20)
static uint8_t *overflow;
static _Atomic int overflow_users[OVERFLOW_SLOTS];

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *max_records = 0;
  atomic_fetch_add(&buffers_requested, 1);
  uint64_t f = atomic_load(&pool_free);
  while (f != 0) {
    int i = __builtin_ctzll(f);
    if (atomic_compare_exchange_weak(&pool_free, &f, f & ~(1ull << i))) {
      *buffer = pool + (size_t)i * pool_buf_size;
      *size = pool_buf_size;
      return;
    }
  }
  atomic_fetch_add(&pool_exhausted, 1);
  if (can_reject) {
    /* CUPTI >= 27 drops these records and counts them for us. */
    *buffer = NULL;
    *size = 0;
    return;
  }
  int slot = 0;
  for (int i = 0; i < OVERFLOW_SLOTS; i++) {
    int zero = 0;
    if (atomic_compare_exchange_strong(&overflow_users[i], &zero, 1)) {
      slot = i + 1;
      break;
    }
  }
  if (slot == 0) {
    atomic_fetch_add(&overflow_users[0], 1);
    slot = 1;
  }
  *buffer = overflow + (size_t)(slot - 1) * OVERFLOW_SIZE;
  *size = OVERFLOW_SIZE;
}

static int overflow_slot(const uint8_t *b) {
  if (overflow == NULL || b < overflow || b >= overflow + OVERFLOW_SLOTS * (size_t)OVERFLOW_SIZE) return -1;
  return (int)((size_t)(b - overflow) / OVERFLOW_SIZE);
}

static void release_buffer(uint8_t *b) {
  if (b == NULL || b < pool || b >= pool + (size_t)cfg.buffers * pool_buf_size) return;
  size_t i = (size_t)(b - pool) / pool_buf_size;
  atomic_fetch_or(&pool_free, 1ull << i);
}

/* ---- records ---- */

/* Context id to device, learned from kernel and copy records, so that sync
 * records (which carry only a context) get a device. */
#define CTX_SLOTS 64
static _Atomic uint64_t ctx_dev[CTX_SLOTS]; /* (context id << 16) | device, 0 = empty */

static void learn_ctx(uint32_t ctx, uint32_t dev) {
  atomic_store(&ctx_dev[ctx % CTX_SLOTS], ((uint64_t)ctx << 16) | (dev & 0xFFFFu));
}

static uint16_t ctx_device(uint32_t ctx) {
  uint64_t v = atomic_load(&ctx_dev[ctx % CTX_SLOTS]);
  return v != 0 && (uint32_t)(v >> 16) == ctx ? (uint16_t)(v & 0xFFFFu) : IPC_DEVICE_UNKNOWN;
}

static corr_table *sampled; /* launches that took a token; NULL: no rate limit */

/* convert fills r from a CUPTI record; it returns 0 for records we skip. */
static int convert(const CUpti_Activity *a, ipc_record *r) {
  memset(r, 0, sizeof(*r));
  switch (a->kind) {
  case CUPTI_ACTIVITY_KIND_KERNEL:
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    r->kind = IPC_KIND_KERNEL;
    r->device = (uint16_t)rd32(a, LK_DEVICE);
    r->stream = rd32(a, LK_STREAM);
    r->start = rd64(a, LK_START);
    r->end = rd64(a, LK_END);
    r->name = rdptr(a, LK_NAME);
    r->correlation = rd32(a, LK_CORRELATION);
    r->graph_id = rd32(a, LK_GRAPH);
    r->graph_node = rd64(a, LK_GRAPH_NODE);
    learn_ctx(rd32(a, LK_CONTEXT), rd32(a, LK_DEVICE));
    if (r->device < 64) atomic_fetch_or_explicit(&seen_devs, 1ull << r->device, memory_order_relaxed);
    if (sampled && !corr_has(sampled, r->correlation)) {
      atomic_fetch_add_explicit(&rate_limited, 1, memory_order_relaxed);
      return 0;
    }
    break;
  case CUPTI_ACTIVITY_KIND_MEMCPY:
  case CUPTI_ACTIVITY_KIND_MEMSET:
    r->kind = a->kind == CUPTI_ACTIVITY_KIND_MEMCPY ? IPC_KIND_MEMCPY : IPC_KIND_MEMSET;
    r->sub = a->kind == CUPTI_ACTIVITY_KIND_MEMCPY ? ((const uint8_t *)a)[LM_KIND_BYTE] : (uint8_t)rd16(a, LS_KIND_BYTE);
    r->device = (uint16_t)rd32(a, LM_DEVICE);
    r->stream = rd32(a, LM_STREAM);
    r->start = rd64(a, LM_START);
    r->end = rd64(a, LM_END);
    r->bytes = rd64(a, LM_BYTES);
    r->correlation = rd32(a, LM_CORRELATION);
    r->graph_id = rd32(a, LM_GRAPH);
    r->graph_node = rd64(a, LM_GRAPH_NODE);
    learn_ctx(rd32(a, LM_CONTEXT), rd32(a, LM_DEVICE));
    break;
  case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
    r->kind = IPC_KIND_SYNC;
    r->sub = (uint8_t)rd32(a, LY_TYPE);
    r->device = ctx_device(rd32(a, LY_CONTEXT));
    r->stream = rd32(a, LY_STREAM);
    r->start = rd64(a, LY_START);
    r->end = rd64(a, LY_END);
    r->correlation = rd32(a, LY_CORRELATION);
    break;
  case CUPTI_ACTIVITY_KIND_GRAPH_TRACE:
    r->kind = IPC_KIND_GRAPH;
    r->device = (uint16_t)rd32(a, LG_DEVICE);
    r->stream = rd32(a, LG_STREAM);
    r->start = rd64(a, LG_START);
    r->end = rd64(a, LG_END);
    r->correlation = rd32(a, LG_CORRELATION);
    r->graph_id = rd32(a, LG_GRAPH);
    break;
  default:
    return 0;
  }
  /* Incomplete records carry zero or reversed timestamps; skip them. */
  if (r->start == 0 || r->end < r->start) return 0;
  int64_t off = atomic_load_explicit(&clock_offset_ns, memory_order_relaxed);
  r->start = (uint64_t)((int64_t)r->start + off);
  r->end = (uint64_t)((int64_t)r->end + off);
  return 1;
}

static void emit_launch(void *arg, const ipc_launch *l) {
  (void)arg;
  ipc_client_add_launch(&client, l);
}

/* drain_launches_locked sends the queued launches, then a mark when the
 * queue was emptied; client_mu is held. */
static void drain_launches_locked(void) {
  if (lring == NULL || atomic_load(&forked_child)) return;
  uint64_t mark = 0;
  if (lr_drain(lring, emit_launch, NULL, realtime_ns, &mark)) {
    ipc_launch m = {.kind = IPC_LAUNCH_MARK, .time = mark};
    ipc_client_add_launch(&client, &m);
  }
  uint64_t d = atomic_load_explicit(&lring->dropped, memory_order_relaxed);
  client.stats.launches_dropped += d - lring_dropped_sent;
  lring_dropped_sent = d;
}

static void add_batch(const ipc_record *recs, int n) {
  pthread_mutex_lock(&client_mu);
  if (!atomic_load(&forked_child))
    for (int i = 0; i < n; i++) ipc_client_add(&client, &recs[i]);
  pthread_mutex_unlock(&client_mu);
}

/* act_next steps through a completed buffer with the call that matches how
 * we subscribed: CUPTI refuses v1 calls from a v2 subscriber. */
static CUptiResult act_next(uint8_t *buffer, size_t valid, CUpti_Activity **a) {
  return multi_sub ? v2.next_record(subscriber, buffer, valid, a) : cuptiActivityGetNextRecord(buffer, valid, a);
}

/* complete_buffer reads, converts and hands on one completed buffer. The
 * v1 callback names its context and stream; the v2 one does not, and the
 * v2 dropped-record count is asked for the whole subscriber, as jax-ml/jax
 * and openxla/xla do (NULL context, stream 0). */
static void complete_buffer(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t valid) {
  if (atomic_load(&forked_child)) { /* no CUPTI calls in a forked child */
    release_buffer(buffer);
    return;
  }
  atomic_store(&last_buffer_unix, realtime_ns());
  atomic_fetch_add(&buffers_completed, 1);
  CUpti_Activity *a = NULL;
  int ov = overflow_slot(buffer);
  if (ov >= 0) {
    uint64_t n = 0;
    while (valid > 0 && act_next(buffer, valid, &a) == CUPTI_SUCCESS) n++;
    atomic_fetch_add(&overflow_dropped, n);
    atomic_fetch_sub(&overflow_users[ov], 1);
  } else {
    enum { BATCH = 256 };
    ipc_record batch[BATCH];
    int n = 0;
    /* Every kernel in this buffer was launched before it completed: its
     * launch is in the queue, and goes out first. */
    pthread_mutex_lock(&client_mu);
    drain_launches_locked();
    pthread_mutex_unlock(&client_mu);
    /* Records are converted without our lock; the lock covers only encoding. */
    while (valid > 0 && act_next(buffer, valid, &a) == CUPTI_SUCCESS) {
      if (convert(a, &batch[n])) n++;
      if (n == BATCH) {
        add_batch(batch, n);
        n = 0;
      }
    }
    if (n > 0) add_batch(batch, n);
  }
  size_t dropped = 0;
  CUptiResult dr = CUPTI_ERROR_NOT_SUPPORTED;
  if (!multi_sub) dr = cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped);
  else if (v2.dropped) dr = v2.dropped(subscriber, NULL, 0, &dropped);
  if (dr == CUPTI_SUCCESS && dropped > 0) atomic_fetch_add(&cupti_dropped, dropped);
  release_buffer(buffer);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
  (void)size;
  complete_buffer(ctx, stream, buffer, valid);
}

/* The v2 buffer callbacks (CUpti_BuffersCallback*Func_v2) carry an info
 * struct we do not need: predefined records, not user-defined ones. */
static void CUPTIAPI buffer_requested_v2(uint8_t **buffer, size_t *size, size_t *max_records, void *info) {
  (void)info;
  buffer_requested(buffer, size, max_records);
}

static void CUPTIAPI buffer_completed_v2(uint8_t *buffer, size_t size, size_t valid, void *info) {
  (void)size;
  (void)info;
  complete_buffer(NULL, 0, buffer, valid);
}

/* Activity calls, v1 or v2 as we subscribed. */
static CUptiResult act_register(void) {
  return multi_sub ? v2.register_callbacks(subscriber, buffer_requested_v2, buffer_completed_v2)
                   : cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
}
static CUptiResult act_enable(CUpti_ActivityKind k) {
  return multi_sub ? v2.enable(subscriber, k, NULL) : cuptiActivityEnable(k);
}
static CUptiResult act_disable(CUpti_ActivityKind k) {
  return multi_sub ? v2.disable(subscriber, k, NULL) : cuptiActivityDisable(k);
}
static CUptiResult act_timestamp(uint64_t *ts) {
  return multi_sub ? v2.timestamp(subscriber, ts) : cuptiGetTimestamp(ts);
}

/* ---- CUDA graph signatures ---- */

/* driver_sym finds a CUDA driver call: in libcuda itself, which loaded us
 * but may have been opened RTLD_LOCAL by the CUDA runtime, else anywhere
 * in the process. cupti_sym does the same for libcupti, whose newer calls
 * the headers we build against may not declare. */
static void *driver_sym(const char *name) {
  static void *h;
  static int tried;
  if (!tried) {
    tried = 1;
    h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  }
  void *f = h ? dlsym(h, name) : NULL;
  return f ? f : dlsym(RTLD_DEFAULT, name);
}

static void *cupti_sym(const char *name) {
  Dl_info info;
  void *f = NULL;
  if (dladdr((void *)cuptiGetVersion, &info) && info.dli_fname) {
    void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (h) f = dlsym(h, name);
  }
  return f ? f : dlsym(RTLD_DEFAULT, name);
}

/* The driver's graph calls (cuda.h); CUresult 0 is success. */
typedef int (*cu_graph_nodes_fn)(void *graph, void **nodes, size_t *n);
typedef int (*cu_node_type_fn)(void *node, int *type);
typedef int (*cu_kernel_params_fn)(void *node, void *params);
typedef int (*cu_func_name_fn)(const char **name, void *func);
typedef CUptiResult (*cupti_exec_id_fn)(void *exec, uint32_t *id);
static struct {
  cu_graph_nodes_fn nodes;
  cu_node_type_fn type;
  cu_kernel_params_fn params;
  cu_func_name_fn name;
  cupti_exec_id_fn exec_id;
} gdrv;

/* resolve_graph_calls looks the calls up once; it returns 0 when the
 * driver cannot list a graph's nodes. cuFuncGetName is CUDA 12.3's, and
 * cuptiGetGraphExecId newer than CUDA 11.8's CUPTI: without them a graph's
 * kernels go unnamed in its signature, or it is known by its graph id only. */
static int resolve_graph_calls(void) {
  gdrv.nodes = (cu_graph_nodes_fn)driver_sym("cuGraphGetNodes");
  gdrv.type = (cu_node_type_fn)driver_sym("cuGraphNodeGetType");
  gdrv.params = (cu_kernel_params_fn)driver_sym("cuGraphKernelNodeGetParams_v2");
  if (gdrv.params == NULL) gdrv.params = (cu_kernel_params_fn)driver_sym("cuGraphKernelNodeGetParams");
  gdrv.name = (cu_func_name_fn)driver_sym("cuFuncGetName");
  gdrv.exec_id = (cupti_exec_id_fn)cupti_sym("cuptiGetGraphExecId");
  if (gdrv.name == NULL) LOG_WARN("the CUDA driver has no cuFuncGetName (before 12.3): graph signatures leave kernels unnamed");
  return gdrv.nodes != NULL && gdrv.type != NULL;
}

/* graph_created computes an instantiated graph's signature as Graphsignal's
 * graph_resource_callback does (cupti_activity.cpp @ 40f84e6): from the
 * source graph's nodes, at most GRAPH_SIG_MAX_NODES, registered under the
 * graph's id and the executable's. It runs once per instantiation, in the
 * engine's thread; a failure leaves the graph unsigned, never the engine
 * hurt. Like Graphsignal it calls the driver from inside the callback: the
 * source graph may be destroyed right after (PyTorch frees its capture). */
static void graph_created(const void *data) {
  const CUpti_ResourceData *rd = data;
  if (rd == NULL || rd->resourceDescriptor == NULL || gdrv.nodes == NULL) return;
  const CUpti_GraphData *gd = rd->resourceDescriptor;
  size_t n = 0;
  if (gd->graph == NULL || gdrv.nodes(gd->graph, NULL, &n) != 0 || n == 0) return;
  if (n > GRAPH_SIG_MAX_NODES) n = GRAPH_SIG_MAX_NODES;
  void **nodes = malloc(n * sizeof(*nodes));
  graph_tok *toks = malloc(n * sizeof(*toks));
  size_t got = n, k = 0;
  uint32_t flags = 0;
  if (nodes == NULL || toks == NULL || gdrv.nodes(gd->graph, nodes, &got) != 0) goto out;
  for (size_t i = 0; i < got && i < n; i++) {
    int t;
    if (nodes[i] == NULL || gdrv.type(nodes[i], &t) != 0) continue;
    toks[k] = (graph_tok){.type = graph_node_type_name(t)};
    if (t == 0) { /* CU_GRAPH_NODE_TYPE_KERNEL: named by its symbol */
      const char *name = NULL;
      _Alignas(8) uint8_t params[256] = {0}; /* CUDA_KERNEL_NODE_PARAMS v1 or v2; func first */
      void *func = NULL;
      if (gdrv.params && gdrv.params(nodes[i], params) == 0) memcpy(&func, params, sizeof(func));
      if (func && gdrv.name && gdrv.name(&name, func) != 0) name = NULL;
      if (name == NULL) flags |= IPC_GRAPH_NAMES_MISSING;
      toks[k].name = name ? name : "";
    }
    k++;
  }
  if (k == 0) goto out;
  ipc_graph g = {.signature = graph_sig_hash(toks, k), .nodes = (uint32_t)k, .flags = flags};
  uint32_t id = 0;
  if (cuptiGetGraphId(gd->graph, &id) == CUPTI_SUCCESS) g.graph_id = id;
  if (gd->graphExec && gdrv.exec_id && gdrv.exec_id(gd->graphExec, &id) == CUPTI_SUCCESS) g.exec_id = id;
  pthread_mutex_lock(&client_mu);
  if (!atomic_load(&forked_child)) ipc_client_add_graph(&client, &g);
  pthread_mutex_unlock(&client_mu);
  LOG_DEBUG("graph %u (executable %u): %zu nodes, signature %016llx", g.graph_id, g.exec_id, k,
            (unsigned long long)g.signature);
out:
  free(nodes);
  free(toks);
}

/* ---- callbacks: launches, context teardown ---- */

static __thread token_bucket eager_tb, graph_tb;
static __thread int tb_ready;

static int is_graph_launch(CUpti_CallbackDomain d, CUpti_CallbackId id) {
  if (d == CUPTI_CB_DOMAIN_DRIVER_API)
    return id == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch || id == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz;
  return id == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000 || id == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000;
}

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *data) {
  (void)userdata;
  if (atomic_load_explicit(&forked_child, memory_order_relaxed)) return;
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    /* The last records of a context would be lost otherwise, and this is
     * the last safe moment to ask CUPTI for them. */
    if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (cbid == CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED) graph_created(data);
    return;
  }
  const CUpti_CallbackData *cb = data;
  if (cb == NULL) return;
  /* cudaLaunchKernel may reach the driver's launch below it: one launch,
   * whose correlation id (the runtime call's) its kernel carries. */
  int nested = 0;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    if (cb->callbackSite != CUPTI_API_ENTER) {
      if (rt_depth > 0) rt_depth--;
      return;
    }
    rt_depth++;
  } else if (cb->callbackSite != CUPTI_API_ENTER) {
    return;
  } else {
    nested = rt_depth > 0;
  }
  atomic_fetch_add_explicit(&launches, 1, memory_order_relaxed);
  int take = 1;
  if (sampled != NULL) {
    if (!tb_ready) {
      tb_init(&eager_tb, cfg.rate);
      tb_init(&graph_tb, cfg.graph_rate);
      tb_ready = 1;
    }
    token_bucket *b = is_graph_launch(domain, cbid) ? &graph_tb : &eager_tb;
    take = tb_take(b, mono_ns());
    if (take) corr_add(sampled, cb->correlationId);
  }
  /* Only launches whose kernels are recorded: sampled ones, and none in
   * the off part of the duty cycle. */
  if (lring != NULL && take && !nested && !atomic_load_explicit(&duty_off, memory_order_relaxed)) {
    if (my_tid == 0) my_tid = (uint32_t)syscall(SYS_gettid);
    ipc_launch l = {.kind = is_graph_launch(domain, cbid) ? IPC_LAUNCH_GRAPH : IPC_LAUNCH_KERNEL,
                    .domain = domain == CUPTI_CB_DOMAIN_DRIVER_API ? IPC_DOMAIN_DRIVER : IPC_DOMAIN_RUNTIME,
                    .correlation = cb->correlationId,
                    .tid = my_tid};
    lr_push(lring, &l, realtime_ns);
  }
}

static const struct {
  CUpti_CallbackDomain domain;
  CUpti_CallbackId id;
} launch_cbids[] = {
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000},
};

/* ---- activity kinds ---- */

static CUpti_ActivityKind kinds[6];
static int nkinds;

/* enable_kinds enables what cfg asks for and checks every result. It
 * returns 0 when kernel activity (the reason we are here) is off. */
static int enable_kinds(void) {
  nkinds = 0;
  if (cfg.kinds & KIND_KERNEL) {
    if (CUPTI_CALL(act_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) != CUPTI_SUCCESS) {
      LOG_WARN("kernel activity could not be enabled; the library stays off in this process");
      return 0;
    }
    kinds[nkinds++] = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    if (cfg.graph_mode && multi_sub) {
      /* Graph-level trace is one switch for every subscriber
       * (CUPTI_ACTIVITY_ATTR_ENABLE_MULTI_SUBSCRIBER_GRAPH_TRACE): turning it
       * on would take per-kernel records inside graphs away from a
       * torch.profiler or nsys run beside us. */
      LOG_WARN("graph mode is not used in multi-subscriber mode (it would hide graph kernels from other profilers); node mode");
      cfg.graph_mode = 0;
    }
    if (cfg.graph_mode) {
      /* GRAPH_TRACE turns per-kernel records inside graphs off (CUPTI 11.7
       * Update 1 release notes): graph mode reports whole graph launches. */
      if (CUPTI_CALL(act_enable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE)) == CUPTI_SUCCESS) {
        kinds[nkinds++] = CUPTI_ACTIVITY_KIND_GRAPH_TRACE;
      } else {
        LOG_WARN("graph trace could not be enabled; falling back to node mode (kernels inside graphs one by one)");
        cfg.graph_mode = 0;
      }
    }
  }
  static const struct {
    unsigned bit;
    CUpti_ActivityKind kind;
    const char *name;
  } rest[] = {{KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY, "memcpy"},
              {KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMSET, "memset"},
              {KIND_SYNC, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "sync"}};
  for (size_t i = 0; i < sizeof(rest) / sizeof(rest[0]); i++) {
    if (!(cfg.kinds & rest[i].bit)) continue;
    if (CUPTI_CALL(act_enable(rest[i].kind)) == CUPTI_SUCCESS) {
      kinds[nkinds++] = rest[i].kind;
    } else {
      LOG_WARN("%s activity could not be enabled; it is not recorded", rest[i].name);
    }
  }
  return nkinds > 0;
}

static void disable_kinds(void) {
  for (int i = 0; i < nkinds; i++) CUPTI_CALL(act_disable(kinds[i]));
}

static void reenable_kinds(void) {
  for (int i = 0; i < nkinds; i++) CUPTI_CALL(act_enable(kinds[i]));
}

/* ---- clock ---- */

/* sample_clock takes a few realtime/CUPTI/realtime triples and keeps the
 * tightest: the offset is known to within half its realtime gap. NTP moves
 * CLOCK_REALTIME, so this runs again every second from the flush thread. */
static void sample_clock(ipc_clock *out) {
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 5; i++) {
    uint64_t c = 0;
    uint64_t t1 = realtime_ns();
    if (act_timestamp(&c) != CUPTI_SUCCESS) return;
    uint64_t t2 = realtime_ns();
    if (t2 < t1 || t2 - t1 >= best) continue;
    best = t2 - t1;
    out->offset_ns = (int64_t)(t1 + best / 2) - (int64_t)c;
    out->error_ns = best / 2 + 1;
    out->sampled_unix_ns = t2;
  }
  if (best != UINT64_MAX) atomic_store(&clock_offset_ns, out->offset_ns);
}

/* ---- devices ---- */

/* The driver calls that name a device, looked up in the process (libcuda is
 * loaded: it loaded us). CUdevice is an int ordinal and CUresult 0 is
 * success (cuda.h). cuDeviceGetUuid_v2 gives a MIG compute instance's own
 * UUID where cuDeviceGetUuid gives its GPU's (CUDA driver API reference,
 * cuDeviceGetUuid_v2: "If the device is in MIG mode, returns its MIG UUID
 * which uniquely identifies the subscribed MIG compute instance"). */
typedef int (*cu_device_get_fn)(int *dev, int ordinal);
typedef int (*cu_device_uuid_fn)(void *uuid, int dev);

/* device_uuid fills d for a CUDA ordinal as CUPTI numbers devices in its
 * records (cuptiGetDeviceId: "similar manner to cudaGetDevice()"). */
static int device_uuid(int ordinal, ipc_device *d) {
  static cu_device_get_fn get;
  static cu_device_uuid_fn v1, v2;
  static int looked;
  if (!looked) {
    looked = 1;
    get = (cu_device_get_fn)driver_sym("cuDeviceGet");
    v1 = (cu_device_uuid_fn)driver_sym("cuDeviceGetUuid");
    v2 = (cu_device_uuid_fn)driver_sym("cuDeviceGetUuid_v2");
  }
  int dev = 0;
  if (get == NULL || (v1 == NULL && v2 == NULL) || get(&dev, ordinal) != 0) return 0;
  uint8_t a[16], b[16];
  int ok1 = v1 != NULL && v1(a, dev) == 0, ok2 = v2 != NULL && v2(b, dev) == 0;
  if (!ok1 && !ok2) return 0;
  memset(d, 0, sizeof(*d));
  d->ordinal = (uint16_t)ordinal;
  memcpy(d->uuid, ok1 ? a : b, 16);
  if (ok1 && ok2 && memcmp(a, b, 16) != 0) {
    d->flags = IPC_DEVICE_MIG;
    memcpy(d->mig, b, 16);
  }
  return 1;
}

/* resolve_devices names each device seen in records once, from the flush
 * thread: hw.id in the collector is the GPU's UUID, which NVML reports too,
 * not the ordinal, which CUDA_VISIBLE_DEVICES renumbers per process. */
static void resolve_devices(void) {
  uint64_t todo = atomic_load(&seen_devs) & ~looked_up_devs;
  while (todo) {
    int i = __builtin_ctzll(todo);
    todo &= todo - 1;
    looked_up_devs |= 1ull << i;
    ipc_device d;
    if (!device_uuid(i, &d)) {
      LOG_DEBUG("no UUID for CUDA device %d", i);
      continue;
    }
    pthread_mutex_lock(&client_mu);
    ipc_client_add_device(&client, &d);
    pthread_mutex_unlock(&client_mu);
  }
}

/* ---- flush thread ---- */

static pthread_t flusher;
static pthread_mutex_t stop_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_cv;
static _Atomic int flusher_done;

static uint32_t free_buffers(void) { return (uint32_t)__builtin_popcountll(atomic_load(&pool_free)); }

/* watch_displacement tells a quiet engine from one whose records go to
 * another profiler: launches keep coming through our callbacks but CUPTI
 * neither asks us for buffers nor completes any. After resume_ms of that it
 * takes CUPTI back (register our callbacks, enable our kinds). */
static void watch_displacement(uint64_t now_ms) {
  static uint64_t since_ms, last_launches, last_activity;
  uint64_t l = atomic_load(&launches);
  uint64_t act = atomic_load(&buffers_requested) + atomic_load(&buffers_completed);
  uint64_t window = (uint64_t)(cfg.flush_ms * 10 > 2000 ? cfg.flush_ms * 10 : 2000);
  if (act != last_activity || l == last_launches || atomic_load(&duty_off)) {
    since_ms = now_ms;
    last_activity = act;
    last_launches = l;
    if (atomic_exchange(&displaced, 0)) LOG_WARN("activity records reach the library again");
    return;
  }
  uint64_t quiet = now_ms - since_ms;
  if (quiet >= window && !atomic_exchange(&displaced, 1))
    LOG_WARN("kernels are launched but no activity buffer reached the library for %llu ms: "
             "another profiler (torch.profiler, nsys) has taken CUPTI's activity callbacks",
             (unsigned long long)quiet);
  if (cfg.resume_ms > 0 && atomic_load(&displaced) && quiet >= window + (uint64_t)cfg.resume_ms) {
    LOG_WARN("taking CUPTI activity back after %ld ms", cfg.resume_ms);
    if (CUPTI_CALL(act_register()) == CUPTI_SUCCESS) {
      reenable_kinds();
      atomic_fetch_add(&resumes, 1);
    }
    since_ms = now_ms;
    last_launches = l;
  }
}

static void update_duty(uint64_t now_ms) {
  int on = duty_on(&cfg.duty, now_ms);
  int off = atomic_load(&duty_off);
  if (on && off) {
    reenable_kinds();
    atomic_store(&duty_off, 0);
  } else if (!on && !off) {
    disable_kinds();
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    atomic_store(&duty_off, 1);
  }
}

static void publish(ipc_clock *clk) {
  pthread_mutex_lock(&client_mu);
  client.stats.cupti_dropped = atomic_load(&cupti_dropped);
  client.stats.pool_exhausted = atomic_load(&pool_exhausted);
  client.stats.overflow_dropped = atomic_load(&overflow_dropped);
  client.stats.rate_limited = atomic_load(&rate_limited);
  ipc_liveness *l = &client.live;
  l->last_buffer_unix_ns = atomic_load(&last_buffer_unix);
  l->launches = atomic_load(&launches);
  l->buffers_completed = atomic_load(&buffers_completed);
  l->free_buffers = free_buffers();
  l->total_buffers = (uint32_t)cfg.buffers;
  l->state = (atomic_load(&duty_off) ? IPC_LIVE_DUTY_OFF : IPC_LIVE_ENABLED) |
             (atomic_load(&displaced) ? IPC_LIVE_DISPLACED : 0);
  l->resumes = atomic_load(&resumes);
  l->cupti_version = cupti_version;
  if (clk && clk->sampled_unix_ns) client.clock = *clk;
  pthread_mutex_unlock(&client_mu);
}

static void *flush_thread(void *arg) {
  (void)arg;
  uint64_t start = mono_ns() / 1000000, last_clock = 0;
  ipc_clock clk = {0};
  pthread_mutex_lock(&stop_mu);
  while (!atomic_load(&stopping)) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)cfg.flush_ms * 1000000ull;
    ts.tv_sec += (time_t)(ns / 1000000000ull);
    ts.tv_nsec = (long)(ns % 1000000000ull);
    pthread_cond_timedwait(&stop_cv, &stop_mu, &ts);
    if (atomic_load(&stopping)) break;
    pthread_mutex_unlock(&stop_mu);
    uint64_t now_ms = mono_ns() / 1000000 - start;
    update_duty(now_ms);
    cuptiActivityFlushAll(0); /* delivers completed buffers to buffer_completed */
    if (now_ms - last_clock >= 1000 || last_clock == 0) {
      sample_clock(&clk);
      last_clock = now_ms ? now_ms : 1;
    }
    watch_displacement(now_ms);
    resolve_devices();
    publish(&clk);
    pthread_mutex_lock(&client_mu);
    drain_launches_locked();
    ipc_client_flush(&client);
    pthread_mutex_unlock(&client_mu);
    pthread_mutex_lock(&stop_mu);
  }
  pthread_mutex_unlock(&stop_mu);
  atomic_store(&flusher_done, 1);
  return NULL;
}

/* ---- exit and fork ---- */

/* last_send flushes until the socket took everything or the deadline passed;
 * the collector gets whole frames or nothing. */
static void last_send(uint64_t deadline_ns) {
  resolve_devices();
  publish(NULL);
  pthread_mutex_lock(&client_mu);
  drain_launches_locked();
  ipc_client_status(&client);
  ipc_client_flush(&client);
  while (ipc_client_connected(&client) && client.pending_off < client.pending_len && mono_ns() < deadline_ns) {
    struct pollfd p = {.fd = client.fd, .events = POLLOUT};
    if (poll(&p, 1, 10) > 0) ipc_client_flush(&client);
  }
  pthread_mutex_unlock(&client_mu);
}

static void on_exit_handler(void) {
  if (!active || atomic_load(&forked_child)) return; /* a child makes no CUPTI call */
  active = 0;
  uint64_t deadline = mono_ns() + (uint64_t)cfg.exit_ms * 1000000ull;
  pthread_mutex_lock(&stop_mu);
  atomic_store(&stopping, 1);
  pthread_cond_signal(&stop_cv);
  pthread_mutex_unlock(&stop_mu);
  int joined = 0;
  while (mono_ns() < deadline) {
    if (atomic_load(&flusher_done)) {
      pthread_join(flusher, NULL);
      joined = 1;
      break;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  if (!joined) {
    /* The flush thread is stuck inside CUPTI; a second CUPTI call from here
     * could wait on the same lock for ever. Send what we have and go. */
    LOG_WARN("flush thread did not stop within %ld ms; skipping the final CUPTI flush", cfg.exit_ms);
    if (pthread_mutex_trylock(&client_mu) == 0) {
      ipc_client_flush(&client);
      pthread_mutex_unlock(&client_mu);
    }
    return;
  }
  /* Records still in CUPTI's buffers: force them out, then send them. */
  CUPTI_CALL(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  last_send(deadline);
  disable_kinds();
  if (subscriber) cuptiUnsubscribe(subscriber);
  subscriber = NULL;
}

static void atfork_prepare(void) { pthread_mutex_lock(&client_mu); }
static void atfork_parent(void) { pthread_mutex_unlock(&client_mu); }
static void atfork_child(void) {
  /* The child's copy of the socket belongs to the parent's stream, and its
   * CUPTI state is the parent's: close the one, never touch the other. */
  atomic_store(&forked_child, 1);
  ipc_client_drop_fd(&client);
  pthread_mutex_unlock(&client_mu);
}

/* ---- init ---- */

/* subscribe_multi tries CUPTI's multi-subscriber mode (CUDA 13.3+): our own
 * buffers and kinds, which a later torch.profiler or nsys run using the v2
 * API can neither replace nor disable. It returns CUPTI_SUCCESS with
 * multi_sub set, or the error after which the caller falls back to the
 * single-subscriber (v1) API, as jax-ml/jax and openxla/xla do: no v2
 * subscriber is left behind. */
static CUptiResult subscribe_multi(void) {
  if (!cfg.multi_sub || cupti_version < CUPTI_MULTI_SUB_MIN_VERSION) return CUPTI_ERROR_NOT_SUPPORTED;
  if (!ip_cupti_v2_resolve(&v2)) {
    LOG_WARN("CUPTI %u lacks the v2 activity API; using the single-subscriber API", cupti_version);
    return CUPTI_ERROR_NOT_SUPPORTED;
  }
  char holder[128] = {0};
  ip_subscriber_params p = {.structSize = IP_SUBSCRIBER_PARAMS_SIZE,
                            .subscriberName = "inferprof",
                            .oldSubscriberName = holder,
                            .oldSubscriberSize = sizeof(holder),
                            .allowMultipleSubscribers = 1};
  CUptiResult r = CUPTI_CALL(v2.subscribe(&subscriber, (CUpti_CallbackFunc)on_callback, NULL, &p));
  if (r == CUPTI_SUCCESS) {
    /* A timestamp is the cheapest call that proves the v2 path works here
     * (a driver older than r610 refuses it), before anything depends on it. */
    uint64_t ts = 0;
    r = CUPTI_CALL(v2.timestamp(subscriber, &ts));
    if (r == CUPTI_SUCCESS) {
      multi_sub = 1;
      return r;
    }
    cuptiUnsubscribe(subscriber);
  } else if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    holder[sizeof(holder) - 1] = 0;
    LOG_WARN("CUPTI is held by %s without multi-subscriber mode", holder[0] ? holder : "another tool");
  }
  subscriber = NULL;
  return r;
}

static int init(void) {
  load_config();
  const char *off = getenv("INFERPROF_CUPTI_DISABLE");
  if (off && strcmp(off, "1") == 0) {
    LOG_DEBUG("disabled by INFERPROF_CUPTI_DISABLE");
    return 0;
  }
  if (CUPTI_CALL(cuptiGetVersion(&cupti_version)) != CUPTI_SUCCESS) cupti_version = 0;
  can_reject = cupti_version >= CUPTI_REJECT_MIN_VERSION;
  /* One subscriber only on CUDA <= 13.2: torch.profiler or nsys may hold
   * it. Then we back off and the engine runs as if we were not here. */
  CUptiResult r = subscribe_multi();
  if (r != CUPTI_SUCCESS) r = CUPTI_CALL(cuptiSubscribe(&subscriber, (CUpti_CallbackFunc)on_callback, NULL));
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    LOG_WARN("another CUPTI subscriber (torch.profiler, nsys?) holds CUPTI; kernel activity is off for this process");
    subscriber = NULL;
    return 0;
  }
  if (r != CUPTI_SUCCESS) {
    subscriber = NULL;
    return 0;
  }
  int cb_ok = CUPTI_CALL(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                             CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)) == CUPTI_SUCCESS;
  for (size_t i = 0; i < sizeof(launch_cbids) / sizeof(launch_cbids[0]); i++)
    if (CUPTI_CALL(cuptiEnableCallback(1, subscriber, launch_cbids[i].domain, launch_cbids[i].id)) != CUPTI_SUCCESS)
      cb_ok = 0;
  if (!cb_ok) LOG_WARN("some callbacks could not be enabled: launch counts and rate limits may miss launches");

  pool_buf_size = (size_t)cfg.buffer_kb * 1024;
  if (posix_memalign((void **)&pool, 8, pool_buf_size * (size_t)cfg.buffers) != 0) {
    LOG_WARN("cannot allocate %ld activity buffers", cfg.buffers);
    pool = NULL;
    goto fail;
  }
  atomic_store(&pool_free, cfg.buffers == 64 ? ~0ull : (1ull << cfg.buffers) - 1);
  if (!can_reject && posix_memalign((void **)&overflow, 8, (size_t)OVERFLOW_SLOTS * OVERFLOW_SIZE) != 0) {
    LOG_WARN("cannot allocate the overflow buffers");
    overflow = NULL;
    goto fail;
  }
  if (cfg.rate > 0 || cfg.graph_rate > 0) {
    sampled = calloc(1, sizeof(*sampled));
    if (sampled == NULL) goto fail;
  }

  ipc_clock clk = {0};
  sample_clock(&clk);
  if (clk.sampled_unix_ns == 0) {
    LOG_WARN("cuptiGetTimestamp failed; cannot map CUPTI time to wall time");
    goto fail;
  }
  char host[IPC_MAX_HOST + 1] = {0};
  engine_host(getenv("OTEL_RESOURCE_ATTRIBUTES"), host, sizeof(host));
  if (ipc_client_init(&client, cfg.endpoint, (uint32_t)getpid(), host, clk.sampled_unix_ns, NULL) != 0) {
    LOG_WARN("cannot set up the collector client for %s", cfg.endpoint);
    goto fail;
  }
  client.clock = clk;
  client.sndbuf = (int)cfg.sndbuf_kb * 1024;
  {
    /* The engine's identity, from the variables its SDK and the step hook
     * read; inferprof-run sets service.instance.id. */
    char inst[IPC_MAX_IDENT + 1], svc[IPC_MAX_IDENT + 1];
    const char *ra = getenv("OTEL_RESOURCE_ATTRIBUTES");
    resource_attr(ra, "service.instance.id", inst, sizeof(inst));
    const char *sn = getenv("OTEL_SERVICE_NAME");
    if (sn && *sn) snprintf(svc, sizeof(svc), "%s", sn);
    else resource_attr(ra, "service.name", svc, sizeof(svc));
    ipc_client_set_identity(&client, (uint32_t)getppid(), inst, svc);
  }
  if (cfg.launches && (lring = lr_new()) == NULL) LOG_WARN("cannot allocate the launch queue; launch records are off");
  if (CUPTI_CALL(act_register()) != CUPTI_SUCCESS) goto fail_client;
  if (!enable_kinds()) goto fail_client;
  if (cfg.graph_mode) {
    /* Graph launches are one record each; their frame names the graph's
     * structure, computed once when the graph is instantiated. */
    if (!resolve_graph_calls())
      LOG_WARN("the CUDA driver cannot list graph nodes: graph launches go without a signature");
    else if (CUPTI_CALL(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                            CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED)) != CUPTI_SUCCESS)
      LOG_WARN("graph instantiation callback could not be enabled: graph launches go without a signature");
  }
  client.hello_flags = (cfg.graph_mode ? IPC_HELLO_GRAPH_MODE : 0) | (sampled ? IPC_HELLO_RATE_LIMITED : 0) |
                       (cfg.duty.period_ms ? IPC_HELLO_DUTY_CYCLE : 0) | (multi_sub ? IPC_HELLO_MULTI_SUB : 0) |
                       (lring ? IPC_HELLO_LAUNCHES : 0);

  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&stop_cv, &ca);
  pthread_condattr_destroy(&ca);
  if (pthread_create(&flusher, NULL, flush_thread, NULL) != 0) {
    LOG_WARN("cannot start the flush thread");
    goto fail_client;
  }
  active = 1;
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
  atexit(on_exit_handler);
  LOG_DEBUG("CUPTI %u%s; streaming to %s every %ld ms, %ld x %ld KiB buffers, %s mode", cupti_version,
            multi_sub ? " (multi-subscriber)" : "", cfg.endpoint, cfg.flush_ms, cfg.buffers, cfg.buffer_kb,
            cfg.graph_mode ? "graph" : "node");
  return 1;

fail_client:
  ipc_client_close(&client);
fail:
  disable_kinds();
  nkinds = 0;
  if (subscriber) cuptiUnsubscribe(subscriber);
  subscriber = NULL;
  return 0;
}

/* InitializeInjection is called by the CUDA driver. Returning 0 tells the
 * driver injection failed; the host process runs on regardless. */
EXPORT int InitializeInjection(void) {
  static int done;
  if (done) return 1;
  done = 1;
  return init();
}
