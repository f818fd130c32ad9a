// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/* layouts.h: where the library reads each field of a CUPTI activity record.
 *
 * CUPTI hands out records in the newest layout the running libcupti knows
 * (CUpti_ActivityKernel9, 208 bytes, on CUDA 12.x; CUpti_ActivityKernel10,
 * 216 bytes, on CUDA 13.0) and cuptiActivityGetNextRecord steps by that size.
 * Every version keeps the fields we read at the same offsets, so the library
 * reads them by offset and the assertions below pin each offset against every
 * struct version the compiling headers declare. A toolkit that moved a field
 * fails to build instead of reporting wrong numbers.
 *
 * Sources of the pinned values (compiled with offsetof, x86_64, gcc):
 *  - CUDA 11.8, CUPTI_API_VERSION 18: Debian bookworm non-free libcupti-dev
 *    11.8.87~11.8.0-5~deb12u1, /usr/include/cupti_activity.h:
 *    Kernel5 160 B, Kernel8 200 B, Memcpy4/Memset3 80 B, Memcpy5/Memset4
 *    88 B, GraphTrace 48 B, Synchronization 40 B.
 *  - CUDA 12.6.3, CUPTI_API_VERSION 24: extras/CUPTI/include/cupti_activity.h
 *    of the toolkit copy in github.com/zspace/system.cuda-12.6 (commit
 *    b3d92c8): Kernel9 208 B, Memcpy5 88 B, Memset4 88 B, GraphTrace2 56 B.
 *  - CUDA 13.0: CUpti_ActivityKernel10 = Kernel9's fields plus
 *    isDeviceLaunched and 7 bytes of padding, 216 B (docs.nvidia.com/cupti/
 *    13.0.1/api/structCUpti__ActivityKernel10.html; field list and packed(8)
 *    layout in docs.rs cudarc cupti::sys::CUpti_ActivityKernel10).
 * These headers are NVIDIA's and are not in this repository; the asserts
 * run wherever the library is built against them. */
#ifndef INFERPROF_LAYOUTS_H
#define INFERPROF_LAYOUTS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Kernel records (KERNEL, CONCURRENT_KERNEL), Kernel5 to Kernel10. */
#define LK_START 16
#define LK_END 24
#define LK_DEVICE 40
#define LK_CONTEXT 44
#define LK_STREAM 48
#define LK_CORRELATION 92
#define LK_NAME 104
#define LK_GRAPH_NODE 144
#define LK_GRAPH 156
#define LK_KERNEL9_SIZE 208
#define LK_KERNEL10_SIZE 216

/* Memcpy4/5 and Memset3/4 share these offsets. */
#define LM_KIND_BYTE 4 /* copyKind */
#define LS_KIND_BYTE 50 /* memoryKind (uint16) */
#define LM_BYTES 8
#define LM_START 16
#define LM_END 24
#define LM_DEVICE 32
#define LM_CONTEXT 36
#define LM_STREAM 40
#define LM_CORRELATION 44
#define LM_GRAPH_NODE 64
#define LM_GRAPH 72

/* Synchronization. */
#define LY_TYPE 4
#define LY_START 8
#define LY_END 16
#define LY_CORRELATION 24
#define LY_CONTEXT 28
#define LY_STREAM 32

/* GraphTrace and GraphTrace2. */
#define LG_CORRELATION 4
#define LG_START 8
#define LG_END 16
#define LG_DEVICE 24
#define LG_GRAPH 28
#define LG_CONTEXT 32
#define LG_STREAM 36

static inline uint64_t rd64(const void *rec, size_t off) {
  uint64_t v;
  memcpy(&v, (const uint8_t *)rec + off, sizeof(v));
  return v;
}
static inline uint32_t rd32(const void *rec, size_t off) {
  uint32_t v;
  memcpy(&v, (const uint8_t *)rec + off, sizeof(v));
  return v;
}
static inline uint16_t rd16(const void *rec, size_t off) {
  uint16_t v;
  memcpy(&v, (const uint8_t *)rec + off, sizeof(v));
  return v;
}
static inline const char *rdptr(const void *rec, size_t off) {
  const char *v;
  memcpy(&v, (const uint8_t *)rec + off, sizeof(v));
  return v;
}

