// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/* Tests of the pure-C parts of the CUPTI layer: the overhead controls
 * (limits.h), the launch queue (launch_ring.h) and the identity variables
 * (identity.h) and the graph signature (graph_sig.h), under ASan and UBSan. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph_sig.h"
#include "../identity.h"
#include "../launch_ring.h"
#include "../limits.h"
#include "check.h"


static void test_token_bucket(void) {
  token_bucket b;
  tb_init(&b, 100); /* parcagpu's eager default */
  uint64_t t = 1000000000ull;
  CHECK(tb_take(&b, t));  /* starts with one token */
  CHECK(!tb_take(&b, t)); /* and no more at the same instant */
  int taken = 0;
  for (int i = 0; i < 10000; i++) taken += tb_take(&b, t + (uint64_t)i * 100000ull); /* 1 s of 10k launches */
  CHECK(taken >= 99 && taken <= 101);
  /* Idle for a minute: at most one second of tokens piles up. */
  t += 61000000000ull;
  taken = 0;
  for (int i = 0; i < 1000; i++) taken += tb_take(&b, t);
  CHECK(taken == 100);
  tb_init(&b, 0); /* 0: unlimited */
  for (int i = 0; i < 1000; i++) CHECK(tb_take(&b, t));
}

static void test_corr_table(void) {
  static corr_table t;
  corr_add(&t, 7);
  CHECK(corr_has(&t, 7));
  CHECK(!corr_has(&t, 8));
  CHECK(!corr_has(&t, 0));
  corr_add(&t, 7 + CORR_SLOTS); /* 65,536 launches later the slot is reused */
  CHECK(!corr_has(&t, 7));
  CHECK(corr_has(&t, 7 + CORR_SLOTS));
}

static void test_duty(void) {
  duty d;
  CHECK(duty_parse("1000/10000", &d) == 0 && d.on_ms == 1000 && d.period_ms == 10000);
  CHECK(duty_on(&d, 0) && duty_on(&d, 999) && !duty_on(&d, 1000) && !duty_on(&d, 9999) && duty_on(&d, 10000));
  CHECK(duty_parse("", &d) == 0 && duty_on(&d, 12345));
  CHECK(duty_parse("0/1000", &d) != 0 && duty_on(&d, 5000)); /* bad values leave it always on */
  CHECK(duty_parse("2000/1000", &d) != 0);
  CHECK(duty_parse("10/50", &d) != 0); /* periods under 100 ms thrash CUPTI */
  CHECK(duty_parse("1/x", &d) != 0);
  CHECK(duty_parse("100/", &d) != 0);
}

static _Atomic uint64_t fake_ns = 100;
static uint64_t tick(void) { return atomic_fetch_add(&fake_ns, 1); }

typedef struct seen {
  uint64_t n, last_time;
  uint32_t per_thread_next[4];
  int ordered;
} seen;

static void record(void *arg, const ipc_launch *l) {
  seen *s = arg;
  s->n++;
  /* Each producer's launches come out in its own order. */
  if (l->correlation != s->per_thread_next[l->tid]) s->ordered = 0;
  s->per_thread_next[l->tid] = l->correlation + 1;
  s->last_time = l->time;
}

static launch_ring *ring;

static void *produce(void *arg) {
  uint32_t tid = (uint32_t)(uintptr_t)arg;
  for (uint32_t i = 0; i < 20000; i++) {
    ipc_launch l = {.kind = IPC_LAUNCH_KERNEL, .correlation = i, .tid = tid};
    while (!lr_push(ring, &l, tick)) {
    } /* the test retries; the library drops */
  }
  return NULL;
}

static void test_launch_ring(void) {
  ring = lr_new();
  CHECK(ring != NULL);
  seen s = {.ordered = 1};
  uint64_t mark = 0;
  CHECK(lr_drain(ring, record, &s, tick, &mark) == 1 && s.n == 0 && mark > 0);
  /* Four threads, 80,000 launches through a 65,536-slot queue drained
   * concurrently: every one arrives once, each thread's in order. */
  pthread_t th[4];
  for (uintptr_t i = 0; i < 4; i++) pthread_create(&th[i], NULL, produce, (void *)i);
  while (s.n < 80000) lr_drain(ring, record, &s, tick, &mark);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  CHECK(s.n == 80000 && s.ordered);
  CHECK(lr_drain(ring, record, &s, tick, &mark) == 1 && mark > s.last_time);
  /* Full: the launch is dropped and counted, never waited for. */
  uint64_t before = atomic_load(&ring->dropped);
  for (uint32_t i = 0; i < LAUNCH_RING_SLOTS + 10; i++) {
    ipc_launch l = {.kind = IPC_LAUNCH_KERNEL, .correlation = i};
    lr_push(ring, &l, tick);
  }
  CHECK(atomic_load(&ring->dropped) - before == 10);
  free(ring);
}

