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
 *    id, which the launched kernel's record carries;
 *  - from API version 130300 (CUDA 13.3) the subscriber-scoped v2 calls of
 *    multi-subscriber mode exist, with the rules of the CUPTI guide, section
 *    2.4 "Multiple Subscribers" (cupti_v2.h cites it): each v2 subscriber has
 *    its own buffer callbacks, buffers and enabled kinds, and gets every
 *    record of a kind it enabled; the first cuptiSubscribe_v2 decides
 *    allowMultipleSubscribers for all; a v1 call while a v2 subscriber
 *    exists (or the reverse) fails with
 *    CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED. The guide's table of
 *    which v1 call maps to which v2 call did not survive in the stored copy
 *    we read, so the mock refuses every v1 activity call that has a v2 twin
 *    (register, enable, disable, next record, dropped count, timestamp) and
 *    allows cuptiActivityFlushAll and cuptiEnableCallback, which the guide
 *    says have none: stricter than CUPTI at worst.
 * Environment: MOCK_CUPTI_VERSION (default 24, CUDA 12.6), MOCK_CUPTI_KERNEL_SIZE
 * (208 or 216), MOCK_CUPTI_BUSY=1 (another subscriber holds CUPTI),
 * MOCK_CUPTI_FAIL_ENABLE=<activity kind> (that enable fails),
 * MOCK_CUPTI_V2_FAIL=<CUptiResult> (cuptiSubscribe_v2 fails with it, as a
 * driver without multi-subscriber support would), MOCK_CUPTI_HELD_BY=<name>
 * (a tool subscribed with the v2 API in single-subscriber mode first),
 * MOCK_CUPTI_SLOW_TIMESTAMP_US=<us> (every cuptiGetTimestamp takes that long
 * except the third of each five, as a thread preempted inside the call would:
 * the library samples the clock five calls at a time).
 * CUDA graphs (mock_graph_instantiate) follow CUDA's and CUPTI's documented
 * order: cuGraphInstantiate builds the executable, then CUPTI calls the
 * subscriber's RESOURCE callback with CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED,
 * only if it enabled that callback, passing a CUpti_ResourceData whose
 * resourceDescriptor is a CUpti_GraphData holding the graph and the
 * executable (cupti_callbacks.h); graph ids (cuptiGetGraphId) and
 * executable ids (cuptiGetGraphExecId) are separate counters, and the
 * graph counter moves twice per instantiation, which clones the graph
 * (CUPTI_CBID_RESOURCE_GRAPH_CLONED; NVIDIA's cuda_graphs_trace sample sees
 * the nodes cloned there), so the two kinds of id soon differ and meet. The
 * driver's graph calls answer as cuda.h documents them: cuGraphGetNodes
 * gives the count with a NULL array, then at most that many nodes;
 * cuGraphKernelNodeGetParams_v2 fills CUDA_KERNEL_NODE_PARAMS_v2, func
 * first; cuFuncGetName (CUDA 12.3) names the function, or fails with
 * CUDA_ERROR_NOT_SUPPORTED under MOCK_CUDA_NO_FUNC_NAME=1, as a driver
 * without it leaves the symbol unnamed.
 * Every entry point called from a process other than the one that subscribed
 * (a forked child) ends that process with status 97. */
#define _GNU_SOURCE
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <cupti_version.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../cupti_v2.h"
#include "../layouts.h"

#define MAX_DONE 64
#define MAX_SUBS 4 /* subscriber handles; activity state 0 is v1's global one */

/* An activity state: buffer callbacks, the buffer being filled, completed
 * buffers and enabled kinds. v1 has one for the whole process (which is why
 * a second profiler's cuptiActivityRegisterCallbacks replaces ours); each v2
 * subscriber has its own. */
typedef struct {
  CUpti_BuffersCallbackRequestFunc req;
  CUpti_BuffersCallbackCompleteFunc comp;
  ip_request_v2 req2;
  ip_complete_v2 comp2;
  uint8_t *cur;
  size_t cur_size, cur_valid;
  struct {
    uint8_t *b;
    size_t size, valid;
  } done[MAX_DONE];
  int ndone;
  int enabled[128];
  size_t dropped_no_buffer, dropped_reported;
} activity;

