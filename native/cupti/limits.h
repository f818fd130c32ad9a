// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/* limits.h: the overhead controls of the injection library, pure C so that
 * tests/test_limits.c checks them without CUDA.
 *
 *  - token_bucket: one per launching thread, as parca-dev/parcagpu
 *    src/token_bucket.h (commit caad3a3) does: capacity = rate (one second
 *    of tokens), refilled from CLOCK_MONOTONIC, starts with one token. Its
 *    defaults there are 100 eager launches/s and 20 graph launches/s per
 *    thread (src/cupti.cpp g_eagerRateLimit, g_graphRateLimit).
 *  - corr_table: the correlation ids whose launch took a token. Kernel
 *    records are kept only if their id is in it. Direct-mapped on the id's low
 *    bits: ids grow monotonically, so an entry is only overwritten 65,536
 *    launches later, long after its records were delivered.
 *  - duty: activity on for on_ms out of every period_ms. */
#ifndef INFERPROF_LIMITS_H
#define INFERPROF_LIMITS_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct token_bucket {
  double rate;   /* tokens per second; <= 0: unlimited */
  double tokens; /* at most rate */
  uint64_t last_ns;
} token_bucket;

static inline void tb_init(token_bucket *b, double rate) {
  b->rate = rate;
  b->tokens = rate > 0 ? 1.0 : 0.0;
  b->last_ns = 0;
}

/* tb_take returns 1 when a token was available (and takes it). */
static inline int tb_take(token_bucket *b, uint64_t now_ns) {
  if (b->rate <= 0) return 1;
  if (b->last_ns != 0 && now_ns > b->last_ns) {
    b->tokens += (double)(now_ns - b->last_ns) / 1e9 * b->rate;
    if (b->tokens > b->rate) b->tokens = b->rate;
  }
  b->last_ns = now_ns;
  if (b->tokens >= 1.0) {
    b->tokens -= 1.0;
    return 1;
  }
  return 0;
}

#define CORR_SLOTS 65536u

typedef struct corr_table {
  _Atomic uint32_t id[CORR_SLOTS]; /* 0 = empty; CUPTI's ids start at 1 */
} corr_table;

static inline void corr_add(corr_table *t, uint32_t id) {
  atomic_store_explicit(&t->id[id & (CORR_SLOTS - 1)], id, memory_order_relaxed);
}

static inline int corr_has(corr_table *t, uint32_t id) {
  return id != 0 && atomic_load_explicit(&t->id[id & (CORR_SLOTS - 1)], memory_order_relaxed) == id;
}

typedef struct duty {
  uint64_t on_ms, period_ms; /* period 0: always on */
} duty;

/* duty_on says whether activity should be on at t (ms since start). */
static inline int duty_on(const duty *d, uint64_t t_ms) {
  if (d->period_ms == 0 || d->on_ms >= d->period_ms) return 1;
  return t_ms % d->period_ms < d->on_ms;
}

/* duty_parse reads "ON/PERIOD" in milliseconds, e.g. "1000/10000". It
 * returns 0 on success; on a bad value d is left always-on. */
static inline int duty_parse(const char *s, duty *d) {
  d->on_ms = d->period_ms = 0;
  if (s == NULL || *s == '\0') return 0;
  unsigned long long on = 0, period = 0;
  const char *p = s;
  int n = 0;
  while (*p >= '0' && *p <= '9' && n < 12) on = on * 10 + (unsigned long long)(*p++ - '0'), n++;
  if (n == 0 || *p++ != '/') return -1;
  n = 0;
  while (*p >= '0' && *p <= '9' && n < 12) period = period * 10 + (unsigned long long)(*p++ - '0'), n++;
  if (n == 0 || *p != '\0' || on == 0 || period < 100 || on > period) return -1;
  d->on_ms = on;
  d->period_ms = period;
  return 0;
}

#endif