static void test_resource_attr(void) {
  char v[64];
  CHECK(resource_attr("service.instance.id=abc-123,k8s.pod.name=p", "service.instance.id", v, sizeof(v)) && strcmp(v, "abc-123") == 0);
  CHECK(resource_attr("a=1, service.instance.id = x%2Cy%20z ,b=2", "service.instance.id", v, sizeof(v)) && strcmp(v, "x,y z") == 0);
  CHECK(!resource_attr("service.instance.idx=1,xservice.instance.id=2", "service.instance.id", v, sizeof(v)) && v[0] == 0);
  CHECK(!resource_attr("service.instance.id=", "service.instance.id", v, sizeof(v)));
  CHECK(!resource_attr(NULL, "service.instance.id", v, sizeof(v)));
  CHECK(resource_attr("service.instance.id=%zz", "service.instance.id", v, sizeof(v)) && strcmp(v, "%zz") == 0);
  char small[4];
  CHECK(resource_attr("service.name=abcdef", "service.name", small, sizeof(small)) && strcmp(small, "abc") == 0);
}

static void test_engine_host(void) {
  char v[256], h[256] = {0};
  engine_host("k8s.pod.ip=10.0.0.7,k8s.pod.name=vllm-0", v, sizeof(v));
  CHECK(strcmp(v, "vllm-0") == 0);
  gethostname(h, sizeof(h) - 1);
  engine_host("k8s.pod.ip=10.0.0.7", v, sizeof(v));
  CHECK(strcmp(v, h) == 0);
  engine_host(NULL, v, sizeof(v));
  CHECK(strcmp(v, h) == 0);
}

/* The signature is Graphsignal's string, hashed: one token per distinct
 * node, sorted by bytes, whatever order the graph lists its nodes in. The
 * exact value against an independent implementation is checked in Go
 * (internal/cuptiwire TestCEncodedFramesDecode). */
static void test_graph_sig(void) {
  graph_tok one[] = {{.type = graph_node_type_name(2)}};
  const char want1[] = "memset[calls=1];";
  CHECK(graph_sig_hash(one, 1) == graph_fnv(GRAPH_SIG_BASIS, want1, sizeof(want1) - 1));
  graph_tok a[] = {{.type = "kernel", .name = "k_b"}, {.type = "memset"}, {.type = "kernel", .name = "k"}, {.type = "kernel", .name = "k"}};
  graph_tok b[] = {{.type = "kernel", .name = "k"}, {.type = "kernel", .name = "k"}, {.type = "memset"}, {.type = "kernel", .name = "k_b"}};
  const char want[] = "kernel[name=k,calls=2];kernel[name=k_b,calls=1];memset[calls=1];";
  uint64_t ha = graph_sig_hash(a, 4);
  CHECK(ha == graph_sig_hash(b, 4));
  CHECK(ha == graph_fnv(GRAPH_SIG_BASIS, want, sizeof(want) - 1));
  graph_tok c[] = {{.type = "kernel", .name = "k"}, {.type = "kernel", .name = "k_b"}, {.type = "memset"}};
  CHECK(graph_sig_hash(c, 3) != ha); /* counts are part of it */
  CHECK(graph_sig_hash(c, 0) == 0);
  /* Two symbols with the same bytes at different addresses are one token. */
  char s1[] = "k", s2[] = "k";
  graph_tok d[] = {{.type = "kernel", .name = s1}, {.type = "kernel", .name = "k_b"}, {.type = "memset"}, {.type = "kernel", .name = s2}};
  CHECK(graph_sig_hash(d, 4) == ha);
  CHECK(strcmp(graph_node_type_name(4), "child") == 0 && strcmp(graph_node_type_name(11), "memfree") == 0);
  CHECK(strcmp(graph_node_type_name(12), "other") == 0 && strcmp(graph_node_type_name(-1), "other") == 0);
}

int main(void) {
  test_token_bucket();
  test_corr_table();
  test_duty();
  test_launch_ring();
  test_resource_attr();
  test_engine_host();
  test_graph_sig();
  printf("limits tests: 7 passed, 0 failed\n");
  return 0;
}