typedef struct {
  int used, v2;
  CUpti_CallbackFunc cb;
} subscription;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static activity act[MAX_SUBS]; /* act[0]: v1; act[i]: v2 subscriber i */
static subscription subs[MAX_SUBS];
static int ours = -1; /* the first subscriber: the library under test */
static int n_v1, n_v2;
static int multi_state = 2; /* CUPTI_ACTIVITY_ATTR_MULTIPLE_SUBSCRIBER_STATE: 2 = not decided yet */
static int unsubscribed, flushes, forced_flushes, callbacks_enabled;
static int resource_enabled[CUPTI_CBID_RESOURCE_SIZE]; /* RESOURCE-domain callbacks turned on */
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

/* The activity state a subscriber's records go to. */
static activity *act_of(int sub) { return sub >= 0 && subs[sub].v2 ? &act[sub] : &act[0]; }
static int sub_of(CUpti_SubscriberHandle h) {
  int i = (int)((subscription *)h - subs);
  return h && i >= 0 && i < MAX_SUBS && subs[i].used ? i : -1;
}
/* v1 activity calls fail while a v2 subscriber exists (CUPTI guide 2.4.3). */
static int v1_refused(void) { return n_v2 > 0; }
static int v2_present(void) { return version() >= CUPTI_MULTI_SUB_MIN_VERSION; }

CUptiResult cuptiGetResultString(CUptiResult r, const char **s) {
  *s = r == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR (mock)";
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetVersion(uint32_t *v) {
  guard();
  *v = version();
  return CUPTI_SUCCESS;
}

static int take_sub(int v2, CUpti_CallbackFunc cb) {
  for (int i = 1; i < MAX_SUBS; i++)
    if (!subs[i].used) {
      subs[i] = (subscription){.used = 1, .v2 = v2, .cb = cb};
      if (v2) memset(&act[i], 0, sizeof(act[i]));
      if (ours < 0) ours = i;
      return i;
    }
  return -1;
}

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud) {
  (void)ud;
  const char *busy = getenv("MOCK_CUPTI_BUSY");
  if ((busy && strcmp(busy, "1") == 0) || n_v1 > 0 || n_v2 > 0 || getenv("MOCK_CUPTI_HELD_BY"))
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  owner = getpid();
  int i = take_sub(0, cb);
  if (i < 0) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  n_v1++;
  *s = (CUpti_SubscriberHandle)&subs[i];
  return CUPTI_SUCCESS;
}

/* cuptiSubscribe_v2 follows the CUPTI guide, 2.4.2: the first subscriber
 * sets allowMultipleSubscribers for everyone after it. */
CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud, ip_subscriber_params *p) {
  (void)ud;
  if (!v2_present()) return CUPTI_ERROR_NOT_SUPPORTED;
  if (p && p->structSize < IP_SUBSCRIBER_PARAMS_SIZE) return CUPTI_ERROR_INVALID_PARAMETER;
  const char *fail = getenv("MOCK_CUPTI_V2_FAIL");
  if (fail && *fail) return (CUptiResult)strtol(fail, NULL, 10);
  const char *held = getenv("MOCK_CUPTI_HELD_BY");
  uint8_t allow = p ? p->allowMultipleSubscribers : 0;
  if (held || n_v1 > 0 || (n_v2 > 0 && (multi_state != 1 || allow != 1))) {
    if (p && p->oldSubscriberName && p->oldSubscriberSize > 0)
      snprintf(p->oldSubscriberName, p->oldSubscriberSize, "CUPTI for %s", held ? held : "a v1 tool");
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  owner = getpid();
  int i = take_sub(1, cb);
  if (i < 0) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  if (multi_state == 2) multi_state = allow;
  n_v2++;
  *s = (CUpti_SubscriberHandle)&subs[i];
  return CUPTI_SUCCESS;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle s) {
  guard();
  int i = sub_of(s);
  if (i < 0) return CUPTI_ERROR_INVALID_PARAMETER;
  if (subs[i].v2) {
    n_v2--;
    pthread_mutex_lock(&mu);
    memset(act[i].enabled, 0, sizeof(act[i].enabled));
    pthread_mutex_unlock(&mu);
  } else {
    n_v1--;
  }
  subs[i].used = 0;
  if (i == ours) unsubscribed = 1;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableCallback(uint32_t en, CUpti_SubscriberHandle s, CUpti_CallbackDomain d, CUpti_CallbackId id) {
  guard();
  if (sub_of(s) < 0) return CUPTI_ERROR_INVALID_PARAMETER;
  if (en) callbacks_enabled++;
  if (d == CUPTI_CB_DOMAIN_RESOURCE && id < CUPTI_CBID_RESOURCE_SIZE) resource_enabled[id] = (int)en;
  return CUPTI_SUCCESS;
}

static _Atomic int timestamps;

/* slow_timestamp delays a timestamp call (MOCK_CUPTI_SLOW_TIMESTAMP_US). */
static void slow_timestamp(void) {
  int n = timestamps++;
  const char *v = getenv("MOCK_CUPTI_SLOW_TIMESTAMP_US");
  long us = v && *v ? strtol(v, NULL, 10) : 0;
  if (us > 0 && n % 5 != 2) {
    struct timespec d = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&d, NULL);
  }
}

CUptiResult cuptiGetTimestamp(uint64_t *ts) {
  guard();
  if (v1_refused()) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  slow_timestamp();
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  *ts = (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetTimestamp_v2(CUpti_SubscriberHandle s, uint64_t *ts) {
  guard();
  if (!v2_present() || sub_of(s) < 0 || !subs[sub_of(s)].v2) return CUPTI_ERROR_INVALID_PARAMETER;
  slow_timestamp();
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  *ts = (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r, CUpti_BuffersCallbackCompleteFunc c) {
  guard();
  if (v1_refused()) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  pthread_mutex_lock(&mu);
  act[0].req = r;
  act[0].comp = c;
  pthread_mutex_unlock(&mu);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterCallbacks_v2(CUpti_SubscriberHandle s, ip_request_v2 r, ip_complete_v2 c) {
  guard();
  int i = sub_of(s);
  if (!v2_present() || i < 0 || !subs[i].v2) return CUPTI_ERROR_INVALID_PARAMETER;
  pthread_mutex_lock(&mu);
  act[i].req2 = r;
  act[i].comp2 = c;
  pthread_mutex_unlock(&mu);
  return CUPTI_SUCCESS;
}

static CUptiResult set_enabled(activity *a, CUpti_ActivityKind k, int on) {
  const char *f = getenv("MOCK_CUPTI_FAIL_ENABLE");
  if (on && f && *f && (int)strtol(f, NULL, 10) == (int)k) return CUPTI_ERROR_NOT_COMPATIBLE;
  pthread_mutex_lock(&mu);
  a->enabled[k] = on;
  pthread_mutex_unlock(&mu);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind k) {
  guard();
  if (v1_refused()) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  return set_enabled(&act[0], k, 1);
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind k) {
  guard();
  if (v1_refused()) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  return set_enabled(&act[0], k, 0);
}

CUptiResult cuptiActivityEnable_v2(CUpti_SubscriberHandle s, CUpti_ActivityKind k, void *config) {
  guard();
  (void)config;
  int i = sub_of(s);
  if (!v2_present() || i < 0 || !subs[i].v2) return CUPTI_ERROR_INVALID_PARAMETER;
  return set_enabled(&act[i], k, 1);
}

CUptiResult cuptiActivityDisable_v2(CUpti_SubscriberHandle s, CUpti_ActivityKind k, void *config) {
  guard();
  (void)config;
  int i = sub_of(s);
  if (!v2_present() || i < 0 || !subs[i].v2) return CUPTI_ERROR_INVALID_PARAMETER;
  return set_enabled(&act[i], k, 0);
}

/* move_current puts a's current buffer, if it holds records, on its done list. */
static void move_current(activity *a) {
  if (a->cur && a->cur_valid > 0 && a->ndone < MAX_DONE) {
    a->done[a->ndone].b = a->cur;
    a->done[a->ndone].size = a->cur_size;
    a->done[a->ndone].valid = a->cur_valid;
    a->ndone++;
    a->cur = NULL;
    a->cur_size = a->cur_valid = 0;
  }
}

/* deliver hands every finished buffer, and the current one if it holds
 * records, of every activity state to whoever is registered there now. */
static void deliver(void) {
  for (int s = 0; s < MAX_SUBS; s++) {
    activity *a = &act[s];
    pthread_mutex_lock(&mu);
    move_current(a);
    int n = a->ndone;
    typeof(a->done) batch;
    memcpy(batch, a->done, sizeof(batch));
    a->ndone = 0;
    CUpti_BuffersCallbackCompleteFunc c = a->comp;
    ip_complete_v2 c2 = a->comp2;
    int v2 = s > 0;
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < n; i++) {
      if (v2) c2(batch[i].b, batch[i].size, batch[i].valid, NULL);
      else c(NULL, 0, batch[i].b, batch[i].size, batch[i].valid);
    }
  }
}

CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  guard();
  flushes++;
  if (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) forced_flushes++;
  deliver();
  return CUPTI_SUCCESS;
}

static CUptiResult next_record(uint8_t *buffer, size_t valid, CUpti_Activity **rec) {
  uint8_t *next = buffer;
  if (*rec != NULL) next = (uint8_t *)*rec + record_size((*rec)->kind);
  if (next >= buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  size_t sz = record_size(((CUpti_Activity *)next)->kind);
  if (sz == 0 || next + sz > buffer + valid) return CUPTI_ERROR_INVALID_KIND;
  *rec = (CUpti_Activity *)next;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **rec) {
  guard();
  if (v1_refused()) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  return next_record(buffer, valid, rec);
}

CUptiResult cuptiActivityGetNextRecord_v2(CUpti_SubscriberHandle s, uint8_t *buffer, size_t valid,
                                          CUpti_Activity **rec) {
  guard();
  if (!v2_present() || sub_of(s) < 0) return CUPTI_ERROR_INVALID_PARAMETER;
  return next_record(buffer, valid, rec);
}

static size_t take_dropped(activity *a) {
  pthread_mutex_lock(&mu);
  size_t d = a->dropped_no_buffer - a->dropped_reported;
  a->dropped_reported = a->dropped_no_buffer;
  pthread_mutex_unlock(&mu);
  return d;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *dropped) {
  guard();
  (void)ctx;
  (void)stream;
  if (v1_refused()) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  *dropped = take_dropped(&act[0]);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords_v2(CUpti_SubscriberHandle s, CUcontext ctx, uint32_t stream,
                                                 size_t *dropped) {
  guard();
  (void)ctx;
  (void)stream;
  int i = sub_of(s);
  if (!v2_present() || i < 0 || !subs[i].v2) return CUPTI_ERROR_INVALID_PARAMETER;
  *dropped = take_dropped(&act[i]);
  return CUPTI_SUCCESS;
}

/* ---- the other profiler: torch.profiler through Kineto (v1 API, as
 * pytorch/kineto libkineto/src/CuptiActivityApi.cpp still is at 114171d),
 * or a tool on the v2 API in multi-subscriber mode ---- */

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

/* mock_other_profiler_start is torch.profiler starting: Kineto registers its
 * v1 callbacks and enables kernel activity. It returns what CUPTI said. */
int mock_other_profiler_start(void) {
  deliver(); /* our last buffers, as CUPTI completes them on re-registration */
  CUptiResult r = cuptiActivityRegisterCallbacks(other_request, other_complete);
  if (r == CUPTI_SUCCESS) r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  other_active = r == CUPTI_SUCCESS;
  return (int)r;
}

void mock_other_profiler_stop(void) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (other_active) {
    pthread_mutex_lock(&mu);
    memset(act[0].enabled, 0, sizeof(act[0].enabled));
    pthread_mutex_unlock(&mu);
  }
  other_active = 0;
}

static CUpti_SubscriberHandle other_v2;
static size_t other_v2_records;

static void CUPTIAPI other_request_v2(uint8_t **b, size_t *size, size_t *max, void *info) {
  (void)info;
  other_request(b, size, max);
}
static void CUPTIAPI other_complete_v2(uint8_t *b, size_t size, size_t valid, void *info) {
  (void)size;
  (void)info;
  CUpti_Activity *a = NULL;
  while (cuptiActivityGetNextRecord_v2(other_v2, b, valid, &a) == CUPTI_SUCCESS) other_v2_records++;
  free(b);
}

/* mock_other_v2_start is a second tool on the v2 API: it subscribes asking
 * for multi-subscriber mode, registers its own buffers, enables kernels. */
int mock_other_v2_start(void) {
  ip_subscriber_params p = {.structSize = IP_SUBSCRIBER_PARAMS_SIZE, .subscriberName = "other",
                            .allowMultipleSubscribers = 1};
  CUptiResult r = cuptiSubscribe_v2(&other_v2, NULL, NULL, &p);
  if (r == CUPTI_SUCCESS) r = cuptiActivityRegisterCallbacks_v2(other_v2, other_request_v2, other_complete_v2);
  if (r == CUPTI_SUCCESS) r = cuptiActivityEnable_v2(other_v2, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, NULL);
  return (int)r;
}

/* mock_other_v2_stop flushes, disables its kind and unsubscribes, in the
 * teardown order the guide gives (2.4.7); it returns the records it got. */
size_t mock_other_v2_stop(void) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  cuptiActivityDisable_v2(other_v2, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, NULL);
  cuptiUnsubscribe(other_v2);
  other_v2 = NULL;
  return other_v2_records;
}

/* ---- test controls ---- */

int mock_enabled(int kind) { return act_of(ours)->enabled[kind]; }
int mock_subscribed(void) { return ours >= 0 && !unsubscribed; }
int mock_flushes(void) { return flushes; }
int mock_forced_flushes(void) { return forced_flushes; }
int mock_callbacks_enabled(void) { return callbacks_enabled; }
size_t mock_dropped_no_buffer(void) { return act_of(ours)->dropped_no_buffer; }
int mock_registered_is_other(void) { return act[0].req == other_request; }
int mock_multi_state(void) { return multi_state; }
int mock_ours_is_v2(void) { return ours >= 0 && subs[ours].v2; }
int mock_timestamps(void) { return timestamps; }

/* request_buffer asks a's registered client for a buffer. */
static void request_buffer(activity *a, uint8_t **b, size_t *size) {
  size_t max = 0;
  *b = NULL;
  *size = 0;
  if (a != &act[0]) a->req2(b, size, &max, NULL);
  else a->req(b, size, &max);
}

/* slot returns room for one record of kind in a, asking a's client for a
 * buffer when needed; NULL when there is none (the record is then lost). */
static uint8_t *slot(activity *a, uint32_t kind) {
  if (!a->enabled[kind]) return NULL;
  size_t sz = record_size(kind);
  if (a->cur == NULL || a->cur_valid + sz > a->cur_size) {
    if (a->cur) {
      if (a->ndone == MAX_DONE) return NULL;
      a->done[a->ndone].b = a->cur;
      a->done[a->ndone].size = a->cur_size;
      a->done[a->ndone].valid = a->cur_valid;
      a->ndone++;
    }
    request_buffer(a, &a->cur, &a->cur_size);
    a->cur_valid = 0;
    if (a->cur == NULL) {
      if (version() < 27) abort(); /* what CUPTI before API 27 does with a NULL buffer */
      a->dropped_no_buffer++;
      return NULL;
    }
  }
  uint8_t *p = a->cur + a->cur_valid;
  memset(p, 0, sz);
  memcpy(p, &kind, sizeof(kind)); /* CUpti_Activity.kind */
  a->cur_valid += sz;
  return p;
}

/* emit writes one record, built in rec, into every activity state that
 * enabled its kind; it returns whether ours got it. */
static int emit(uint32_t kind, const uint8_t *rec) {
  size_t sz = record_size(kind);
  int got = 0;
  pthread_mutex_lock(&mu);
  for (int s = 0; s < MAX_SUBS; s++) {
    if (s > 0 && !(subs[s].used && subs[s].v2)) continue;
    uint8_t *p = slot(&act[s], kind);
    if (p) memcpy(p + 4, rec + 4, sz - 4);
    if (p && &act[s] == act_of(ours)) got = 1;
  }
  pthread_mutex_unlock(&mu);
  return got;
}

static void put(uint8_t *p, size_t off, const void *v, size_t n) { memcpy(p + off, v, n); }

int mock_emit_kernel(const char *name, uint64_t start, uint64_t end, uint32_t device, uint32_t ctx, uint32_t corr,
                     uint32_t graph, uint64_t node) {
  uint8_t k[256] = {0};
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
  return emit(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, k);
}

int mock_emit_memcpy(uint64_t start, uint64_t end, uint32_t device, uint64_t bytes) {
  uint8_t m[256] = {0};
  m[LM_KIND_BYTE] = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  put(m, LM_START, &start, 8);
  put(m, LM_END, &end, 8);
  put(m, LM_DEVICE, &device, 4);
  put(m, LM_BYTES, &bytes, 8);
  return emit(CUPTI_ACTIVITY_KIND_MEMCPY, m);
}

int mock_emit_sync(uint64_t start, uint64_t end, uint32_t ctx) {
  uint8_t s[256] = {0};
  uint32_t type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  put(s, LY_TYPE, &type, 4);
  put(s, LY_START, &start, 8);
  put(s, LY_END, &end, 8);
  put(s, LY_CONTEXT, &ctx, 4);
  return emit(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, s);
}

int mock_emit_graph(uint64_t start, uint64_t end, uint32_t device, uint32_t graph) {
  uint8_t g[256] = {0};
  put(g, LG_START, &start, 8);
  put(g, LG_END, &end, 8);
  put(g, LG_DEVICE, &device, 4);
  put(g, LG_GRAPH, &graph, 4);
  return emit(CUPTI_ACTIVITY_KIND_GRAPH_TRACE, g);
}

/* mock_take_buffer asks the client for a buffer and keeps it out (CUDA 13's
 * per-thread buffers do this: each launching thread holds one). */
uint8_t *mock_take_buffer(size_t *size) {
  activity *a = act_of(ours);
  uint8_t *b = NULL;
  request_buffer(a, &b, size);
  if (b == NULL) {
    if (version() < 27) abort();
    a->dropped_no_buffer++;
  }
  return b;
}

/* mock_fill_and_complete writes n kernel records into a buffer taken with
 * mock_take_buffer and completes it. */
void mock_fill_and_complete(uint8_t *b, size_t size, int n, const char *name, uint64_t t0) {
  activity *a = act_of(ours);
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
  if (a != &act[0]) a->comp2(b, size, valid, NULL);
  else a->comp(NULL, 0, b, size, valid);
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

static void callback(CUpti_CallbackDomain dom, CUpti_CallbackId id, CUpti_ApiCallbackSite site, uint32_t corr) {
  CUpti_CallbackData d;
  memset(&d, 0, sizeof(d));
  d.callbackSite = site;
  d.correlationId = corr;
  if (ours >= 0 && subs[ours].used && subs[ours].cb) subs[ours].cb(NULL, dom, id, &d);
}

/* mock_launch is a kernel (or graph) launch through the driver API, as
 * Triton launches: the callback at entry, then at exit. */
void mock_launch(int graph, uint32_t corr) {
  CUpti_CallbackId id = graph ? CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch : CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
  callback(CUPTI_CB_DOMAIN_DRIVER_API, id, CUPTI_API_ENTER, corr);
  callback(CUPTI_CB_DOMAIN_DRIVER_API, id, CUPTI_API_EXIT, corr);
}

/* mock_launch_runtime is cudaLaunchKernel reaching the driver's launch
 * inside it (with an id of its own), both seen at entry and exit. */
void mock_launch_runtime(uint32_t corr, uint32_t driver_corr) {
  callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_API_ENTER, corr);
  mock_launch(0, driver_corr);
  callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_API_EXIT, corr);
}

/* ---- the driver calls the library names devices with (libcuda's, in a
 * real process). CUdevice is the ordinal; UUID byte 0 is 0xA0 + ordinal;
 * with MOCK_CUDA_MIG=1 the _v2 call returns a MIG UUID (byte 0 0xC0 +
 * ordinal), as on a MIG compute instance. ---- */

#ifdef INFERPROF_STUB_CUDA_H /* the stub declares no driver calls */
typedef int CUresult;
#endif
#ifndef CUDAAPI
#define CUDAAPI
#endif

CUresult CUDAAPI cuDeviceGet(CUdevice *dev, int ordinal) {
  if (ordinal < 0 || ordinal >= 8) return (CUresult)101; /* CUDA_ERROR_INVALID_DEVICE */
  *dev = ordinal;
  return (CUresult)0;
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
  memset(uuid->bytes, 0x11, 16);
  uuid->bytes[0] = (char)(0xA0 + dev);
  return (CUresult)0;
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
  cuDeviceGetUuid(uuid, dev);
  const char *mig = getenv("MOCK_CUDA_MIG");
  if (mig && strcmp(mig, "1") == 0) uuid->bytes[0] = (char)(0xC0 + dev);
  return (CUresult)0;
}

/* ---- CUDA graphs ---- */

#define MOCK_GRAPH_NODES 64

typedef struct mock_graph {
  uint32_t id;
  int n;
  int type[MOCK_GRAPH_NODES];
  const char *func[MOCK_GRAPH_NODES]; /* a kernel node's function: its symbol */
} mock_graph;

typedef struct mock_exec {
  uint32_t id;
} mock_exec;

static uint32_t graph_ids, exec_ids;

static mock_graph *last_graph; /* the graph being enumerated */

/* A node handle is the address of its slot in its graph's type array; it
 * returns the slot's index, or -1 for a handle of no node. */
static int node_index(CUgraphNode node) {
  if (last_graph == NULL) return -1;
  ptrdiff_t i = (const int *)(const void *)node - last_graph->type;
  return i >= 0 && i < last_graph->n ? (int)i : -1;
}

CUresult CUDAAPI cuGraphGetNodes(CUgraph graph, CUgraphNode *nodes, size_t *num) {
  mock_graph *g = (mock_graph *)(void *)graph;
  if (g == NULL || num == NULL) return (CUresult)1; /* CUDA_ERROR_INVALID_VALUE */
  last_graph = g;
  if (nodes == NULL) {
    *num = (size_t)g->n;
    return (CUresult)0;
  }
  size_t k = *num < (size_t)g->n ? *num : (size_t)g->n;
  for (size_t i = 0; i < *num; i++) nodes[i] = i < k ? (CUgraphNode)(void *)&g->type[i] : NULL;
  *num = k;
  return (CUresult)0;
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType *type) {
  int i = node_index(node);
  if (i < 0) return (CUresult)400; /* CUDA_ERROR_INVALID_HANDLE */
  *type = (CUgraphNodeType)last_graph->type[i];
  return (CUresult)0;
}

CUresult CUDAAPI cuGraphKernelNodeGetParams_v2(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS *p) {
  int i = node_index(node);
  if (i < 0 || last_graph->type[i] != CU_GRAPH_NODE_TYPE_KERNEL) return (CUresult)1; /* CUDA_ERROR_INVALID_VALUE */
  memset(p, 0, sizeof(*p));
  p->func = (CUfunction)(void *)last_graph->func[i];
  p->gridDimX = 132;
  p->blockDimX = 128;
  return (CUresult)0;
}

CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction f) {
  const char *off = getenv("MOCK_CUDA_NO_FUNC_NAME");
  if (off && strcmp(off, "1") == 0) return (CUresult)801; /* CUDA_ERROR_NOT_SUPPORTED */
  if (f == NULL) return (CUresult)400;
  *name = (const char *)(void *)f;
  return (CUresult)0;
}

CUptiResult cuptiGetGraphId(CUgraph graph, uint32_t *id) {
  guard();
  if (graph == NULL) return CUPTI_ERROR_INVALID_PARAMETER;
  *id = ((mock_graph *)(void *)graph)->id;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetGraphExecId(CUgraphExec exec, uint32_t *id) {
  guard();
  if (exec == NULL) return CUPTI_ERROR_INVALID_PARAMETER;
  *id = ((mock_exec *)(void *)exec)->id;
  return CUPTI_SUCCESS;
}

/* mock_graph_instantiate captures a graph of n nodes (types in CUDA's
 * numbering; funcs[i] a kernel node's symbol) and instantiates it. It
 * returns the graph and executable ids; the graph is freed afterwards, as
 * PyTorch's CUDAGraph frees its capture graph once instantiated. */
void mock_graph_instantiate(int n, const int *types, const char *const *funcs, uint32_t *graph_id, uint32_t *exec_id) {
  mock_graph *g = calloc(1, sizeof(*g));
  mock_exec *e = calloc(1, sizeof(*e));
  g->id = ++graph_ids;
  ++graph_ids; /* instantiation works on a clone (GRAPH_CLONED), which takes an id too */
  e->id = ++exec_ids;
  g->n = n < MOCK_GRAPH_NODES ? n : MOCK_GRAPH_NODES;
  for (int i = 0; i < g->n; i++) {
    g->type[i] = types[i];
    g->func[i] = funcs ? funcs[i] : NULL;
  }
  if (ours >= 0 && subs[ours].used && subs[ours].cb && resource_enabled[CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED]) {
    CUpti_GraphData gd;
    memset(&gd, 0, sizeof(gd));
    gd.graph = (CUgraph)(void *)g;
    gd.graphExec = (CUgraphExec)(void *)e;
    CUpti_ResourceData rd;
    memset(&rd, 0, sizeof(rd));
    rd.resourceDescriptor = &gd;
    subs[ours].cb(NULL, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, &rd);
  }
  *graph_id = g->id;
  *exec_id = e->id;
  last_graph = NULL;
  free(g);
  free(e);
}
