/* A mock libcupti.so for testing cupti_inject.c without a GPU: it keeps the
 * callbacks the library registers, hands out its buffers, and replays
 * records the test writes (mock_emit_*) when the library flushes.
 * MOCK_CUPTI_BUSY=1 makes cuptiSubscribe fail as it does when torch.profiler
 * or nsys already holds CUPTI. */
#define _GNU_SOURCE
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SLOT 256 /* every mock record takes one fixed slot */

static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *cur;
static size_t cur_size, cur_valid;
static int enabled[128];
static int subscribed, unsubscribed, flushes;
static size_t dropped_no_buffer;

CUptiResult cuptiGetResultString(CUptiResult r, const char **s) {
  *s = r == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR (mock)";
  return CUPTI_SUCCESS;
}

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud) {
  (void)cb;
  (void)ud;
  const char *busy = getenv("MOCK_CUPTI_BUSY");
  if (busy && strcmp(busy, "1") == 0) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  subscribed = 1;
  *s = (CUpti_SubscriberHandle)&subscribed;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle s) {
  (void)s;
  unsubscribed = 1;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableCallback(uint32_t en, CUpti_SubscriberHandle s, CUpti_CallbackDomain d, CUpti_CallbackId id) {
  (void)en;
  (void)s;
  (void)d;
  (void)id;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetTimestamp(uint64_t *ts) {
  *ts = 1000000; /* CUPTI's clock reads 1 ms at init */
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r, CUpti_BuffersCallbackCompleteFunc c) {
  requested = r;
  completed = c;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind k) {
  enabled[k] = 1;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind k) {
  enabled[k] = 0;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  (void)flag;
  pthread_mutex_lock(&mu);
  uint8_t *b = cur;
  size_t size = cur_size, valid = cur_valid;
  cur = NULL;
  cur_size = cur_valid = 0;
  flushes++;
  pthread_mutex_unlock(&mu);
  if (b) completed(NULL, 0, b, size, valid);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **rec) {
  uint8_t *next = *rec == NULL ? buffer : (uint8_t *)*rec + SLOT;
  if (next + SLOT > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *rec = (CUpti_Activity *)next;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *dropped) {
  (void)ctx;
  (void)stream;
  *dropped = 0;
  return CUPTI_SUCCESS;
}

/* ---- test controls ---- */

int mock_enabled(int kind) { return enabled[kind]; }
int mock_subscribed(void) { return subscribed && !unsubscribed; }
int mock_flushes(void) { return flushes; }
size_t mock_dropped_no_buffer(void) { return dropped_no_buffer; }

/* slot returns room for one record, asking the library for a buffer when
 * needed; NULL when the library has none (the record is then lost, as with
 * real CUPTI). */
static uint8_t *slot(void) {
  if (cur == NULL || cur_valid + SLOT > cur_size) {
    if (cur) return NULL; /* full: the test must flush */
    size_t max = 0;
    requested(&cur, &cur_size, &max);
    cur_valid = 0;
    if (cur == NULL) {
      dropped_no_buffer++;
      return NULL;
    }
  }
  uint8_t *p = cur + cur_valid;
  memset(p, 0, SLOT);
  cur_valid += SLOT;
  return p;
}

int mock_emit_kernel(const char *name, uint64_t start, uint64_t end, uint32_t device, uint32_t ctx, uint32_t graph) {
  pthread_mutex_lock(&mu);
  CUpti_ActivityKernel5 *k = (CUpti_ActivityKernel5 *)slot();
  if (k) {
    k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k->start = start;
    k->end = end;
    k->deviceId = device;
    k->contextId = ctx;
    k->streamId = 7;
    k->name = name;
    k->correlationId = 11;
    k->graphId = graph;
  }
  pthread_mutex_unlock(&mu);
  return k != NULL;
}

int mock_emit_memcpy(uint64_t start, uint64_t end, uint32_t device, uint64_t bytes) {
  pthread_mutex_lock(&mu);
  CUpti_ActivityMemcpy4 *m = (CUpti_ActivityMemcpy4 *)slot();
  if (m) {
    m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    m->start = start;
    m->end = end;
    m->deviceId = device;
    m->bytes = bytes;
  }
  pthread_mutex_unlock(&mu);
  return m != NULL;
}

int mock_emit_sync(uint64_t start, uint64_t end, uint32_t ctx) {
  pthread_mutex_lock(&mu);
  CUpti_ActivitySynchronization *s = (CUpti_ActivitySynchronization *)slot();
  if (s) {
    s->kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    s->type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    s->start = start;
    s->end = end;
    s->contextId = ctx;
  }
  pthread_mutex_unlock(&mu);
  return s != NULL;
}
