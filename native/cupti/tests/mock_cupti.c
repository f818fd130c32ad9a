// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/* A mock libcupti.so for testing cupti_inject.c without a GPU. It follows
 * the real call structure, as the CUPTI guide (Activity API) and the users
 * read for it describe it (pytorch/kineto libkineto/src/CuptiActivityApi.cpp,
 * parca-dev/parcagpu src/cupti.cpp and test/mock_cupti.c):
 *  - records are written into buffers CUPTI asks the client for through the
 *    registered request callback, at the real record sizes: kernel records
 *    208 bytes (CUpti_ActivityKernel9, CUDA 12) or 216 bytes
 *    (CUpti_ActivityKernel10, CUDA 13), copies 88, syncs 40, graph traces 56
 *    (layouts.h cites the headers); cuptiActivityGetNextRecord steps by them;
 *  - a full buffer is completed on the next flush, from the flushing thread or
 *    from a thread of the mock's own (as CUPTI's worker thread does);
 *  - a NULL buffer aborts the process below API version 27, as real CUPTI
 *    crashes there; from 27 the records are dropped and reported by
 *    cuptiActivityGetNumDroppedRecords;
 *  - cuptiActivityRegisterCallbacks and cuptiActivityEnable are global: a
 *    second profiler (mock_other_profiler_*) replaces the callbacks and, at
 *    its end, disables the kinds, as torch.profiler does;
 *  - launches call the subscriber's callback at API entry with a correlation
 *    id, which the launched kernel's record carries.
 * Environment: MOCK_CUPTI_VERSION (default 24, CUDA 12.6), MOCK_CUPTI_KERNEL_SIZE
 * (208 or 216), MOCK_CUPTI_BUSY=1 (another subscriber holds CUPTI),
 * MOCK_CUPTI_FAIL_ENABLE=<activity kind> (that enable fails).
 * Every entry point called from a process other than the one that subscribed
 * (a forked child) ends that process with status 97. */
#define _GNU_SOURCE
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_version.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../layouts.h"

#define MAX_DONE 64

static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;
static CUpti_CallbackFunc subscriber_cb;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *cur;
static size_t cur_size, cur_valid;
static struct {
  uint8_t *b;
  size_t size, valid;
} done[MAX_DONE];
static int ndone;
static int enabled[128];
static int subscribed, unsubscribed, flushes, forced_flushes, callbacks_enabled;
static size_t dropped_no_buffer, dropped_reported;
static pid_t owner;
static int other_active;

static void guard(void) {
  if (owner != 0 && getpid() != owner) _exit(97); /* a forked child called CUPTI */
}

static uint32_t version(void) {
  const char *v = getenv("MOCK_CUPTI_VERSION");
  return v && *v ? (uint32_t)strtoul(v, NULL, 10) : 24;
}

static size_t kernel_size(void) {
  const char *v = getenv("MOCK_CUPTI_KERNEL_SIZE");
  return v && *v ? (size_t)strtoul(v, NULL, 10) : LK_KERNEL9_SIZE;
}

static size_t record_size(uint32_t kind) {
  switch (kind) {
  case CUPTI_ACTIVITY_KIND_KERNEL:
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    return kernel_size();
  case CUPTI_ACTIVITY_KIND_MEMCPY:
  case CUPTI_ACTIVITY_KIND_MEMSET:
    return 88;
  case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
    return 40;
  case CUPTI_ACTIVITY_KIND_GRAPH_TRACE:
    return 56;
  }
  return 0;
}

