// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/* Tests of the overhead controls in limits.h, under ASan and UBSan. */
#include <stdio.h>
#include <stdlib.h>

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

int main(void) {
  test_token_bucket();
  test_corr_table();
  test_duty();
  printf("limits tests: 3 passed, 0 failed\n");
  return 0;
}
