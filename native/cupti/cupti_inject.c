/* cupti_inject.c: the thin CUPTI layer of libinferprof_cupti.so.
 *
 * The CUDA driver loads this library when CUDA_INJECTION64_PATH names it and
 * calls InitializeInjection, the only exported symbol. It enables CUPTI
 * activity records, turns them into ipc_record and hands them to ipc_client,
 * which streams them to the collector's cupti receiver without blocking.
 *
 * Built only where CUPTI headers exist (see Makefile `lib`); everything it
 * relies on for encoding and transport is in ipc_client.c and tested there.
 *
 * Rules (docs/cupti-receiver.md, "Injection library"):
 *  - never block or crash the engine: failures log, count, and return;
 *  - fixed buffers: a preallocated pool; when empty CUPTI drops and counts;
 *  - our lock is never held while calling CUPTI;
 *  - no CUDA calls at teardown: atexit only disables and unsubscribes. */
#define _GNU_SOURCE
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ipc_client.h"

#define EXPORT __attribute__((visibility("default")))

/* Record layouts: the oldest versions that carry every field we read. CUPTI
 * only appends fields in newer versions, so these prefixes stay valid on
 * CUDA 11.x to 13.x. Override at build time if a toolkit drops one. */
#ifndef INFERPROF_KERNEL_T
#define INFERPROF_KERNEL_T CUpti_ActivityKernel5
#endif
#ifndef INFERPROF_MEMCPY_T
#define INFERPROF_MEMCPY_T CUpti_ActivityMemcpy4
#endif
#ifndef INFERPROF_MEMSET_T
#define INFERPROF_MEMSET_T CUpti_ActivityMemset3
#endif

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
#define LOG_DEBUG(...)                   \
  do {                                   \
    if (debug_on) logf_("debug", __VA_ARGS__); \
  } while (0)

