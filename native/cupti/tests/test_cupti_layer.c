/* Tests the CUPTI layer (cupti_inject.c) against the mock libcupti in
 * mock_cupti.c: InitializeInjection registers callbacks and enables the
 * activity kinds; records the mock replays reach a real collector socket
 * as valid frames; a busy CUPTI (another subscriber) makes it back off. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cupti_activity.h>

#include "frames.h"

int InitializeInjection(void);
int mock_enabled(int kind);
int mock_subscribed(void);
int mock_flushes(void);
int mock_emit_kernel(const char *name, uint64_t start, uint64_t end, uint32_t device, uint32_t ctx, uint32_t graph);
int mock_emit_memcpy(uint64_t start, uint64_t end, uint32_t device, uint64_t bytes);
int mock_emit_sync(uint64_t start, uint64_t end, uint32_t ctx);

#define CHECK(cond)                                                                               \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      fprintf(stderr, "%s:%d: %s: check failed: %s\n", __FILE__, __LINE__, __func__, #cond);      \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)

static int busy_case(void) {
  setenv("MOCK_CUPTI_BUSY", "1", 1);
  CHECK(InitializeInjection() == 0);
  CHECK(!mock_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CHECK(!mock_subscribed());
  printf("cupti layer backs off when CUPTI is held: ok\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "busy") == 0) return busy_case();

  char dir[] = "/tmp/cuptilayer.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[108];
  snprintf(path, sizeof(path), "%s/c.sock", dir);
  int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  strcpy(sa.sun_path, path);
  CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(lfd, 4) == 0);
  setenv("INFERPROF_CUPTI_ENDPOINT", path, 1);
  setenv("INFERPROF_CUPTI_FLUSH_MS", "10", 1);
  setenv("INFERPROF_CUPTI_BUFFERS", "not-a-number", 1); /* warns, uses the default */

  CHECK(InitializeInjection() == 1);
  CHECK(InitializeInjection() == 1); /* idempotent */
  CHECK(mock_subscribed());
  CHECK(mock_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CHECK(mock_enabled(CUPTI_ACTIVITY_KIND_MEMCPY));
  CHECK(mock_enabled(CUPTI_ACTIVITY_KIND_MEMSET));
  CHECK(mock_enabled(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
  CHECK(!mock_enabled(CUPTI_ACTIVITY_KIND_GRAPH_TRACE)); /* node mode by default */

  /* CUPTI's clock read 1 ms at init; records are shifted to Unix time. */
  const uint64_t t0 = 2000000;
  for (int i = 0; i < 100; i++) {
    const char *name = i % 2 ? "_ZN4vllm15rms_norm_kernelEv" : "ampere_sgemm_128x64_tn";
    CHECK(mock_emit_kernel(name, t0 + (uint64_t)i * 1000, t0 + (uint64_t)i * 1000 + 500, 3, 42, 9));
  }
  CHECK(mock_emit_kernel("incomplete", 0, 0, 3, 42, 0)); /* skipped: no timestamps */
  CHECK(mock_emit_memcpy(t0, t0 + 100, 3, 4096));
  CHECK(mock_emit_sync(t0 + 200, t0 + 300, 42)); /* context 42 is on device 3 */

  int fd = accept(lfd, NULL, NULL);
  CHECK(fd >= 0);
  uint8_t *buf = malloc(1 << 20);
  size_t n = 0;
  parsed *p = calloc(1, sizeof(parsed));
  for (int tries = 0; tries < 500; tries++) {
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    if (poll(&pf, 1, 20) > 0) {
      ssize_t r = read(fd, buf + n, (1 << 20) - n);
      CHECK(r > 0);
      n += (size_t)r;
    }
    memset(p, 0, sizeof(*p));
    CHECK(parse_frames(buf, n, p) == 0);
    if (p->records == 102) break;
  }
  CHECK(p->hellos == 1 && p->pid == (uint32_t)getpid());
  CHECK(p->records == 102 && p->kernels == 100);
  CHECK(p->strings == 2);
  CHECK(p->graph_id == 9);
  CHECK(p->sync_device == 3);
  CHECK(p->memcpy_sub == 1 && p->memcpy_bytes == 4096);
  CHECK(p->first_start > 1600000000000000000ull); /* Unix ns, after 2020 */
  CHECK(mock_flushes() > 0);
  free(p);
  free(buf);
  close(fd);
  close(lfd);
  unlink(path);
  rmdir(dir);
  printf("cupti layer against mock libcupti: ok\n");

  /* A second process: CUPTI is held by another subscriber. */
  pid_t child = fork();
  if (child == 0) {
    execl("/proc/self/exe", argv[0], "busy", (char *)NULL);
    _exit(127);
  }
  int status = 0;
  CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return 0;
}
