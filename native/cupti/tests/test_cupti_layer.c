// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/* Tests the CUPTI layer (cupti_inject.c) against the mock libcupti in
 * mock_cupti.c. InitializeInjection runs once per process, so each case runs
 * in a process of its own (this binary, re-executed with the case's name)
 * with a real collector socket in the parent, which reads every frame the
 * case sent until the process ends and checks them. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cupti_activity.h>

#include "../graph_sig.h"
#include "frames.h"
#include "check.h"

int InitializeInjection(void);
int mock_enabled(int kind);
int mock_subscribed(void);
int mock_flushes(void);
int mock_forced_flushes(void);
int mock_timestamps(void);
int mock_callbacks_enabled(void);
int mock_registered_is_other(void);
int mock_emit_kernel(const char *name, uint64_t start, uint64_t end, uint32_t device, uint32_t ctx, uint32_t corr,
                     uint32_t graph, uint64_t node);
int mock_emit_memcpy(uint64_t start, uint64_t end, uint32_t device, uint64_t bytes);
int mock_emit_sync(uint64_t start, uint64_t end, uint32_t ctx);
int mock_emit_graph(uint64_t start, uint64_t end, uint32_t device, uint32_t graph);
uint8_t *mock_take_buffer(size_t *size);
void mock_fill_and_complete(uint8_t *b, size_t size, int n, const char *name, uint64_t t0);
void mock_complete_async(void);
int mock_other_profiler_start(void);
void mock_other_profiler_stop(void);
int mock_other_v2_start(void);
size_t mock_other_v2_stop(void);
int mock_multi_state(void);
int mock_ours_is_v2(void);
void mock_launch(int graph, uint32_t corr);
void mock_launch_runtime(uint32_t corr, uint32_t driver_corr);
void mock_graph_instantiate(int n, const int *types, const char *const *funcs, uint32_t *graph_id, uint32_t *exec_id);


static const uint64_t T0 = 2000000000ull; /* CUPTI ns of the first record */

static void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* wait_until polls cond for at most 10 s: the flush thread runs on its own. */
#define WAIT_UNTIL(cond)                                 \
  do {                                                   \
    int _i = 0;                                          \
    for (; _i < 2000 && !(cond); _i++) nap_ms(5);        \
    CHECK(cond);                                         \
  } while (0)

/* capture_stderr sends this process's stderr to a file until
 * captured_stderr, which returns what was written (and echoes it), so a
 * case can check the library's warnings. */
static int capture_fd = -1, saved_stderr = -1;
static char captured[16384];

static void capture_stderr(void) {
  char path[] = "/tmp/cuptilayer-stderr.XXXXXX";
  fflush(stderr);
  capture_fd = mkstemp(path);
  CHECK(capture_fd >= 0);
  unlink(path);
  saved_stderr = dup(2);
  CHECK(saved_stderr >= 0 && dup2(capture_fd, 2) == 2);
}

static const char *captured_stderr(void) {
  fflush(stderr);
  CHECK(lseek(capture_fd, 0, SEEK_SET) == 0);
  ssize_t n = read(capture_fd, captured, sizeof(captured) - 1);
  captured[n > 0 ? n : 0] = 0;
  dup2(saved_stderr, 2);
  close(saved_stderr);
  close(capture_fd);
  fputs(captured, stderr);
  return captured;
}

/* ---- cases: each runs in its own process ---- */

static void case_stream(void) {
  setenv("INFERPROF_CUPTI_BUFFERS", "not-a-number", 1); /* warns, uses the default */
  CHECK(InitializeInjection() == 1);
  CHECK(InitializeInjection() == 1); /* idempotent */
  CHECK(mock_subscribed());
  CHECK(mock_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CHECK(mock_enabled(CUPTI_ACTIVITY_KIND_MEMCPY));
  CHECK(mock_enabled(CUPTI_ACTIVITY_KIND_MEMSET));
  CHECK(mock_enabled(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
  CHECK(!mock_enabled(CUPTI_ACTIVITY_KIND_GRAPH_TRACE)); /* node mode by default */
  CHECK(mock_callbacks_enabled() >= 12);                 /* context destroy + launches */
  for (int i = 0; i < 100; i++) {
    const char *name = i % 2 ? "_ZN4vllm15rms_norm_kernelEv" : "ampere_sgemm_128x64_tn";
    CHECK(mock_emit_kernel(name, T0 + (uint64_t)i * 1000, T0 + (uint64_t)i * 1000 + 500, 3, 42, (uint32_t)i + 1, 9,
                           77 + (uint64_t)i));
  }
  CHECK(mock_emit_kernel("incomplete", 0, 0, 3, 42, 500, 0, 0)); /* skipped: no timestamps */
  CHECK(mock_emit_memcpy(T0, T0 + 100, 3, 4096));
  CHECK(mock_emit_sync(T0 + 200, T0 + 300, 42)); /* context 42 is on device 3 */
  int f = mock_flushes();
  WAIT_UNTIL(mock_flushes() >= f + 3); /* the flush thread delivered and sent */
  exit(0);
}

static void case_overflow(void) {
  /* CUPTI 12.6 (API 24) crashes on a NULL buffer; the mock aborts then. */
  CHECK(InitializeInjection() == 1);
  size_t s1, s2, s3;
  uint8_t *b1 = mock_take_buffer(&s1), *b2 = mock_take_buffer(&s2);
  CHECK(b1 && b2 && s1 == 1024 * 1024);
  uint8_t *b3 = mock_take_buffer(&s3); /* the pool is empty */
  CHECK(b3 != NULL && s3 > 0);
  mock_fill_and_complete(b3, s3, 50, "dropped_kernel", T0);
  mock_fill_and_complete(b1, s1, 10, "kept_kernel", T0);
  (void)b2; /* still held, as a per-thread buffer is */
  exit(0);
}

static void case_reject(void) {
  /* API 27 accepts a NULL buffer and counts the records itself. */
  CHECK(InitializeInjection() == 1);
  size_t s1, s2, s3;
  uint8_t *b1 = mock_take_buffer(&s1), *b2 = mock_take_buffer(&s2);
  CHECK(b1 && b2);
  CHECK(mock_take_buffer(&s3) == NULL);
  for (int i = 0; i < 5; i++) CHECK(!mock_emit_kernel("lost", T0, T0 + 1, 0, 1, 1, 0, 0));
  mock_fill_and_complete(b1, s1, 10, "kept_kernel", T0);
  (void)b2;
  exit(0);
}

static void case_async(void) {
  /* CUDA 13.0: Kernel10 records, 216 bytes, completed on CUPTI's thread. */
  CHECK(InitializeInjection() == 1);
  for (int i = 0; i < 50; i++)
    CHECK(mock_emit_kernel("flash_fwd_kernel", T0 + (uint64_t)i * 100, T0 + (uint64_t)i * 100 + 50, 1, 5,
                           (uint32_t)i + 1, 4, 1000 + (uint64_t)i));
  mock_complete_async();
  exit(0);
}

static void case_enable_fail(void) {
  char v[16];
  snprintf(v, sizeof(v), "%d", (int)CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  setenv("MOCK_CUPTI_FAIL_ENABLE", v, 1);
  CHECK(InitializeInjection() == 0);
  CHECK(!mock_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CHECK(!mock_enabled(CUPTI_ACTIVITY_KIND_MEMCPY));
  CHECK(!mock_subscribed());
  exit(0);
}

static void case_graph_fail(void) {
  char v[16];
  snprintf(v, sizeof(v), "%d", (int)CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
  setenv("MOCK_CUPTI_FAIL_ENABLE", v, 1);
  setenv("INFERPROF_CUPTI_GRAPH_MODE", "graph", 1);
  CHECK(InitializeInjection() == 1); /* falls back to node mode, says so */
  CHECK(mock_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CHECK(!mock_enabled(CUPTI_ACTIVITY_KIND_GRAPH_TRACE));
  CHECK(mock_emit_kernel("k", T0, T0 + 10, 0, 1, 1, 3, 5));
  exit(0);
}

static void case_graph(void) {
  setenv("INFERPROF_CUPTI_GRAPH_MODE", "graph", 1);
  CHECK(InitializeInjection() == 1);
  CHECK(mock_enabled(CUPTI_ACTIVITY_KIND_GRAPH_TRACE));
  for (int i = 0; i < 3; i++) CHECK(mock_emit_graph(T0 + (uint64_t)i * 1000, T0 + (uint64_t)i * 1000 + 900, 0, 12));
  CHECK(mock_emit_kernel("eager_kernel", T0, T0 + 10, 0, 1, 1, 0, 0));
  CHECK(mock_emit_kernel("eager_kernel", T0 + 20, T0 + 30, 0, 1, 2, 0, 0));
  exit(0);
}

static void case_displaced(void) {
  setenv("INFERPROF_CUPTI_RESUME_MS", "100", 1);
  CHECK(InitializeInjection() == 1);
  uint32_t corr = 1;
  for (int i = 0; i < 5; i++, corr++) CHECK(mock_emit_kernel("before", T0 + corr * 10, T0 + corr * 10 + 5, 0, 1, corr, 0, 0));
  int f = mock_flushes();
  WAIT_UNTIL(mock_flushes() >= f + 2);
  CHECK(mock_other_profiler_start() == CUPTI_SUCCESS); /* torch.profiler registers its callbacks */
  CHECK(mock_registered_is_other());
  for (int i = 0; i < 10; i++, corr++) {
    mock_launch(0, corr);
    CHECK(mock_emit_kernel("theirs", T0 + corr * 10, T0 + corr * 10 + 5, 0, 1, corr, 0, 0));
  }
  mock_other_profiler_stop(); /* ... and disables kernel activity at its end */
  CHECK(!mock_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  /* The engine runs on: launches, but no buffer for us. */
  for (int i = 0; i < 2000 && mock_registered_is_other(); i++, corr++) {
    mock_launch(0, corr);
    nap_ms(2);
  }
  CHECK(!mock_registered_is_other());
  CHECK(mock_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  for (int i = 0; i < 5; i++, corr++) CHECK(mock_emit_kernel("after", T0 + corr * 10, T0 + corr * 10 + 5, 0, 1, corr, 0, 0));
  exit(0);
}

/* INFERPROF_CUPTI_KINDS: exactly the kinds asked for are enabled, and only
 * their records arrive. */
static void case_kinds(void) {
  CHECK(InitializeInjection() == 1);
  CHECK(mock_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CHECK(mock_enabled(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
  CHECK(!mock_enabled(CUPTI_ACTIVITY_KIND_MEMCPY));
  CHECK(!mock_enabled(CUPTI_ACTIVITY_KIND_MEMSET));
  CHECK(!mock_enabled(CUPTI_ACTIVITY_KIND_GRAPH_TRACE));
  for (uint32_t i = 1; i <= 4; i++) CHECK(mock_emit_kernel("k", T0 + i * 10, T0 + i * 10 + 5, 0, 1, i, 0, 0));
  CHECK(!mock_emit_memcpy(T0, T0 + 100, 0, 4096)); /* CUPTI records no memcpy */
  CHECK(mock_emit_sync(T0 + 200, T0 + 300, 1));
  exit(0);
}

/* Without kernel the library still runs, for the kinds asked for, and says
 * what is missing. */
static void case_kinds_no_kernel(void) {
  capture_stderr();
  CHECK(InitializeInjection() == 1);
  const char *err = captured_stderr();
  CHECK(strstr(err, "INFERPROF_CUPTI_KINDS has no kernel") != NULL);
  CHECK(!mock_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CHECK(mock_enabled(CUPTI_ACTIVITY_KIND_MEMCPY));
  CHECK(!mock_enabled(CUPTI_ACTIVITY_KIND_MEMSET) && !mock_enabled(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
  CHECK(!mock_emit_kernel("k", T0, T0 + 5, 0, 1, 1, 0, 0));
  CHECK(mock_emit_memcpy(T0, T0 + 100, 0, 4096));
  exit(0);
}

/* A kind the library does not know: a warning naming it, and the default
 * (every kind). */
static void case_kinds_bad(void) {
  capture_stderr();
  CHECK(InitializeInjection() == 1);
  const char *err = captured_stderr();
  CHECK(strstr(err, "INFERPROF_CUPTI_KINDS=kernel,bogus: unknown kind bogus") != NULL);
  CHECK(strstr(err, "using all") != NULL);
  CHECK(mock_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) && mock_enabled(CUPTI_ACTIVITY_KIND_MEMCPY));
  CHECK(mock_enabled(CUPTI_ACTIVITY_KIND_MEMSET) && mock_enabled(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
  CHECK(mock_emit_kernel("k", T0, T0 + 5, 0, 1, 1, 0, 0));
  CHECK(mock_emit_memcpy(T0, T0 + 100, 0, 4096));
  CHECK(mock_emit_sync(T0 + 200, T0 + 300, 1));
  exit(0);
}

static int all_kinds(int on) {
  static const int k[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
                          CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};
  for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
    if (!!mock_enabled(k[i]) != on) return 0;
  return 1;
}

/* phase_launches launches and emits 5 eager kernels with ids from *corr;
 * it returns how many CUPTI recorded for us. */
static int phase_launches(const char *name, uint32_t *corr) {
  int got = 0;
  for (int i = 0; i < 5; i++, (*corr)++) {
    mock_launch(0, *corr);
    got += mock_emit_kernel(name, T0 + *corr * 10, T0 + *corr * 10 + 5, 0, 1, *corr, 0, 0);
  }
  return got;
}

/* INFERPROF_CUPTI_DUTY_CYCLE=500/2000: on for the first 500 ms of every
 * 2 s of the flush thread's clock. Each phase is entered by watching the
 * mock's enabled kinds, then waiting for one more flush-thread pass (the
 * library marks the phase right after switching the kinds); each phase's
 * work takes microseconds of its >= 500 ms. */
static void case_duty(void) {
  uint32_t corr = 1;
  CHECK(InitializeInjection() == 1);
  CHECK(all_kinds(1));
  CHECK(phase_launches("on_first", &corr) == 5);
  WAIT_UNTIL(all_kinds(0));
  WAIT_UNTIL(mock_forced_flushes() >= 1); /* what was in flight at the switch goes out */
  int f = mock_flushes();
  WAIT_UNTIL(mock_flushes() > f);
  CHECK(phase_launches("off", &corr) == 0); /* CUPTI records nothing, no launch is sent */
  CHECK(!mock_emit_memcpy(T0, T0 + 100, 0, 4096));
  WAIT_UNTIL(all_kinds(1));
  f = mock_flushes();
  WAIT_UNTIL(mock_flushes() > f);
  CHECK(phase_launches("on_second", &corr) == 5);
  exit(0);
}

/* INFERPROF_CUPTI_GRAPH_RATE_LIMIT=2: two graph launches a second per
 * thread (the bucket starts with one token); the kernels of the graph
 * launches that found no token are counted, not sent. Eager launches are not
 * limited. */
static void case_graph_rate(void) {
  CHECK(InitializeInjection() == 1);
  for (uint32_t i = 1; i <= 10; i++) {
    mock_launch(0, i);
    CHECK(mock_emit_kernel("eager", T0 + i * 10, T0 + i * 10 + 5, 0, 1, i, 0, 0));
  }
  for (uint32_t g = 0; g < 20; g++) {
    uint32_t corr = 1000 + g;
    mock_launch(1, corr);
    for (uint32_t n = 0; n < 3; n++)
      CHECK(mock_emit_kernel("in_graph", T0 + 10000 + g * 100 + n * 10, T0 + 10005 + g * 100 + n * 10, 0, 1, corr, 9, n + 1));
  }
  exit(0);
}

/* The clock offset is sampled again from the flush thread, and each sample
 * keeps its tightest realtime/CUPTI/realtime triple: all but one of each five
 * timestamp calls take 50 ms here. */
static void case_clock(void) {
  CHECK(InitializeInjection() == 1);
  WAIT_UNTIL(mock_timestamps() >= 15); /* init, the first pass, one second later */
  int f = mock_flushes();
  WAIT_UNTIL(mock_flushes() >= f + 2); /* the last sample was published */
  exit(0);
}

static int find_socket_fd(void) {
  DIR *d = opendir("/proc/self/fd");
  CHECK(d);
  int found = -1;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    char link[300], target[128];
    snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n > 0) {
      target[n] = 0;
      if (strncmp(target, "socket:", 7) == 0) found = atoi(e->d_name);
    }
  }
  closedir(d);
  return found;
}

static void case_fork(void) {
  CHECK(InitializeInjection() == 1);
  for (uint32_t i = 1; i <= 3; i++) CHECK(mock_emit_kernel("parent_kernel", T0 + i * 10, T0 + i * 10 + 5, 0, 1, i, 0, 0));
  WAIT_UNTIL(find_socket_fd() >= 0); /* the flush thread connected */
  int fd = find_socket_fd();
  pid_t child = fork();
  if (child == 0) {
    /* The inherited connection is closed; exit runs the library's atexit
     * handler, and any CUPTI call there ends this process with 97. */
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) _exit(3);
    exit(0);
  }
  int status = 0;
  CHECK(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  exit(0);
}

static void case_exit(void) {
  setenv("INFERPROF_CUPTI_FLUSH_MS", "10000", 1); /* the flush thread sleeps through it */
  CHECK(InitializeInjection() == 1);
  for (uint32_t i = 1; i <= 20; i++) CHECK(mock_emit_kernel("in_flight", T0 + i * 10, T0 + i * 10 + 5, 0, 1, i, 0, 0));
  exit(0); /* records are still in CUPTI's buffer */
}

static void case_rate_limit(void) {
  setenv("INFERPROF_CUPTI_RATE_LIMIT", "5", 1);
  CHECK(InitializeInjection() == 1);
  for (uint32_t i = 1; i <= 100; i++) {
    mock_launch(0, i);
    CHECK(mock_emit_kernel("eager", T0 + i * 10, T0 + i * 10 + 5, 0, 1, i, 0, 0));
  }
  mock_launch(1, 500); /* graph launches are not limited here */
  for (uint32_t i = 0; i < 3; i++) CHECK(mock_emit_kernel("in_graph", T0 + 5000 + i, T0 + 5001 + i, 0, 1, 500, 9, i + 1));
  exit(0);
}

/* Launch records: each launch once (a runtime launch's driver call inside
 * it is not another), before the kernels they launched; the device's UUID
 * from the driver; the identity from the OpenTelemetry variables. */
static void case_launches(void) {
  setenv("OTEL_RESOURCE_ATTRIBUTES", "k8s.pod.name=p,service.instance.id=inst%2D1", 1);
  setenv("OTEL_SERVICE_NAME", "vllm", 1);
  CHECK(InitializeInjection() == 1);
  for (uint32_t i = 1; i <= 5; i++) mock_launch(0, i);
  mock_launch_runtime(10, 11);
  mock_launch(1, 20);
  for (uint32_t i = 1; i <= 5; i++) CHECK(mock_emit_kernel("eager", T0 + i * 10, T0 + i * 10 + 5, 2, 1, i, 0, 0));
  CHECK(mock_emit_kernel("runtime_launched", T0 + 100, T0 + 110, 2, 1, 10, 0, 0));
  for (uint32_t i = 0; i < 3; i++) CHECK(mock_emit_kernel("in_graph", T0 + 200 + i * 10, T0 + 205 + i * 10, 2, 1, 20, 9, i + 1));
  int f = mock_flushes();
  WAIT_UNTIL(mock_flushes() >= f + 3);
  exit(0);
}

static void case_busy(void) {
  setenv("MOCK_CUPTI_BUSY", "1", 1);
  CHECK(InitializeInjection() == 0);
  CHECK(!mock_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CHECK(!mock_subscribed());
  exit(0);
}

/* CUDA 13.3: multi-subscriber mode. A second tool on the v2 API runs beside
 * us and stops without touching our kinds; a v1 tool (Kineto today) is
 * refused instead of taking our callbacks; graph mode stays off because it
 * would switch graph kernels off for every subscriber. */
static void case_multisub(void) {
  setenv("INFERPROF_CUPTI_GRAPH_MODE", "graph", 1);
  CHECK(InitializeInjection() == 1);
  CHECK(mock_ours_is_v2() && mock_multi_state() == 1);
  CHECK(mock_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CHECK(!mock_enabled(CUPTI_ACTIVITY_KIND_GRAPH_TRACE));
  uint32_t corr = 1;
  for (int i = 0; i < 5; i++, corr++) CHECK(mock_emit_kernel("before", T0 + corr * 10, T0 + corr * 10 + 5, 0, 1, corr, 0, 0));
  CHECK(mock_other_v2_start() == CUPTI_SUCCESS);
  for (int i = 0; i < 10; i++, corr++) {
    mock_launch(0, corr);
    CHECK(mock_emit_kernel("both", T0 + corr * 10, T0 + corr * 10 + 5, 0, 1, corr, 0, 0));
  }
  CHECK(mock_other_v2_stop() == 10); /* it got the kernels launched while it ran */
  CHECK(mock_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)); /* ours are untouched */
  CHECK(mock_other_profiler_start() == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  CHECK(!mock_registered_is_other());
  for (int i = 0; i < 5; i++, corr++) CHECK(mock_emit_kernel("after", T0 + corr * 10, T0 + corr * 10 + 5, 0, 1, corr, 0, 0));
  int f = mock_flushes();
  WAIT_UNTIL(mock_flushes() >= f + 2);
  exit(0);
}

/* The single-subscriber API on CUDA 13.3, by choice or because CUPTI or the
 * driver refuses cuptiSubscribe_v2. */
static void case_multisub_v1(void) {
  CHECK(InitializeInjection() == 1);
  CHECK(!mock_ours_is_v2() && mock_multi_state() == 2);
  for (uint32_t i = 1; i <= 4; i++) CHECK(mock_emit_kernel("v1_kernel", T0 + i * 10, T0 + i * 10 + 5, 0, 1, i, 0, 0));
  exit(0);
}

/* Another tool took CUPTI with the v2 API in single-subscriber mode: we
 * cannot join it, with either API, and stay off. */
static void case_multisub_held(void) {
  CHECK(InitializeInjection() == 0);
  CHECK(!mock_subscribed());
  exit(0);
}

/* Graphs as a vLLM piecewise capture makes them (CUgraphNodeType numbers):
 * two decode buckets of one structure, which differ only in launch grid, and
 * a prefill graph of other kernels. */
static const int dec_types[] = {0, 0, 2, 0, 5};
static const char *const dec_funcs[] = {"triton_poi_fused_add_cos_sin_0", "_ZN5flash16flash_fwd_kernelI23Flash_fwd_kernel_traitsEEvNS_16Flash_fwd_paramsE",
                                        NULL, "triton_poi_fused_add_cos_sin_0", NULL};
static const int pre_types[] = {0, 1, 0};
static const char *const pre_funcs[] = {"_ZN7cutlass7Kernel2I53cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8EEvNT_6ParamsE", NULL,
                                        "triton_poi_fused_add_cos_sin_0"};
#define NODES(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* expect_sig is the signature graph_sig.h gives the nodes, the symbols
 * unnamed when the driver gave none. */
static uint64_t expect_sig(int n, const int *types, const char *const *funcs, int named) {
  graph_tok t[16];
  for (int i = 0; i < n; i++) {
    t[i].type = graph_node_type_name(types[i]);
    t[i].name = types[i] == 0 ? (named ? funcs[i] : "") : NULL;
  }
  return graph_sig_hash(t, (size_t)n);
}

/* Three graphs are instantiated, then launched (GRAPH_TRACE records carry
 * the executable's id), plus a launch of a graph instantiated before any
 * signature could be taken. */
static void case_graph_sig(void) {
  CHECK(InitializeInjection() == 1);
  int graph_mode = getenv("INFERPROF_CUPTI_GRAPH_MODE") != NULL; /* else no graph records at all */
  uint32_t g[3], e[3];
  mock_graph_instantiate(NODES(dec_types), dec_types, dec_funcs, &g[0], &e[0]);
  mock_graph_instantiate(NODES(dec_types), dec_types, dec_funcs, &g[1], &e[1]);
  mock_graph_instantiate(NODES(pre_types), pre_types, pre_funcs, &g[2], &e[2]);
  for (int i = 0; i < 3; i++) CHECK(mock_emit_graph(T0 + (uint64_t)i * 1000, T0 + (uint64_t)i * 1000 + 900, 0, e[i]) == graph_mode);
  CHECK(mock_emit_graph(T0 + 5000, T0 + 5900, 0, 999) == graph_mode);
  CHECK(mock_emit_kernel("eager_kernel", T0, T0 + 10, 0, 1, 1, 0, 0));
  exit(0);
}

static const struct {
  const char *name;
  void (*run)(void);
  const char *env[4]; /* NAME=VALUE set before the case runs */
} cases[] = {
    {"stream", case_stream, {NULL}},
    {"overflow", case_overflow, {"MOCK_CUPTI_VERSION=24", "INFERPROF_CUPTI_BUFFERS=2", "INFERPROF_CUPTI_BUFFER_KB=1024"}},
    {"reject", case_reject, {"MOCK_CUPTI_VERSION=27", "INFERPROF_CUPTI_BUFFERS=2", "INFERPROF_CUPTI_BUFFER_KB=1024"}},
    {"async", case_async, {"MOCK_CUPTI_VERSION=130000", "MOCK_CUPTI_KERNEL_SIZE=216"}},
    {"enable_fail", case_enable_fail, {NULL}},
    {"graph_fail", case_graph_fail, {NULL}},
    {"graph", case_graph, {NULL}},
    {"displaced", case_displaced, {NULL}},
    {"fork", case_fork, {"ASAN_OPTIONS=detect_leaks=0"}},
    {"exit", case_exit, {NULL}},
    {"rate_limit", case_rate_limit, {NULL}},
    {"busy", case_busy, {NULL}},
    {"multisub", case_multisub, {"MOCK_CUPTI_VERSION=130300", "MOCK_CUPTI_KERNEL_SIZE=216"}},
    {"multisub_off", case_multisub_v1, {"MOCK_CUPTI_VERSION=130300", "INFERPROF_CUPTI_MULTI_SUBSCRIBER=0"}},
    {"multisub_refused", case_multisub_v1, {"MOCK_CUPTI_VERSION=130300", "MOCK_CUPTI_V2_FAIL=27" /* CUPTI_ERROR_NOT_SUPPORTED */}},
    {"multisub_held", case_multisub_held, {"MOCK_CUPTI_VERSION=130300", "MOCK_CUPTI_HELD_BY=Nsight Systems"}},
    {"launches", case_launches, {NULL}},
    {"launches_mig", case_launches, {"MOCK_CUDA_MIG=1"}},
    {"launches_off", case_launches, {"INFERPROF_CUPTI_LAUNCHES=0"}},
    {"kinds", case_kinds, {"INFERPROF_CUPTI_KINDS=kernel,sync"}},
    {"kinds_no_kernel", case_kinds_no_kernel, {"INFERPROF_CUPTI_KINDS=memcpy"}},
    {"kinds_bad", case_kinds_bad, {"INFERPROF_CUPTI_KINDS=kernel,bogus"}},
    {"duty", case_duty, {"INFERPROF_CUPTI_DUTY_CYCLE=500/2000"}},
    {"graph_rate", case_graph_rate, {"INFERPROF_CUPTI_GRAPH_RATE_LIMIT=2"}},
    {"clock", case_clock, {"MOCK_CUPTI_SLOW_TIMESTAMP_US=50000"}},
    {"graph_sig", case_graph_sig, {"INFERPROF_CUPTI_GRAPH_MODE=graph"}},
    {"graph_sig_noname", case_graph_sig, {"INFERPROF_CUPTI_GRAPH_MODE=graph", "MOCK_CUDA_NO_FUNC_NAME=1"}},
    {"graph_sig_node", case_graph_sig, {NULL}},
};

/* ---- the collector side ---- */

typedef struct result {
  parsed p;
  int connections;
  int status;
  pid_t pid;
} result;

static char sock_path[108];

static void run_case(const char *self, int idx, result *res) {
  memset(res, 0, sizeof(*res));
  unlink(sock_path);
  int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  strcpy(sa.sun_path, sock_path);
  CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(lfd, 4) == 0);
  pid_t child = fork();
  if (child == 0) {
    for (int e = 0; e < 4 && cases[idx].env[e]; e++) putenv((char *)cases[idx].env[e]);
    execl(self, self, cases[idx].name, (char *)NULL);
    _exit(127);
  }
  res->pid = child;
  size_t cap = 8 << 20, n = 0;
  uint8_t *buf = malloc(cap);
  int cfd = -1, exited = 0;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - t0.tv_sec > 60) break; /* a time limit, not a count: reads come in many small pieces */
    struct pollfd pf[2] = {{.fd = lfd, .events = POLLIN}, {.fd = cfd, .events = POLLIN}};
    poll(pf, cfd >= 0 ? 2 : 1, 10);
    if (pf[0].revents & POLLIN) {
      int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
      if (fd >= 0) {
        res->connections++;
        if (cfd < 0) cfd = fd;
        else close(fd);
      }
    }
    int eof = cfd < 0;
    if (cfd >= 0 && (pf[1].revents & (POLLIN | POLLHUP))) {
      ssize_t r = read(cfd, buf + n, cap - n);
      if (r > 0) n += (size_t)r;
      if (r == 0) eof = 1;
    }
    if (!exited && waitpid(child, &res->status, WNOHANG) == child) exited = 1;
    if (exited && eof) break;
  }
  if (!exited) {
    fprintf(stderr, "case %s did not end within 60 s\n", cases[idx].name);
    kill(child, SIGKILL);
  }
  CHECK(exited);
  CHECK(parse_frames(buf, n, &res->p) == 0);
  CHECK(res->p.consumed == n); /* whole frames only */
  free(buf);
  if (cfd >= 0) close(cfd);
  close(lfd);
}

#define CASE_OK(r) CHECK(WIFEXITED((r)->status) && WEXITSTATUS((r)->status) == 0)

int main(int argc, char **argv) {
  if (argc > 1) {
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
      if (strcmp(argv[1], cases[i].name) == 0) cases[i].run();
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
  }
  char dir[] = "/tmp/cuptilayer.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  snprintf(sock_path, sizeof(sock_path), "%s/c.sock", dir);
  setenv("INFERPROF_CUPTI_ENDPOINT", sock_path, 1);
  setenv("INFERPROF_CUPTI_FLUSH_MS", "10", 1);
  /* On a loaded machine the flush thread may take a while to be scheduled;
   * a join that times out leaves it running into LeakSanitizer's exit. */
  setenv("INFERPROF_CUPTI_EXIT_MS", "10000", 1);
  char self[512];
  ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
  CHECK(sl > 0);
  self[sl] = 0;
  static result r;
  int passed = 0;

  run_case(self, 0, &r); /* stream */
  CASE_OK(&r);
  CHECK(r.p.hellos == 1 && r.p.pid == (uint32_t)r.pid);
  char node[256] = {0};
  gethostname(node, sizeof(node) - 1);
  CHECK(strcmp(r.p.host, node) == 0); /* no k8s.pod.name: the host's name */
  CHECK(r.p.records == 102 && r.p.kernels == 100);
  CHECK(r.p.strings == 2);
  CHECK(r.p.graph_id == 9 && r.p.graph_node == 77 + 99);
  CHECK(r.p.sync_device == 3);
  CHECK(r.p.memcpy_sub == 1 && r.p.memcpy_bytes == 4096);
  CHECK(r.p.first_start > 1600000000000000000ull); /* Unix ns, after 2020 */
  CHECK(r.p.stats_frames >= 1 && r.p.liveness_frames >= 1 && r.p.clock_frames >= 1);
  CHECK(r.p.live_total == 8 && r.p.live_version == 24 && r.p.live_buffers >= 1);
  CHECK(r.p.live_last_buffer > 1600000000000000000ull);
  CHECK(r.p.live_state & IPC_LIVE_ENABLED);
  CHECK(r.p.clock_error > 0 && r.p.clock_error < 1000000000ull);
  CHECK(r.p.hello_flags == IPC_HELLO_LAUNCHES);
  printf("cupti layer streams Kernel9 records, names, graph node ids, liveness and clock: ok\n");
  passed++;

  run_case(self, 1, &r); /* overflow */
  CASE_OK(&r); /* the mock aborts on a NULL buffer below API 27 */
  CHECK(r.p.kernels == 10);
  CHECK(r.p.stat_pool_exhausted == 1 && r.p.stat_overflow_dropped == 50);
  printf("cupti layer below API 27 lends an overflow buffer, drops and counts its records: ok\n");
  passed++;

  run_case(self, 2, &r); /* reject */
  CASE_OK(&r);
  CHECK(r.p.kernels == 10);
  CHECK(r.p.stat_pool_exhausted == 6 && r.p.stat_cupti_dropped == 6);
  printf("cupti layer from API 27 refuses a buffer and reports CUPTI's dropped records: ok\n");
  passed++;

  run_case(self, 3, &r); /* async */
  CASE_OK(&r);
  CHECK(r.p.kernels == 50 && r.p.graph_id == 4 && r.p.graph_node == 1049);
  CHECK(r.p.live_version == 130000);
  printf("cupti layer reads 216-byte Kernel10 records completed on another thread: ok\n");
  passed++;

  run_case(self, 4, &r); /* enable_fail */
  CASE_OK(&r);
  CHECK(r.p.hellos == 0 && r.connections == 0);
  run_case(self, 5, &r); /* graph_fail */
  CASE_OK(&r);
  CHECK(r.p.hellos == 1 && (r.p.hello_flags & IPC_HELLO_GRAPH_MODE) == 0 && r.p.kernels == 1);
  printf("cupti layer checks every enable: off without kernel activity, node mode without graph trace: ok\n");
  passed++;

  run_case(self, 6, &r); /* graph */
  CASE_OK(&r);
  CHECK(r.p.hello_flags & IPC_HELLO_GRAPH_MODE);
  CHECK(r.p.graphs == 3 && r.p.kernels == 2);
  printf("cupti layer in graph mode sends graph records and says so: ok\n");
  passed++;

  run_case(self, 7, &r); /* displaced */
  CASE_OK(&r);
  CHECK(r.p.live_states_seen & IPC_LIVE_DISPLACED);
  CHECK(r.p.live_resumes == 1);
  CHECK(r.p.kernels == 10); /* 5 before, none of theirs, 5 after */
  CHECK(r.p.live_launches >= 10);
  printf("cupti layer reports another profiler taking CUPTI and takes it back: ok\n");
  passed++;

  run_case(self, 8, &r); /* fork */
  CASE_OK(&r); /* 97: the child called CUPTI; 3: it kept the socket */
  CHECK(r.connections == 1 && r.p.hellos == 1 && r.p.kernels == 3);
  printf("cupti layer in a forked child closes the socket and makes no CUPTI call: ok\n");
  passed++;

  run_case(self, 9, &r); /* exit */
  CASE_OK(&r);
  CHECK(r.p.kernels == 20);
  printf("cupti layer at exit joins the flush thread, forces a flush and sends the records in flight: ok\n");
  passed++;

  run_case(self, 10, &r); /* rate_limit */
  CASE_OK(&r);
  CHECK(r.p.hello_flags & IPC_HELLO_RATE_LIMITED);
  CHECK(r.p.kernels >= 4 && r.p.kernels < 50);
  CHECK(r.p.kernels + r.p.stat_rate_limited == 103);
  printf("cupti layer keeps only the eager launches the token bucket admits, and counts the rest: ok\n");
  passed++;

  run_case(self, 11, &r); /* busy */
  CASE_OK(&r);
  CHECK(r.connections == 0);
  printf("cupti layer backs off when CUPTI is held: ok\n");
  passed++;

  run_case(self, 12, &r); /* multisub */
  CASE_OK(&r);
  CHECK(r.p.hello_flags & IPC_HELLO_MULTI_SUB);
  CHECK((r.p.hello_flags & IPC_HELLO_GRAPH_MODE) == 0);
  CHECK(r.p.kernels == 20); /* 5 before, 10 beside the other tool, 5 after */
  CHECK((r.p.live_states_seen & IPC_LIVE_DISPLACED) == 0 && r.p.live_resumes == 0);
  CHECK(r.p.live_version == 130300);
  printf("cupti layer on CUDA 13.3 uses multi-subscriber mode: another v2 tool runs beside it, a v1 tool cannot take it: ok\n");
  passed++;

  for (int c = 13; c <= 14; c++) {
    run_case(self, c, &r); /* multisub_off, multisub_refused */
    CASE_OK(&r);
    CHECK((r.p.hello_flags & IPC_HELLO_MULTI_SUB) == 0 && r.p.kernels == 4);
  }
  printf("cupti layer on CUDA 13.3 falls back to the single-subscriber API when told to or refused: ok\n");
  passed++;

  run_case(self, 15, &r); /* multisub_held */
  CASE_OK(&r);
  CHECK(r.connections == 0);
  printf("cupti layer backs off when a tool holds CUPTI in single-subscriber v2 mode: ok\n");
  passed++;

  run_case(self, 16, &r); /* launches */
  CASE_OK(&r);
  CHECK(r.p.hello_flags & IPC_HELLO_LAUNCHES);
  CHECK(r.p.identities == 1 && r.p.identity_at_start == 1);
  CHECK(r.p.ppid == (uint32_t)getpid()); /* the case's parent is this process */
  CHECK(strcmp(r.p.instance, "inst-1") == 0 && strcmp(r.p.service, "vllm") == 0);
  CHECK(strcmp(r.p.host, "p") == 0); /* k8s.pod.name names the host */
  CHECK(r.p.launches == 7); /* 5 driver, 1 runtime (its driver call is not counted again), 1 graph */
  CHECK(r.p.last_launch_kind == IPC_LAUNCH_GRAPH && r.p.last_launch_corr == 20);
  CHECK(r.p.last_launch_time > 1600000000000000000ull); /* wall clock */
  CHECK(r.p.marks >= 1 && r.p.last_mark >= r.p.last_launch_time);
  CHECK(r.p.launches_before_kernels && r.p.kernels == 9);
  CHECK(r.p.device_frames >= 1 && r.p.last_ordinal == 2 && r.p.last_uuid[0] == 0xA2 && r.p.last_device_flags == 0);
  run_case(self, 17, &r); /* launches_mig */
  CASE_OK(&r);
  CHECK(r.p.last_device_flags == IPC_DEVICE_MIG && r.p.last_uuid[0] == 0xA2 && r.p.last_mig[0] == 0xC2);
  run_case(self, 18, &r); /* launches_off */
  CASE_OK(&r);
  CHECK((r.p.hello_flags & IPC_HELLO_LAUNCHES) == 0 && r.p.launches == 0 && r.p.kernels == 9);
  printf("cupti layer sends each launch once before its kernels, the devices' UUIDs and the engine's identity: ok\n");
  passed++;

  run_case(self, 19, &r); /* kinds */
  CASE_OK(&r);
  CHECK(r.p.kernels == 4 && r.p.records == 5 && r.p.memcpy_bytes == 0);
  run_case(self, 20, &r); /* kinds_no_kernel */
  CASE_OK(&r);
  CHECK(r.p.hellos == 1 && r.p.kernels == 0 && r.p.records == 1 && r.p.memcpy_bytes == 4096);
  run_case(self, 21, &r); /* kinds_bad */
  CASE_OK(&r);
  CHECK(r.p.kernels == 1 && r.p.records == 3 && r.p.memcpy_bytes == 4096);
  printf("cupti layer enables exactly the kinds INFERPROF_CUPTI_KINDS names, warns on a bad one and uses all: ok\n");
  passed++;

  run_case(self, 22, &r); /* duty */
  CASE_OK(&r);
  CHECK(r.p.hello_flags & IPC_HELLO_DUTY_CYCLE);
  CHECK(r.p.kernels == 10 && r.p.records == 10); /* 5 on, 0 of the 5 off, 5 on again */
  CHECK(r.p.launches == 10);                    /* no launch record in the off part */
  CHECK((r.p.live_states_seen & IPC_LIVE_DUTY_OFF) && (r.p.live_states_seen & IPC_LIVE_ENABLED));
  printf("cupti layer's duty cycle disables every kind in the off part and enables them again: ok\n");
  passed++;

  run_case(self, 23, &r); /* graph_rate */
  CASE_OK(&r);
  CHECK(r.p.hello_flags & IPC_HELLO_RATE_LIMITED);
  {
    uint64_t graph_kernels = r.p.kernels - 10, admitted = graph_kernels / 3;
    CHECK(r.p.kernels >= 10 && graph_kernels % 3 == 0);
    /* 1 token at the start, 2 a second after: 10 would take 4.5 s. */
    CHECK(admitted >= 1 && admitted <= 10);
    CHECK(r.p.stat_rate_limited == (20 - admitted) * 3);
    CHECK(r.p.launches == 10 + admitted); /* refused graph launches are not sent either */
  }
  printf("cupti layer keeps only the graph launches the graph token bucket admits, and counts the rest: ok\n");
  passed++;

  run_case(self, 24, &r); /* clock */
  CASE_OK(&r);
  CHECK(r.p.clock_frames >= 2 && r.p.clock_samples >= 2); /* sampled again, not once */
  /* A 50 ms call gives an error of >= 25 ms: every sample kept the fast one. */
  CHECK(r.p.clock_error_max > 0 && r.p.clock_error_max < 25000000ull);
  printf("cupti layer re-samples the CUPTI-to-wall clock offset and keeps the tightest triple: ok\n");
  passed++;

  run_case(self, 25, &r); /* graph_sig */
  CASE_OK(&r);
  {
    uint64_t dec = expect_sig(NODES(dec_types), dec_types, dec_funcs, 1);
    uint64_t pre = expect_sig(NODES(pre_types), pre_types, pre_funcs, 1);
    CHECK(dec != pre);
    CHECK(r.p.graph_frames == 3 && r.p.graphs == 4 && r.p.graphs_signed == 3);
    CHECK(r.p.graph_sigs[0] == dec && r.p.graph_sigs[1] == dec && r.p.graph_sigs[2] == pre);
    /* cuptiGetGraphId, cuptiGetGraphExecId: the launch of executable 3 is the
     * third graph's, not that of the second graph, whose graph id is 3. */
    CHECK(r.p.graph_ids[2][0] == 5 && r.p.graph_ids[2][1] == 3);
    CHECK(r.p.last_graph_record_sig == pre);
    CHECK(r.p.last_graph_nodes == 3 && r.p.last_graph_flags == 0);
  }
  printf("cupti layer gives each instantiated graph Graphsignal's structural signature, before its launches: ok\n");
  passed++;

  run_case(self, 26, &r); /* graph_sig_noname */
  CASE_OK(&r);
  CHECK(r.p.graph_frames == 3 && r.p.graphs_signed == 3);
  CHECK(r.p.graph_sigs[0] == expect_sig(NODES(dec_types), dec_types, dec_funcs, 0));
  CHECK(r.p.last_graph_flags == IPC_GRAPH_NAMES_MISSING);
  printf("cupti layer without cuFuncGetName signs graphs with unnamed kernels and says so: ok\n");
  passed++;

  run_case(self, 27, &r); /* graph_sig_node */
  CASE_OK(&r);
  CHECK(r.p.graph_frames == 0 && r.p.graphs == 0); /* node mode: no graph records, no callback */
  printf("cupti layer in node mode takes no graph signatures: ok\n");
  passed++;

  unlink(sock_path);
  rmdir(dir);
  printf("cupti layer against mock libcupti: %d passed, 0 failed\n", passed);
  return 0;
}