/* CUPTI_CALL logs the call and its result; it never aborts. */
#define CUPTI_CALL(call)                                                        \
  ({                                                                            \
    CUptiResult _r = (call);                                                    \
    if (_r != CUPTI_SUCCESS) {                                                  \
      const char *_s = "?";                                                     \
      cuptiGetResultString(_r, &_s);                                            \
      LOG_WARN("%s -> %d (%s)", #call, (int)_r, _s);                            \
    } else {                                                                    \
      LOG_DEBUG("%s -> ok", #call);                                             \
    }                                                                           \
    _r;                                                                         \
  })

/* Configuration, from INFERPROF_* environment variables. */
static struct {
  char endpoint[108];
  long flush_ms;
  long buffers;
  long buffer_kb;
  int graph_mode;
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

static void load_config(void) {
  debug_on = getenv("INFERPROF_CUPTI_DEBUG") && strcmp(getenv("INFERPROF_CUPTI_DEBUG"), "1") == 0;
  const char *ep = getenv("INFERPROF_CUPTI_ENDPOINT");
  if (ep == NULL || *ep == '\0') ep = "/tmp/inferprof/cupti.sock";
  if (strlen(ep) >= sizeof(cfg.endpoint)) {
    LOG_WARN("INFERPROF_CUPTI_ENDPOINT is longer than a socket path may be; using the default");
    ep = "/tmp/inferprof/cupti.sock";
  }
  strcpy(cfg.endpoint, ep);
  cfg.flush_ms = env_long("INFERPROF_CUPTI_FLUSH_MS", 200, 10, 10000);
  cfg.buffers = env_long("INFERPROF_CUPTI_BUFFERS", 8, 2, 64);
  cfg.buffer_kb = env_long("INFERPROF_CUPTI_BUFFER_KB", 128, 16, 4096);
  const char *gm = getenv("INFERPROF_CUPTI_GRAPH_MODE");
  cfg.graph_mode = 0;
  if (gm && strcmp(gm, "graph") == 0) {
    cfg.graph_mode = 1;
  } else if (gm && *gm && strcmp(gm, "node") != 0) {
    LOG_WARN("INFERPROF_CUPTI_GRAPH_MODE=%s is not node or graph; using node", gm);
  }
}

/* The buffer pool: cfg.buffers buffers, a bit per free buffer. */
static uint8_t *pool;
static size_t pool_buf_size;
static _Atomic uint64_t pool_free;
static _Atomic uint64_t pool_exhausted;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *max_records = 0;
  uint64_t f = atomic_load(&pool_free);
  while (f != 0) {
    int i = __builtin_ctzll(f);
    if (atomic_compare_exchange_weak(&pool_free, &f, f & ~(1ull << i))) {
      *buffer = pool + (size_t)i * pool_buf_size;
      *size = pool_buf_size;
      return;
    }
  }
  /* No buffer: CUPTI drops these records and counts them for us. */
  atomic_fetch_add(&pool_exhausted, 1);
  *buffer = NULL;
  *size = 0;
}

static void release_buffer(uint8_t *b) {
  if (b == NULL || b < pool || b >= pool + (size_t)cfg.buffers * pool_buf_size) return;
  size_t i = (size_t)(b - pool) / pool_buf_size;
  atomic_fetch_or(&pool_free, 1ull << i);
}

static pthread_mutex_t client_mu = PTHREAD_MUTEX_INITIALIZER;
static ipc_client client;
static int64_t clock_offset_ns; /* Unix ns minus CUPTI ns */
static _Atomic uint64_t cupti_dropped;
static _Atomic int stopping;

/* Context id to device, learned from kernel and copy records, so that sync
 * records (which carry only a context) get a device. */
#define CTX_SLOTS 64
static _Atomic uint64_t ctx_dev[CTX_SLOTS]; /* (context id << 16) | device, 0 = empty */

static void learn_ctx(uint32_t ctx, uint32_t dev) {
  uint64_t v = ((uint64_t)ctx << 16) | (dev & 0xFFFFu);
  atomic_store(&ctx_dev[ctx % CTX_SLOTS], v);
}

static uint16_t ctx_device(uint32_t ctx) {
  uint64_t v = atomic_load(&ctx_dev[ctx % CTX_SLOTS]);
  return v != 0 && (uint32_t)(v >> 16) == ctx ? (uint16_t)(v & 0xFFFFu) : IPC_DEVICE_UNKNOWN;
}

static uint64_t unix_ns(uint64_t cupti_ns) { return (uint64_t)((int64_t)cupti_ns + clock_offset_ns); }

/* convert fills r from a CUPTI record; it returns 0 for kinds we skip. */
static int convert(const CUpti_Activity *a, ipc_record *r) {
  memset(r, 0, sizeof(*r));
  switch (a->kind) {
  case CUPTI_ACTIVITY_KIND_KERNEL:
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
    const INFERPROF_KERNEL_T *k = (const INFERPROF_KERNEL_T *)a;
    r->kind = IPC_KIND_KERNEL;
    r->device = (uint16_t)k->deviceId;
    r->stream = k->streamId;
    r->start = k->start;
    r->end = k->end;
    r->name = k->name;
    r->correlation = k->correlationId;
    r->graph_id = k->graphId;
    learn_ctx(k->contextId, k->deviceId);
    break;
  }
  case CUPTI_ACTIVITY_KIND_MEMCPY: {
    const INFERPROF_MEMCPY_T *m = (const INFERPROF_MEMCPY_T *)a;
    r->kind = IPC_KIND_MEMCPY;
    r->sub = m->copyKind;
    r->device = (uint16_t)m->deviceId;
    r->stream = m->streamId;
    r->start = m->start;
    r->end = m->end;
    r->bytes = m->bytes;
    r->correlation = m->correlationId;
    r->graph_id = m->graphId;
    learn_ctx(m->contextId, m->deviceId);
    break;
  }
  case CUPTI_ACTIVITY_KIND_MEMSET: {
    const INFERPROF_MEMSET_T *m = (const INFERPROF_MEMSET_T *)a;
    r->kind = IPC_KIND_MEMSET;
    r->sub = (uint8_t)m->memoryKind;
    r->device = (uint16_t)m->deviceId;
    r->stream = m->streamId;
    r->start = m->start;
    r->end = m->end;
    r->bytes = m->bytes;
    r->correlation = m->correlationId;
    r->graph_id = m->graphId;
    break;
  }
  case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
    const CUpti_ActivitySynchronization *s = (const CUpti_ActivitySynchronization *)a;
    r->kind = IPC_KIND_SYNC;
    r->sub = (uint8_t)s->type;
    r->device = ctx_device(s->contextId);
    r->stream = s->streamId;
    r->start = s->start;
    r->end = s->end;
    r->correlation = s->correlationId;
    break;
  }
  case CUPTI_ACTIVITY_KIND_GRAPH_TRACE: {
    const CUpti_ActivityGraphTrace *g = (const CUpti_ActivityGraphTrace *)a;
    r->kind = IPC_KIND_GRAPH;
    r->device = (uint16_t)g->deviceId;
    r->stream = g->streamId;
    r->start = g->start;
    r->end = g->end;
    r->correlation = g->correlationId;
    r->graph_id = g->graphId;
    break;
  }
  default:
    return 0;
  }
  /* Incomplete records carry zero or reversed timestamps; skip them. */
  if (r->start == 0 || r->end < r->start) return 0;
  r->start = unix_ns(r->start);
  r->end = unix_ns(r->end);
  return 1;
}

static void add_batch(const ipc_record *recs, int n) {
  pthread_mutex_lock(&client_mu);
  for (int i = 0; i < n; i++) ipc_client_add(&client, &recs[i]);
  pthread_mutex_unlock(&client_mu);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
  (void)size;
  enum { BATCH = 256 };
  ipc_record batch[BATCH];
  int n = 0;
  CUpti_Activity *a = NULL;
  /* Records are converted without our lock; the lock covers only encoding. */
  while (valid > 0 && cuptiActivityGetNextRecord(buffer, valid, &a) == CUPTI_SUCCESS) {
    if (convert(a, &batch[n])) n++;
    if (n == BATCH) {
      add_batch(batch, n);
      n = 0;
    }
  }
  if (n > 0) add_batch(batch, n);
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped > 0)
    atomic_fetch_add(&cupti_dropped, dropped);
  release_buffer(buffer);
}