#ifdef CUPTI_API_VERSION /* only where NVIDIA's headers are included */
#define PIN(T, f, off) _Static_assert(offsetof(T, f) == (off), #T "." #f " moved")
#define PIN_KERNEL(T)                                                              \
  PIN(T, start, LK_START);                                                        \
  PIN(T, end, LK_END);                                                            \
  PIN(T, deviceId, LK_DEVICE);                                                    \
  PIN(T, contextId, LK_CONTEXT);                                                  \
  PIN(T, streamId, LK_STREAM);                                                    \
  PIN(T, correlationId, LK_CORRELATION);                                          \
  PIN(T, name, LK_NAME);                                                          \
  PIN(T, graphNodeId, LK_GRAPH_NODE);                                             \
  PIN(T, graphId, LK_GRAPH)
#define PIN_MEM(T, kindf, kindoff)                                                 \
  PIN(T, kindf, kindoff);                                                         \
  PIN(T, bytes, LM_BYTES);                                                        \
  PIN(T, start, LM_START);                                                        \
  PIN(T, end, LM_END);                                                            \
  PIN(T, deviceId, LM_DEVICE);                                                    \
  PIN(T, contextId, LM_CONTEXT);                                                  \
  PIN(T, streamId, LM_STREAM);                                                    \
  PIN(T, correlationId, LM_CORRELATION);                                          \
  PIN(T, graphNodeId, LM_GRAPH_NODE);                                             \
  PIN(T, graphId, LM_GRAPH)
#define PIN_GRAPH(T)                                                               \
  PIN(T, correlationId, LG_CORRELATION);                                          \
  PIN(T, start, LG_START);                                                        \
  PIN(T, end, LG_END);                                                            \
  PIN(T, deviceId, LG_DEVICE);                                                    \
  PIN(T, graphId, LG_GRAPH);                                                      \
  PIN(T, contextId, LG_CONTEXT);                                                  \
  PIN(T, streamId, LG_STREAM)

/* CUDA 11.6 to 12.x headers declare these (12.x in cupti_activity_deprecated.h). */
PIN_KERNEL(CUpti_ActivityKernel5);
PIN_KERNEL(CUpti_ActivityKernel8);
_Static_assert(sizeof(CUpti_ActivityKernel8) == 200, "Kernel8 size");
PIN_MEM(CUpti_ActivityMemcpy4, copyKind, LM_KIND_BYTE);
PIN_MEM(CUpti_ActivityMemset3, memoryKind, LS_KIND_BYTE);
PIN_MEM(CUpti_ActivityMemcpy5, copyKind, LM_KIND_BYTE);
PIN_MEM(CUpti_ActivityMemset4, memoryKind, LS_KIND_BYTE);
PIN_GRAPH(CUpti_ActivityGraphTrace);
PIN(CUpti_ActivitySynchronization, type, LY_TYPE);
PIN(CUpti_ActivitySynchronization, start, LY_START);
PIN(CUpti_ActivitySynchronization, end, LY_END);
PIN(CUpti_ActivitySynchronization, correlationId, LY_CORRELATION);
PIN(CUpti_ActivitySynchronization, contextId, LY_CONTEXT);
PIN(CUpti_ActivitySynchronization, streamId, LY_STREAM);
#if CUPTI_API_VERSION >= 19 /* CUDA 12.0 added Kernel9 */
PIN_KERNEL(CUpti_ActivityKernel9);
_Static_assert(sizeof(CUpti_ActivityKernel9) == LK_KERNEL9_SIZE, "Kernel9 size");
#endif
#if CUPTI_API_VERSION >= 24 /* seen in CUDA 12.6 */
PIN_GRAPH(CUpti_ActivityGraphTrace2);
#endif
#if CUPTI_API_VERSION >= 130000 /* CUDA 13.0 numbers its API versions 130000 */
PIN_KERNEL(CUpti_ActivityKernel10);
_Static_assert(sizeof(CUpti_ActivityKernel10) == LK_KERNEL10_SIZE, "Kernel10 size");
#endif
#undef PIN_KERNEL
#undef PIN_MEM
#undef PIN_GRAPH
#undef PIN
#endif

#endif
