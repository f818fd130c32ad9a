// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/* CHECK ends the test process with the failing condition and its place. */
#ifndef INFERPROF_TEST_CHECK_H
#define INFERPROF_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                          \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      fprintf(stderr, "%s:%d: %s: check failed: %s\n", __FILE__, __LINE__, __func__, #cond); \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

#endif