static CUpti_SubscriberHandle subscriber;

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *data) {
  (void)userdata;
  (void)data;
  /* Flush at context destroy: the last records of a context would be lost
   * otherwise, and this is the last safe moment to ask CUPTI for them. */
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

static void *flush_thread(void *arg) {
  (void)arg;
  struct timespec ts = {.tv_sec = cfg.flush_ms / 1000, .tv_nsec = (cfg.flush_ms % 1000) * 1000000L};
  while (!atomic_load(&stopping)) {
    nanosleep(&ts, NULL);
    if (atomic_load(&stopping)) break;
    cuptiActivityFlushAll(0); /* delivers completed buffers to buffer_completed */
    pthread_mutex_lock(&client_mu);
    client.stats.cupti_dropped = atomic_load(&cupti_dropped);
    ipc_client_flush(&client);
    pthread_mutex_unlock(&client_mu);
  }
  return NULL;
}

static CUpti_ActivityKind kinds[5];
static int nkinds;

static void on_exit_disable(void) {
  /* No CUDA calls and no waiting on the collector: the driver may already
   * be tearing down. Stop the flush thread's loop and let the process go. */
  atomic_store(&stopping, 1);
  for (int i = 0; i < nkinds; i++) cuptiActivityDisable(kinds[i]);
  if (subscriber) cuptiUnsubscribe(subscriber);
  subscriber = NULL;
}

static uint64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int init(void) {
  load_config();
  const char *off = getenv("INFERPROF_CUPTI_DISABLE");
  if (off && strcmp(off, "1") == 0) {
    LOG_DEBUG("disabled by INFERPROF_CUPTI_DISABLE");
    return 0;
  }
  /* One subscriber only on CUDA <= 13.2: torch.profiler or nsys may hold
   * it. Then we back off and the engine runs as if we were not here. */
  CUptiResult r = CUPTI_CALL(cuptiSubscribe(&subscriber, (CUpti_CallbackFunc)on_callback, NULL));
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    LOG_WARN("another CUPTI subscriber (torch.profiler, nsys?) holds CUPTI; kernel activity is off for this process");
    subscriber = NULL;
    return 0;
  }
  if (r != CUPTI_SUCCESS) {
    subscriber = NULL;
    return 0;
  }
  CUPTI_CALL(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING));

  pool_buf_size = (size_t)cfg.buffer_kb * 1024;
  if (posix_memalign((void **)&pool, 8, pool_buf_size * (size_t)cfg.buffers) != 0) {
    LOG_WARN("cannot allocate %ld activity buffers", cfg.buffers);
    goto fail;
  }
  atomic_store(&pool_free, cfg.buffers == 64 ? ~0ull : (1ull << cfg.buffers) - 1);

  uint64_t cupti_now = 0;
  if (CUPTI_CALL(cuptiGetTimestamp(&cupti_now)) != CUPTI_SUCCESS) goto fail;
  uint64_t wall = realtime_ns();
  clock_offset_ns = (int64_t)(wall - cupti_now);

  char host[IPC_MAX_HOST + 1] = {0};
  gethostname(host, IPC_MAX_HOST);
  if (ipc_client_init(&client, cfg.endpoint, (uint32_t)getpid(), host, wall, NULL) != 0) {
    LOG_WARN("cannot set up the collector client for %s", cfg.endpoint);
    goto fail;
  }
  if (CUPTI_CALL(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed)) != CUPTI_SUCCESS) goto fail;

  kinds[nkinds++] = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  kinds[nkinds++] = CUPTI_ACTIVITY_KIND_MEMCPY;
  kinds[nkinds++] = CUPTI_ACTIVITY_KIND_MEMSET;
  kinds[nkinds++] = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  if (cfg.graph_mode) kinds[nkinds++] = CUPTI_ACTIVITY_KIND_GRAPH_TRACE;
  for (int i = 0; i < nkinds; i++) {
    if (CUPTI_CALL(cuptiActivityEnable(kinds[i])) != CUPTI_SUCCESS && i == 0) goto fail;
  }

  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &attr, flush_thread, NULL) != 0) {
    pthread_attr_destroy(&attr);
    LOG_WARN("cannot start the flush thread");
    goto fail;
  }
  pthread_attr_destroy(&attr);
  atexit(on_exit_disable);
  LOG_DEBUG("streaming to %s every %ld ms, %ld x %ld KiB buffers, %s mode", cfg.endpoint, cfg.flush_ms,
            cfg.buffers, cfg.buffer_kb, cfg.graph_mode ? "graph" : "node");
  return 1;

fail:
  for (int i = 0; i < nkinds; i++) cuptiActivityDisable(kinds[i]);
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
