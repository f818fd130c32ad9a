// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/* A minimal checking reader of the wire format for the C tests: it walks a
 * byte stream frame by frame and fails on anything docs/cupti-wire.md
 * forbids. The Go decoder (internal/cuptiwire) is the real one. */
#ifndef INFERPROF_TEST_FRAMES_H
#define INFERPROF_TEST_FRAMES_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../ipc_client.h"

typedef struct parsed {
  int hellos;
  uint32_t pid;
  char host[256];
  uint32_t strings;
  uint64_t records;
  uint64_t kernels;
  uint64_t stats_frames;
  uint64_t stat_dropped;
  uint64_t first_start, last_end;
  uint16_t sync_device;   /* device of the last sync record */
  uint8_t memcpy_sub;     /* kind of the last memcpy */
  uint64_t memcpy_bytes;  /* bytes of all memcpys */
  uint32_t graph_id;      /* graph id of the last kernel */
  uint64_t graph_node;    /* graph node id of the last kernel */
  uint64_t graphs;        /* graph-launch records */
  uint32_t hello_flags;
  uint64_t stat_cupti_dropped, stat_pool_exhausted, stat_overflow_dropped, stat_rate_limited;
  uint64_t liveness_frames, live_last_buffer, live_launches, live_buffers;
  uint32_t live_free, live_total, live_state, live_resumes, live_version;
  uint32_t live_states_seen; /* OR of every liveness state */
  uint64_t clock_frames, clock_error;
  int64_t clock_offset;
  uint8_t defined[65536];
  uint32_t name_defs[65536]; /* times each id was defined */
  char last_name[IPC_MAX_STRING + 1];
  size_t consumed; /* bytes forming whole frames */
} parsed;

static uint32_t get32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* parse_frames returns 0 when every whole frame in b is valid. */
static int parse_frames(const uint8_t *b, size_t n, parsed *out) {
  size_t off = 0;
  while (n - off >= IPC_HEADER_SIZE) {
    const uint8_t *h = b + off;
    if (get32(h) != IPC_MAGIC || h[4] != IPC_VERSION) {
      fprintf(stderr, "bad magic/version at %zu\n", off);
      return -1;
    }
    uint32_t len = get32(h + 8);
    if (len > (1u << 20)) return -1;
    if (n - off - IPC_HEADER_SIZE < len) break;
    const uint8_t *p = h + IPC_HEADER_SIZE;
    switch (h[5]) {
    case IPC_FRAME_HELLO: {
      out->hellos++;
      out->pid = get32(p);
      out->hello_flags = get32(p + 4);
      uint16_t hl = get16(p + 16);
      if (18u + hl != len) return -1;
      memcpy(out->host, p + 18, hl);
      out->host[hl] = 0;
      break;
    }
    case IPC_FRAME_STRING: {
      if (!out->hellos) return -1;
      uint32_t id = get32(p);
      uint16_t sl = get16(p + 4);
      if (id == 0 || id >= 65536 || 6u + sl != len) return -1;
      out->defined[id] = 1;
      out->name_defs[id]++;
      out->strings++;
      memcpy(out->last_name, p + 6, sl);
      out->last_name[sl] = 0;
      break;
    }
    case IPC_FRAME_RECORDS:
    case IPC_FRAME_RECORDS2: {
      if (!out->hellos) return -1;
      uint32_t rs = IPC_RECORD_SIZE, pre = 0;
      if (h[5] == IPC_FRAME_RECORDS2) {
        if (len < IPC_RECORDS2_PREFIX) return -1;
        rs = get16(p);
        pre = IPC_RECORDS2_PREFIX;
        if (rs < IPC_RECORD_SIZE || rs % 8) return -1;
      }
      if ((len - pre) % rs) return -1;
      for (uint32_t i = pre; i < len; i += rs) {
        const uint8_t *r = p + i;
        uint64_t s = get64(r + 8), e = get64(r + 16);
        if (r[0] < 1 || r[0] > 5 || e < s) return -1;
        if (r[0] == IPC_KIND_KERNEL) {
          uint32_t id = get32(r + 24);
          if (id >= 65536 || !out->defined[id]) {
            fprintf(stderr, "kernel name id %u undefined\n", id);
            return -1;
          }
          out->kernels++;
          out->graph_id = get32(r + 40);
          if (rs >= 56) out->graph_node = get64(r + 48);
        }
        if (r[0] == IPC_KIND_GRAPH) out->graphs++;
        if (r[0] == IPC_KIND_SYNC) out->sync_device = get16(r + 2);
        if (r[0] == IPC_KIND_MEMCPY) {
          out->memcpy_sub = r[1];
          out->memcpy_bytes += get64(r + 32);
        }
        if (!out->first_start) out->first_start = s;
        out->last_end = e;
        out->records++;
      }
      break;
    }
    case IPC_FRAME_STATS:
      if (len != IPC_STATS_SIZE) return -1;
      out->stats_frames++;
      out->stat_dropped = get64(p);
      out->stat_cupti_dropped = get64(p + 8);
      out->stat_pool_exhausted = get64(p + 24);
      out->stat_overflow_dropped = get64(p + 32);
      out->stat_rate_limited = get64(p + 40);
      break;
    case IPC_FRAME_LIVENESS:
      if (len != IPC_LIVENESS_SIZE) return -1;
      out->liveness_frames++;
      out->live_last_buffer = get64(p);
      out->live_launches = get64(p + 8);
      out->live_buffers = get64(p + 16);
      out->live_free = get32(p + 24);
      out->live_total = get32(p + 28);
      out->live_state = get32(p + 32);
      out->live_states_seen |= out->live_state;
      out->live_resumes = get32(p + 36);
      out->live_version = get32(p + 40);
      break;
    case IPC_FRAME_CLOCK:
      if (len != IPC_CLOCK_SIZE) return -1;
      out->clock_frames++;
      out->clock_offset = (int64_t)get64(p);
      out->clock_error = get64(p + 8);
      break;
    default:
      return -1;
    }
    off += IPC_HEADER_SIZE + len;
  }
  out->consumed = off;
  return 0;
}

#endif
