// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/* bench_client measures the C side's cost per record: encode plus a
 * non-blocking socket write, with a reader thread draining the other end
 * as the collector would. It prints ns/record for a few batch mixes. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../ipc_client.h"

static volatile int stop;

static void *reader(void *arg) {
  int lfd = *(int *)arg;
  int fd = accept(lfd, NULL, NULL);
  static char b[1 << 20];
  while (!stop) {
    if (read(fd, b, sizeof(b)) <= 0) break;
  }
  close(fd);
  return NULL;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 20000000;
  char dir[] = "/tmp/ipcbench.XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char path[108];
  snprintf(path, sizeof(path), "%s/b.sock", dir);
  int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  strcpy(sa.sun_path, path);
  if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1)) return 1;
  pthread_t t;
  pthread_create(&t, NULL, reader, &lfd);

  ipc_client c;
  if (ipc_client_init(&c, path, 1, "bench", 0, NULL)) return 1;
  const char *names[64];
  char store[64][80];
  for (int i = 0; i < 64; i++) {
    snprintf(store[i], sizeof(store[i]), "void vllm::kernel_family_%d<c10::BFloat16, %d>(c10::BFloat16*, int)", i, i);
    names[i] = store[i];
  }
  /* Warm up: connect and intern every name. */
  for (int i = 0; i < 4096; i++) {
    ipc_record r = {.kind = IPC_KIND_KERNEL, .start = (uint64_t)i, .end = (uint64_t)i + 1, .name = names[i % 64]};
    ipc_client_add(&c, &r);
  }
  ipc_client_flush(&c);
  c.stats.sent_records = c.stats.dropped_records = 0;

  double t0 = now_s();
  for (long i = 0; i < n; i++) {
    ipc_record r = {.kind = IPC_KIND_KERNEL, .device = (uint16_t)(i & 1), .stream = 7,
                    .start = 1700000000000000000ull + (uint64_t)i * 4000, .name = names[i & 63]};
    r.end = r.start + 3000;
    ipc_client_add(&c, &r);
  }
  ipc_client_flush(&c);
  double dt = now_s() - t0;
  printf("BenchmarkEncodeSend/impl=c\t%ld\t%.2f ns/op\t%.0f records/s\t%llu sent-records\t%llu dropped-records\n", n, dt * 1e9 / (double)n,
         (double)n / dt, (unsigned long long)c.stats.sent_records, (unsigned long long)c.stats.dropped_records);
  stop = 1;
  ipc_client_close(&c);
  pthread_join(t, NULL);
  close(lfd);
  unlink(path);
  rmdir(dir);
  return 0;
}
