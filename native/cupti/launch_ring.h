// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/* launch_ring.h: the queue between the launch callbacks (any thread that
 * launches a kernel) and the one consumer that sends launches to the
 * collector. Pure C, tested without CUDA in tests/test_limits.c.
 *
 * A bounded multi-producer queue after Dmitry Vyukov's bounded MPMC queue
 * (each slot carries a sequence number; a producer claims a position with a
 * compare-and-swap and publishes by storing pos + 1): no lock, no
 * allocation, a full queue drops the launch and counts it instead of
 * blocking the launching thread.
 *
 * The producer takes its timestamp after claiming its position, so every
 * launch stamped before the consumer read the head has a position below
 * that head: when the consumer drained everything below it, it may say
 * "every launch before this time was sent" (a mark). */
#ifndef INFERPROF_LAUNCH_RING_H
#define INFERPROF_LAUNCH_RING_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "ipc_client.h"

#define LAUNCH_RING_SLOTS (1u << 16) /* 1.5 MiB; about 0.3 s of launches at 200 k/s */

typedef struct launch_slot {
  _Atomic uint64_t seq;
  ipc_launch l;
} launch_slot;

typedef struct launch_ring {
  _Atomic uint64_t head; /* next position a producer claims */
  uint64_t tail;         /* next position the consumer reads (consumer only) */
  _Atomic uint64_t dropped;
  launch_slot slot[LAUNCH_RING_SLOTS];
} launch_ring;

static inline launch_ring *lr_new(void) {
  launch_ring *r = calloc(1, sizeof(*r));
  if (r == NULL) return NULL;
  for (uint64_t i = 0; i < LAUNCH_RING_SLOTS; i++) atomic_init(&r->slot[i].seq, i);
  return r;
}

typedef uint64_t (*lr_clock)(void);

/* lr_push stamps l with now() once it holds a slot, and queues it. It
 * returns 0 and counts the launch when the queue is full. */
static inline int lr_push(launch_ring *r, ipc_launch *l, lr_clock now) {
  uint64_t pos = atomic_load_explicit(&r->head, memory_order_relaxed);
  for (;;) {
    launch_slot *s = &r->slot[pos & (LAUNCH_RING_SLOTS - 1)];
    uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
    if (seq == pos) {
      if (atomic_compare_exchange_weak_explicit(&r->head, &pos, pos + 1, memory_order_seq_cst, memory_order_relaxed)) {
        l->time = now();
        s->l = *l;
        atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
        return 1;
      }
    } else if (seq < pos) {
      atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
      return 0;
    } else {
      pos = atomic_load_explicit(&r->head, memory_order_relaxed);
    }
  }
}

/* lr_drain hands every published launch to emit, in order. It returns 1
 * when it emptied the queue up to the head it read after now(), so that
 * *mark (that time) may be sent as a mark; 0 when a launch was still being
 * written (no mark this time). */
static inline int lr_drain(launch_ring *r, void (*emit)(void *, const ipc_launch *), void *arg, lr_clock now,
                           uint64_t *mark) {
  uint64_t t = now();
  uint64_t head = atomic_load_explicit(&r->head, memory_order_seq_cst);
  while (r->tail < head) {
    launch_slot *s = &r->slot[r->tail & (LAUNCH_RING_SLOTS - 1)];
    if (atomic_load_explicit(&s->seq, memory_order_acquire) != r->tail + 1) return 0;
    emit(arg, &s->l);
    atomic_store_explicit(&s->seq, r->tail + LAUNCH_RING_SLOTS, memory_order_release);
    r->tail++;
  }
  *mark = t;
  return 1;
}

#endif
