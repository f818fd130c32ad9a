// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/* cupti_v2.h: CUPTI's subscriber-scoped ("v2") API, which multi-subscriber
 * mode needs (CUDA 13.3 and later, driver r610 or later).
 *
 * The library is built once per CUDA major, often against headers older
 * than 13.3 (CI uses CUDA 11.8), and runs against whatever libcupti the
 * engine loads. So the v2 entry points are resolved at run time with dlsym
 * and used only when cuptiGetVersion() >= 130300 and all of them are there;
 * the types below mirror the ABI the documentation gives:
 *  - signatures: docs.nvidia.com/cupti/api/group__CUPTI__ACTIVITY__API.html
 *    (cuptiActivityRegisterCallbacks_v2, cuptiActivityEnable_v2,
 *    cuptiActivityDisable_v2, cuptiActivityGetNextRecord_v2,
 *    cuptiActivityGetNumDroppedRecords_v2, cuptiGetTimestamp_v2, and the
 *    typedefs CUpti_BuffersCallbackRequestFunc_v2 / CompleteFunc_v2) and
 *    group__CUPTI__CALLBACK__API.html (cuptiSubscribe_v2);
 *  - CUpti_SubscriberParams: docs.nvidia.com/cupti/13.2.0/api/
 *    structCUpti__SubscriberParams.html, laid out as jax-ml/jax
 *    jaxlib/mosaic/gpu/mosaic_gpu_ext.cc (CuptiSubscriberParamsAbi) mirrors
 *    it where its headers lack the struct;
 *  - which functions must exist: the same file's CanUseCuptiV2 ("GetNextRecord_v2
 *    and GetTimestamp_v2 were added in CUDA 13.3; requiring them keeps 13.2's
 *    preview v2 APIs on v1");
 *  - the rules: CUPTI guide section 2.4, "Multiple Subscribers"
 *    (docs.nvidia.com/cupti/main/main.html): every subscriber must use the
 *    v2 calls, v1 and v2 calls cannot be mixed in one process (CUPTI returns
 *    CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED), the first subscriber's
 *    allowMultipleSubscribers decides for all, cuptiActivityFlushAll and
 *    cuptiEnableCallback have no v2 variant. */
#ifndef INFERPROF_CUPTI_V2_H
#define INFERPROF_CUPTI_V2_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

#include <cupti_activity.h>
#include <cupti_callbacks.h>

/* CUPTI API version of CUDA 13.3, the first with multi-subscriber mode. */
#define CUPTI_MULTI_SUB_MIN_VERSION 130300u

typedef void(CUPTIAPI *ip_request_v2)(uint8_t **buffer, size_t *size, size_t *max_records, void *request_info);
typedef void(CUPTIAPI *ip_complete_v2)(uint8_t *buffer, size_t size, size_t valid, void *complete_info);

typedef struct {
  size_t structSize;
  const char *subscriberName;
  char *oldSubscriberName; /* CUPTI writes the holder's name here when it refuses us */
  size_t oldSubscriberSize;
  uint8_t allowMultipleSubscribers;
  uint8_t padding[7];
} ip_subscriber_params;

/* structSize tells CUPTI which fields the caller knows: up to and including
 * allowMultipleSubscribers, as CUPTI's own *_STRUCT_SIZE macros count. */
#define IP_SUBSCRIBER_PARAMS_SIZE (offsetof(ip_subscriber_params, allowMultipleSubscribers) + 1)

typedef struct {
  CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *, ip_subscriber_params *);
  CUptiResult (*register_callbacks)(CUpti_SubscriberHandle, ip_request_v2, ip_complete_v2);
  CUptiResult (*enable)(CUpti_SubscriberHandle, CUpti_ActivityKind, void *config);
  CUptiResult (*disable)(CUpti_SubscriberHandle, CUpti_ActivityKind, void *config);
  CUptiResult (*next_record)(CUpti_SubscriberHandle, uint8_t *, size_t, CUpti_Activity **);
  CUptiResult (*timestamp)(CUpti_SubscriberHandle, uint64_t *);
  CUptiResult (*dropped)(CUpti_SubscriberHandle, CUcontext, uint32_t, size_t *); /* optional */
} ip_cupti_v2;

/* ip_cupti_v2_resolve finds the v2 entry points in the loaded libcupti; it
 * returns 1 when every required one is there. */
static inline int ip_cupti_v2_resolve(ip_cupti_v2 *v) {
  *(void **)&v->subscribe = dlsym(RTLD_DEFAULT, "cuptiSubscribe_v2");
  *(void **)&v->register_callbacks = dlsym(RTLD_DEFAULT, "cuptiActivityRegisterCallbacks_v2");
  *(void **)&v->enable = dlsym(RTLD_DEFAULT, "cuptiActivityEnable_v2");
  *(void **)&v->disable = dlsym(RTLD_DEFAULT, "cuptiActivityDisable_v2");
  *(void **)&v->next_record = dlsym(RTLD_DEFAULT, "cuptiActivityGetNextRecord_v2");
  *(void **)&v->timestamp = dlsym(RTLD_DEFAULT, "cuptiGetTimestamp_v2");
  *(void **)&v->dropped = dlsym(RTLD_DEFAULT, "cuptiActivityGetNumDroppedRecords_v2");
  return v->subscribe && v->register_callbacks && v->enable && v->disable && v->next_record && v->timestamp;
}

#endif
