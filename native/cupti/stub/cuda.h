// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/*
 * Minimal stand-in for the CUDA driver API header, enough for Debian's
 * CUPTI headers (libcupti-dev, CUDA 11.8) to compile where the 2.8 GB
 * nvidia-cuda-dev package is not installed. Only the types CUPTI's activity
 * and callback headers name are declared; nothing here is called. Used by
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
typedef enum CUgraphNodeType_enum { CU_GRAPH_NODE_TYPE_KERNEL = 0 } CUgraphNodeType;
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
