// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/* emit_frames connects to a collector socket and sends a fixed, known set
 * of records through ipc_client, then exits. The Go test in
 * internal/cuptiwire decodes what it sends and checks every field, which
 * proves that C-encoded frames decode in Go. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#include "../graph_sig.h"
#include "../ipc_client.h"

/* settle waits until the socket took every pending byte. The injection
 * library never waits; this test driver does, so that a slow reader on a
 * loaded machine sees every record rather than counted drops. */
static void settle(ipc_client *c) {
  for (int i = 0; i < 10000 && ipc_client_connected(c); i++) {
    struct pollfd p = {.fd = c->fd, .events = POLLOUT};
    int writable = poll(&p, 1, 100) > 0 && (p.revents & POLLOUT);
    if (c->pending_off < c->pending_len) {
      ipc_client_flush(c);
      continue;
    }
    if (writable) return;
  }
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: emit_frames SOCKET COUNT\n");
    return 2;
  }
  int n = atoi(argv[2]);
  ipc_client c;
  if (ipc_client_init(&c, argv[1], 4242, "emit-host", 1700000000000000000ull, NULL) != 0) return 1;
  static const char *names[] = {
      "_ZN5flash16flash_fwd_kernelI23Flash_fwd_kernel_traitsEEvNS_16Flash_fwd_paramsE",
      "void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, int)",
      "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
  };
  for (int i = 0; i < n; i++) {
    ipc_record r = {.kind = IPC_KIND_KERNEL, .device = (uint16_t)(i % 2), .stream = 7,
                    .start = 1700000000000000000ull + (uint64_t)i * 1000, .name = names[i % 3],
                    .correlation = (uint32_t)i, .graph_id = 9, .graph_node = 1000 + (uint64_t)i};
    r.end = r.start + 100 + (uint64_t)(i % 3);
    ipc_client_add(&c, &r);
    if (i % 512 == 511) { /* 24 KiB: the batch never fills up on its own */
      settle(&c);
      ipc_client_flush(&c);
    }
  }
  ipc_record m = {.kind = IPC_KIND_MEMCPY, .sub = 1, .device = 0, .start = 10, .end = 30, .bytes = 65536};
  ipc_record s = {.kind = IPC_KIND_MEMSET, .sub = 3, .device = 1, .start = 40, .end = 45, .bytes = 512};
  ipc_record y = {.kind = IPC_KIND_SYNC, .sub = 3, .device = IPC_DEVICE_UNKNOWN, .start = 50, .end = 80};
  ipc_client_add(&c, &m);
  ipc_client_add(&c, &s);
  ipc_client_add(&c, &y);
  /* A graph as a vLLM piecewise capture holds one: the Go test recomputes
   * its signature from the same nodes (CUgraphNodeType numbers, symbols). */
  static const struct {
    int type;
    const char *name;
  } nodes[] = {{0, "triton_poi_fused_add_cos_sin_0"}, {2, NULL}, {0, "k_b"}, {0, "k"},
               {0, "triton_poi_fused_add_cos_sin_0"}, {5, NULL}, {0, ""}, {13, NULL},
               {0, "_ZN5flash16flash_fwd_kernelI23Flash_fwd_kernel_traitsEEvNS_16Flash_fwd_paramsE"}, {2, NULL}};
  graph_tok toks[sizeof(nodes) / sizeof(nodes[0])];
  for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
    toks[i].type = graph_node_type_name(nodes[i].type);
    toks[i].name = nodes[i].type == 0 ? nodes[i].name : NULL;
  }
  size_t nn = sizeof(toks) / sizeof(toks[0]);
  ipc_graph g = {.graph_id = 3, .exec_id = 4, .signature = graph_sig_hash(toks, nn), .nodes = (uint32_t)nn,
                 .flags = IPC_GRAPH_NAMES_MISSING};
  ipc_client_add_graph(&c, &g);
  ipc_record gr = {.kind = IPC_KIND_GRAPH, .device = 1, .stream = 9, .start = 90, .end = 190, .correlation = 12, .graph_id = 4};
  ipc_client_add(&c, &gr);
  c.hello_flags = IPC_HELLO_GRAPH_MODE; /* already sent: the Go test sees 0 */
  c.live = (ipc_liveness){.last_buffer_unix_ns = 1700000000000000001ull, .launches = 77, .buffers_completed = 5,
                          .free_buffers = 6, .total_buffers = 8, .state = IPC_LIVE_ENABLED, .resumes = 1,
                          .cupti_version = 24};
  c.clock = (ipc_clock){.offset_ns = -42, .error_ns = 300, .sampled_unix_ns = 1700000000000000002ull};
  c.stats.pool_exhausted = 3;
  c.stats.graph_resets = 2;
  ipc_client_status(&c);
  settle(&c);
  ipc_client_flush(&c);
  settle(&c);
  int ok = c.stats.dropped_records == 0 && ipc_client_connected(&c);
  ipc_client_close(&c);
  if (!ok) {
    fprintf(stderr, "emit_frames: records were dropped\n");
    return 1;
  }
  return 0;
}