CUptiResult cuptiGetResultString(CUptiResult r, const char **s) {
  *s = r == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR (mock)";
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetVersion(uint32_t *v) {
  guard();
  *v = version();
  return CUPTI_SUCCESS;
}

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud) {
  (void)ud;
  const char *busy = getenv("MOCK_CUPTI_BUSY");
  if (busy && strcmp(busy, "1") == 0) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  owner = getpid();
  subscribed = 1;
  subscriber_cb = cb;
  *s = (CUpti_SubscriberHandle)&subscribed;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle s) {
  guard();
  (void)s;
  unsubscribed = 1;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableCallback(uint32_t en, CUpti_SubscriberHandle s, CUpti_CallbackDomain d, CUpti_CallbackId id) {
  guard();
  (void)s;
  (void)d;
  (void)id;
  if (en) callbacks_enabled++;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetTimestamp(uint64_t *ts) {
  guard();
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  *ts = (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r, CUpti_BuffersCallbackCompleteFunc c) {
  guard();
  pthread_mutex_lock(&mu);
  requested = r;
  completed = c;
  pthread_mutex_unlock(&mu);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind k) {
  guard();
  const char *f = getenv("MOCK_CUPTI_FAIL_ENABLE");
  if (f && *f && (int)strtol(f, NULL, 10) == (int)k) return CUPTI_ERROR_NOT_COMPATIBLE;
  enabled[k] = 1;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind k) {
  guard();
  enabled[k] = 0;
  return CUPTI_SUCCESS;
}

/* deliver hands every finished buffer, and the current one if it holds
 * records, to whoever is registered now. */
static void deliver(void) {
  pthread_mutex_lock(&mu);
  if (cur && cur_valid > 0 && ndone < MAX_DONE) {
    done[ndone].b = cur;
    done[ndone].size = cur_size;
    done[ndone].valid = cur_valid;
    ndone++;
    cur = NULL;
    cur_size = cur_valid = 0;
  }
  int n = ndone;
  typeof(done) batch;
  memcpy(batch, done, sizeof(done));
  ndone = 0;
  CUpti_BuffersCallbackCompleteFunc c = completed;
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < n; i++) c(NULL, 0, batch[i].b, batch[i].size, batch[i].valid);
}

CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  guard();
  flushes++;
  if (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) forced_flushes++;
  deliver();
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **rec) {
  guard();
  uint8_t *next = buffer;
  if (*rec != NULL) next = (uint8_t *)*rec + record_size((*rec)->kind);
  if (next >= buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  size_t sz = record_size(((CUpti_Activity *)next)->kind);
  if (sz == 0 || next + sz > buffer + valid) return CUPTI_ERROR_INVALID_KIND;
  *rec = (CUpti_Activity *)next;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *dropped) {
  guard();
  (void)ctx;
  (void)stream;
  pthread_mutex_lock(&mu);
  *dropped = dropped_no_buffer - dropped_reported;
  dropped_reported = dropped_no_buffer;
  pthread_mutex_unlock(&mu);
  return CUPTI_SUCCESS;
}

/* ---- the other profiler: torch.profiler through Kineto ---- */

static void CUPTIAPI other_request(uint8_t **b, size_t *size, size_t *max) {
  *b = aligned_alloc(8, 1 << 20);
  *size = 1 << 20;
  *max = 0;
}
static void CUPTIAPI other_complete(CUcontext c, uint32_t s, uint8_t *b, size_t size, size_t valid) {
  (void)c;
  (void)s;
  (void)size;
  (void)valid;
  free(b);
}

void mock_other_profiler_start(void) {
  deliver(); /* our last buffers, as CUPTI completes them on re-registration */
  cuptiActivityRegisterCallbacks(other_request, other_complete);
  enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] = 1;
  other_active = 1;
}

void mock_other_profiler_stop(void) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (int k = 0; k < 128; k++) enabled[k] = 0;
  other_active = 0;
}

/* ---- test controls ---- */

int mock_enabled(int kind) { return enabled[kind]; }
int mock_subscribed(void) { return subscribed && !unsubscribed; }
int mock_flushes(void) { return flushes; }
int mock_forced_flushes(void) { return forced_flushes; }
int mock_callbacks_enabled(void) { return callbacks_enabled; }
size_t mock_dropped_no_buffer(void) { return dropped_no_buffer; }
int mock_registered_is_other(void) { return requested == other_request; }

/* slot returns room for one record of kind, asking the registered client for
 * a buffer when needed; NULL when there is none (the record is then lost). */
static uint8_t *slot(uint32_t kind) {
  if (!enabled[kind]) return NULL;
  size_t sz = record_size(kind);
  if (cur == NULL || cur_valid + sz > cur_size) {
    if (cur) {
      if (ndone == MAX_DONE) return NULL;
      done[ndone].b = cur;
      done[ndone].size = cur_size;
      done[ndone].valid = cur_valid;
      ndone++;
    }
    size_t max = 0;
    cur = NULL;
    cur_size = 0;
    requested(&cur, &cur_size, &max);
    cur_valid = 0;
    if (cur == NULL) {
      if (version() < 27) abort(); /* what CUPTI before API 27 does with a NULL buffer */
      dropped_no_buffer++;
      return NULL;
    }
  }
  uint8_t *p = cur + cur_valid;
  memset(p, 0, sz);
  memcpy(p, &kind, sizeof(kind)); /* CUpti_Activity.kind */
  cur_valid += sz;
  return p;
}

static void put(uint8_t *p, size_t off, const void *v, size_t n) { memcpy(p + off, v, n); }

