// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/* graph_sig.h: the structural signature of a CUDA graph, as Graphsignal's
 * profiler computes it, so our cuda_graphs_nanoseconds frames carry the
 * same names as its own (giveen/graphsignal src/cupti/cupti_activity.cpp
 * @ 40f84e6, compute_graph_signature and fnv1a64_hex):
 *  - one token per node: `kernel[name=<symbol>,calls=` for a kernel node
 *    (the symbol cuFuncGetName gives, empty when it gives none) and
 *    `<type>[calls=` for any other node, type spelled as graphNodeTypeToStr
 *    spells it;
 *  - distinct tokens in byte order (std::map<std::string> there), each
 *    followed by its count in decimal and `];`, all joined;
 *  - FNV-1a 64 of that string, from Graphsignal's start value
 *    1469598103934665603: a digit short of FNV's offset basis
 *    (14695981039346656037), but what its frame names are hashed from.
 * Pure C, no CUDA: the CUPTI layer enumerates the nodes, this hashes them. */
#ifndef INFERPROF_GRAPH_SIG_H
#define INFERPROF_GRAPH_SIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Graphsignal's FNV-1a start value (fnv1a64_hex), kept as it is. */
#define GRAPH_SIG_BASIS 1469598103934665603ull

/* Graphsignal enumerates at most this many nodes of a graph (kMaxNodes). */
#define GRAPH_SIG_MAX_NODES 8192

/* graph_node_type_name spells a CUgraphNodeType (cuda.h numbering, which
 * every CUDA since 11.4 shares: KERNEL 0 ... MEM_FREE 11, BATCH_MEM_OP 12,
 * CONDITIONAL 13) as Graphsignal's graphNodeTypeToStr does. */
static inline const char *graph_node_type_name(int t) {
  static const char *const names[] = {"kernel", "memcpy", "memset",    "host",    "child",    "empty",
                                      "wait",   "event",  "semsignal", "semwait", "memalloc", "memfree"};
  return t >= 0 && t < (int)(sizeof(names) / sizeof(names[0])) ? names[t] : "other";
}

/* A node's token: type and, for a kernel node, its symbol ("" if unknown).
 * name NULL means not a kernel node. The rest is graph_sig_hash's. */
typedef struct graph_tok {
  const char *type;
  const char *name;
  size_t type_len, name_len, count;
} graph_tok;

/* The token's bytes are up to four segments; the count follows them. */
typedef struct {
  const char *seg[4];
  size_t len[4];
  int n;
} graph_key;

static inline graph_key graph_key_of(const graph_tok *t) {
  graph_key k = {.n = 0};
  k.seg[k.n] = t->type;
  k.len[k.n++] = t->type_len;
  if (t->name) {
    k.seg[k.n] = "[name=";
    k.len[k.n++] = 6;
    k.seg[k.n] = t->name;
    k.len[k.n++] = t->name_len;
    k.seg[k.n] = ",calls=";
    k.len[k.n++] = 7;
  } else {
    k.seg[k.n] = "[calls=";
    k.len[k.n++] = 7;
  }
  return k;
}

/* graph_tok_cmp orders tokens by their bytes as unsigned chars, which is
 * std::string's order. */
static inline int graph_tok_cmp(const void *a, const void *b) {
  graph_key x = graph_key_of(a), y = graph_key_of(b);
  int i = 0, j = 0;
  size_t p = 0, q = 0;
  for (;;) {
    while (i < x.n && p == x.len[i]) i++, p = 0;
    while (j < y.n && q == y.len[j]) j++, q = 0;
    if (i == x.n || j == y.n) return (i < x.n) - (j < y.n);
    unsigned char c = (unsigned char)x.seg[i][p++], d = (unsigned char)y.seg[j][q++];
    if (c != d) return c < d ? -1 : 1;
  }
}

static inline uint64_t graph_fnv(uint64_t h, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    h ^= (uint8_t)s[i];
    h *= 1099511628211ull;
  }
  return h;
}

/* graph_ptr_cmp groups tokens by their strings' addresses: the nodes of
 * one kernel share the driver's name pointer, so most tokens collapse here
 * for the cost of a pointer compare. */
static inline int graph_ptr_cmp(const void *a, const void *b) {
  const graph_tok *x = a, *y = b;
  uintptr_t p = (uintptr_t)x->type, q = (uintptr_t)y->type;
  if (p == q) p = (uintptr_t)x->name, q = (uintptr_t)y->name;
  return (p > q) - (p < q);
}

/* graph_sig_hash reorders toks and returns the FNV-1a 64 of the signature
 * string; 0 tokens give 0 (Graphsignal then has no signature). */
static inline uint64_t graph_sig_hash(graph_tok *toks, size_t n) {
  if (n == 0) return 0;
  /* Same strings by address first, then the distinct ones by bytes. */
  qsort(toks, n, sizeof(*toks), graph_ptr_cmp);
  size_t d = 0;
  for (size_t i = 0; i < n; i++) {
    if (d > 0 && graph_ptr_cmp(&toks[d - 1], &toks[i]) == 0) {
      toks[d - 1].count++;
      continue;
    }
    toks[d] = toks[i];
    toks[d].type_len = strlen(toks[d].type);
    toks[d].name_len = toks[d].name ? strlen(toks[d].name) : 0;
    toks[d++].count = 1;
  }
  qsort(toks, d, sizeof(*toks), graph_tok_cmp);
  uint64_t h = GRAPH_SIG_BASIS;
  for (size_t i = 0; i < d;) {
    size_t count = toks[i].count, j = i + 1;
    for (; j < d && graph_tok_cmp(&toks[i], &toks[j]) == 0; j++) count += toks[j].count;
    graph_key k = graph_key_of(&toks[i]);
    for (int s = 0; s < k.n; s++) h = graph_fnv(h, k.seg[s], k.len[s]);
    char num[24];
    int m = snprintf(num, sizeof(num), "%zu];", count);
    h = graph_fnv(h, num, (size_t)m);
    i = j;
  }
  return h;
}

#endif
