// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/*
 * Minimal stand-in for the CUDA driver API header, enough for Debian's
 * CUPTI headers (libcupti-dev, CUDA 11.8) to compile where the 2.8 GB
 * nvidia-cuda-dev package is not installed. Only the types CUPTI's activity
 * and callback headers name, and those the mock libcupti's driver calls
 * take, are declared; nothing here is called. Used by
 * `make test` in CI to build and test the CUPTI layer against a mock
 * libcupti; real builds use the toolkit's own cuda.h.
 */
#ifndef INFERPROF_STUB_CUDA_H
#define INFERPROF_STUB_CUDA_H

#include <stddef.h>

#define CUDA_VERSION 11080

typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUuuid_st {
    char bytes[16];
} CUuuid;
typedef struct CUfunc_st *CUfunction;
/* cuda.h's numbering (CUDA 12.x). */
typedef enum CUgraphNodeType_enum {
    CU_GRAPH_NODE_TYPE_KERNEL = 0,
    CU_GRAPH_NODE_TYPE_MEMCPY = 1,
    CU_GRAPH_NODE_TYPE_MEMSET = 2,
    CU_GRAPH_NODE_TYPE_HOST = 3,
    CU_GRAPH_NODE_TYPE_GRAPH = 4,
    CU_GRAPH_NODE_TYPE_EMPTY = 5,
    CU_GRAPH_NODE_TYPE_WAIT_EVENT = 6,
    CU_GRAPH_NODE_TYPE_EVENT_RECORD = 7,
    CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL = 8,
    CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT = 9,
    CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10,
    CU_GRAPH_NODE_TYPE_MEM_FREE = 11,
    CU_GRAPH_NODE_TYPE_BATCH_MEM_OP = 12,
    CU_GRAPH_NODE_TYPE_CONDITIONAL = 13
} CUgraphNodeType;
/* CUDA_KERNEL_NODE_PARAMS_v2 (CUDA 12): v1's fields, then kern and ctx. */
typedef struct CUDA_KERNEL_NODE_PARAMS_st {
    CUfunction func;
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    void **kernelParams;
    void **extra;
    void *kern;
    CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS;
typedef enum CUdevice_attribute_enum { CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1 } CUdevice_attribute;
typedef enum CUaccessProperty_enum { CU_ACCESS_PROPERTY_NORMAL = 0 } CUaccessProperty;
typedef struct CUaccessPolicyWindow_st {
    void *base_ptr;
    size_t num_bytes;
    float hitRatio;
    CUaccessProperty hitProp;
    CUaccessProperty missProp;
} CUaccessPolicyWindow;

#endif