int mock_emit_kernel(const char *name, uint64_t start, uint64_t end, uint32_t device, uint32_t ctx, uint32_t corr,
                     uint32_t graph, uint64_t node) {
  pthread_mutex_lock(&mu);
  uint8_t *k = slot(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (k) {
    uint32_t stream = 7;
    put(k, LK_START, &start, 8);
    put(k, LK_END, &end, 8);
    put(k, LK_DEVICE, &device, 4);
    put(k, LK_CONTEXT, &ctx, 4);
    put(k, LK_STREAM, &stream, 4);
    put(k, LK_NAME, &name, sizeof(name));
    put(k, LK_CORRELATION, &corr, 4);
    put(k, LK_GRAPH, &graph, 4);
    put(k, LK_GRAPH_NODE, &node, 8);
  }
  pthread_mutex_unlock(&mu);
  return k != NULL;
}

int mock_emit_memcpy(uint64_t start, uint64_t end, uint32_t device, uint64_t bytes) {
  pthread_mutex_lock(&mu);
  uint8_t *m = slot(CUPTI_ACTIVITY_KIND_MEMCPY);
  if (m) {
    m[LM_KIND_BYTE] = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    put(m, LM_START, &start, 8);
    put(m, LM_END, &end, 8);
    put(m, LM_DEVICE, &device, 4);
    put(m, LM_BYTES, &bytes, 8);
  }
  pthread_mutex_unlock(&mu);
  return m != NULL;
}

int mock_emit_sync(uint64_t start, uint64_t end, uint32_t ctx) {
  pthread_mutex_lock(&mu);
  uint8_t *s = slot(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  if (s) {
    uint32_t type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    put(s, LY_TYPE, &type, 4);
    put(s, LY_START, &start, 8);
    put(s, LY_END, &end, 8);
    put(s, LY_CONTEXT, &ctx, 4);
  }
  pthread_mutex_unlock(&mu);
  return s != NULL;
}

int mock_emit_graph(uint64_t start, uint64_t end, uint32_t device, uint32_t graph) {
  pthread_mutex_lock(&mu);
  uint8_t *g = slot(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
  if (g) {
    put(g, LG_START, &start, 8);
    put(g, LG_END, &end, 8);
    put(g, LG_DEVICE, &device, 4);
    put(g, LG_GRAPH, &graph, 4);
  }
  pthread_mutex_unlock(&mu);
  return g != NULL;
}

/* mock_take_buffer asks the client for a buffer and keeps it out (CUDA 13's
 * per-thread buffers do this: each launching thread holds one). */
uint8_t *mock_take_buffer(size_t *size) {
  uint8_t *b = NULL;
  size_t max = 0;
  *size = 0;
  requested(&b, size, &max);
  if (b == NULL) {
    if (version() < 27) abort();
    dropped_no_buffer++;
  }
  return b;
}

/* mock_fill_and_complete writes n kernel records into a buffer taken with
 * mock_take_buffer and completes it. */
void mock_fill_and_complete(uint8_t *b, size_t size, int n, const char *name, uint64_t t0) {
  size_t ks = kernel_size(), valid = 0;
  for (int i = 0; i < n && valid + ks <= size; i++) {
    uint8_t *k = b + valid;
    memset(k, 0, ks);
    uint32_t kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, corr = 1000u + (uint32_t)i;
    uint64_t s = t0 + (uint64_t)i * 1000, e = s + 500;
    memcpy(k, &kind, 4);
    put(k, LK_START, &s, 8);
    put(k, LK_END, &e, 8);
    put(k, LK_NAME, &name, sizeof(name));
    put(k, LK_CORRELATION, &corr, 4);
    valid += ks;
  }
  completed(NULL, 0, b, size, valid);
}

static void *async_deliver(void *arg) {
  (void)arg;
  deliver();
  return NULL;
}

/* mock_complete_async completes the pending buffers from a thread of the
 * mock's own and waits for it, as CUPTI's worker thread would. */
void mock_complete_async(void) {
  pthread_t t;
  pthread_create(&t, NULL, async_deliver, NULL);
  pthread_join(t, NULL);
}

/* mock_launch is a kernel (or graph) launch seen at API entry. */
void mock_launch(int graph, uint32_t corr) {
  CUpti_CallbackData d;
  memset(&d, 0, sizeof(d));
  d.callbackSite = CUPTI_API_ENTER;
  d.correlationId = corr;
  CUpti_CallbackId id = graph ? CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch : CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
  if (subscriber_cb) subscriber_cb(NULL, CUPTI_CB_DOMAIN_DRIVER_API, id, &d);
}
