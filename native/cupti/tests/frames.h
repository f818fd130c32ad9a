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
  uint64_t graphs_signed; /* graph-launch records whose id a graph frame defined before them */
  uint64_t graph_frames, stat_graph_resets;
  uint32_t graph_ids[256][2]; /* graph and executable ids of the first 256 graph frames */
  uint64_t graph_sigs[256];
  uint32_t last_graph_nodes, last_graph_flags;
  uint64_t last_graph_record_sig; /* signature of the last signed graph record */
  uint32_t hello_flags;
  uint64_t stat_cupti_dropped, stat_pool_exhausted, stat_overflow_dropped, stat_rate_limited;
  uint64_t liveness_frames, live_last_buffer, live_launches, live_buffers;
  uint32_t live_free, live_total, live_state, live_resumes, live_version;
  uint32_t live_states_seen; /* OR of every liveness state */
  uint64_t clock_frames, clock_error;
  int64_t clock_offset;
  uint64_t clock_error_max;     /* the loosest error any clock frame carried */
  uint64_t clock_samples;       /* distinct samples (sampled_unix_ns) among clock frames */
  uint64_t clock_sampled_last;
  uint64_t stat_launches_dropped;
  int identities;         /* identity frames */
  int identity_at_start;  /* each identity came right after its hello */
  uint32_t ppid;
  char instance[256], service[256];
  uint64_t device_frames;
  uint16_t last_ordinal, last_device_flags;
  uint8_t last_uuid[16], last_mig[16];
  uint64_t launches, marks;
  uint32_t last_launch_corr, last_launch_tid;
  uint8_t last_launch_kind, last_launch_domain;
  uint64_t last_launch_time, last_mark;
  int last_type;          /* type of the previous frame */
  int launches_before_kernels; /* a launches frame came before the first kernel */
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
    int type = h[5];
    switch (type) {
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
        if (r[0] == IPC_KIND_GRAPH) {
          out->graphs++;
          uint32_t gid = get32(r + 40);
          uint64_t n = out->graph_frames < 256 ? out->graph_frames : 256;
          for (uint64_t g = n; g-- > 0;) /* the newest definition of an id wins */
            if (gid && (out->graph_ids[g][1] == gid || out->graph_ids[g][0] == gid)) {
              out->graphs_signed++;
              out->last_graph_record_sig = out->graph_sigs[g];
              break;
            }
        }
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
      out->stat_launches_dropped = get64(p + 48);
      out->stat_graph_resets = get64(p + 56);
      break;
    case IPC_FRAME_GRAPH:
      if (!out->hellos || len != IPC_GRAPH_SIZE) return -1;
      if (out->graph_frames < 256) {
        out->graph_ids[out->graph_frames][0] = get32(p);
        out->graph_ids[out->graph_frames][1] = get32(p + 4);
        out->graph_sigs[out->graph_frames] = get64(p + 8);
      }
      out->last_graph_nodes = get32(p + 16);
      out->last_graph_flags = get32(p + 20);
      out->graph_frames++;
      break;
    case IPC_FRAME_IDENTITY: {
      if (!out->hellos || len < 10) return -1;
      uint8_t il = p[8];
      if (len < 10u + il) return -1;
      uint8_t sl = p[9 + il];
      if (len != 10u + il + sl) return -1;
      out->identities++;
      if (out->last_type == IPC_FRAME_HELLO) out->identity_at_start++;
      out->ppid = get32(p);
      memcpy(out->instance, p + 9, il);
      out->instance[il] = 0;
      memcpy(out->service, p + 10 + il, sl);
      out->service[sl] = 0;
      break;
    }
    case IPC_FRAME_DEVICE:
      if (!out->hellos || len != IPC_DEVICE_SIZE) return -1;
      out->device_frames++;
      out->last_ordinal = get16(p);
      out->last_device_flags = get16(p + 2);
      memcpy(out->last_uuid, p + 8, 16);
      memcpy(out->last_mig, p + 24, 16);
      break;
    case IPC_FRAME_LAUNCHES: {
      if (!out->hellos || len < IPC_RECORDS2_PREFIX || get16(p) != IPC_LAUNCH_SIZE) return -1;
      if ((len - IPC_RECORDS2_PREFIX) % IPC_LAUNCH_SIZE) return -1;
      for (uint32_t i = IPC_RECORDS2_PREFIX; i < len; i += IPC_LAUNCH_SIZE) {
        const uint8_t *l = p + i;
        if (l[0] < IPC_LAUNCH_KERNEL || l[0] > IPC_LAUNCH_MARK) return -1;
        if (l[0] == IPC_LAUNCH_MARK) {
          if (get64(l + 16) < out->last_mark) return -1; /* marks never go back */
          out->marks++;
          out->last_mark = get64(l + 16);
          continue;
        }
        out->launches++;
        if (out->kernels == 0) out->launches_before_kernels = 1;
        out->last_launch_kind = l[0];
        out->last_launch_domain = l[1];
        out->last_launch_corr = get32(l + 4);
        out->last_launch_tid = get32(l + 8);
        out->last_launch_time = get64(l + 16);
      }
      break;
    }
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
      if (out->clock_error > out->clock_error_max) out->clock_error_max = out->clock_error;
      if (get64(p + 16) != out->clock_sampled_last) out->clock_samples++;
      out->clock_sampled_last = get64(p + 16);
      break;
    default:
      return -1;
    }
    out->last_type = type;
    off += IPC_HEADER_SIZE + len;
  }
  out->consumed = off;
  return 0;
}

#endif
