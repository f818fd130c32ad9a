// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

/* ipc_client: the pure-C encoder and transport of the inferprof CUPTI
 * injection library. It knows nothing about CUDA: it turns activity records
 * into wire frames (docs/cupti-wire.md) and streams them over a Unix socket
 * without ever blocking the caller.
 *
 * Not thread-safe: one owner, or the caller's lock, per client. */
#ifndef INFERPROF_IPC_CLIENT_H
#define INFERPROF_IPC_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#define IPC_MAGIC 0x55435049u /* "IPCU" little-endian */
#define IPC_VERSION 1
#define IPC_HEADER_SIZE 12
#define IPC_RECORD_SIZE 48     /* version-1 records (frame type 3) */
#define IPC_RECORD2_SIZE 56    /* sized records (frame type 5) this library writes */
#define IPC_RECORDS2_PREFIX 4  /* u16 record size, u16 reserved */
#define IPC_MAX_STRING 4096
#define IPC_MAX_HOST 255

enum ipc_frame_type {
  IPC_FRAME_HELLO = 1,
  IPC_FRAME_STRING = 2,
  IPC_FRAME_RECORDS = 3,
  IPC_FRAME_STATS = 4,
  IPC_FRAME_RECORDS2 = 5, /* records with a size prefix; v1 fields first */
  IPC_FRAME_LIVENESS = 6,
  IPC_FRAME_CLOCK = 7,
  IPC_FRAME_IDENTITY = 8, /* instance id, service name, parent pid */
  IPC_FRAME_DEVICE = 9,   /* a CUDA ordinal's GPU UUID */
  IPC_FRAME_LAUNCHES = 10, /* kernel and graph launches, and marks */
  IPC_FRAME_GRAPH = 11,    /* a CUDA graph's structural signature, by graph id */
};

#define IPC_STATS_SIZE 64
#define IPC_LIVENESS_SIZE 48
#define IPC_CLOCK_SIZE 24
#define IPC_DEVICE_SIZE 40
#define IPC_LAUNCH_SIZE 24
#define IPC_GRAPH_SIZE 24
#define IPC_MAX_IDENT 255 /* bytes of instance id and of service name */
#define IPC_MAX_DEVICES 64

/* Launch kinds; a mark says every launch before its time was sent. */
#define IPC_LAUNCH_KERNEL 1
#define IPC_LAUNCH_GRAPH 2
#define IPC_LAUNCH_MARK 3
#define IPC_DOMAIN_DRIVER 1
#define IPC_DOMAIN_RUNTIME 2

#define IPC_DEVICE_MIG 0x1u /* mig holds the MIG compute instance's UUID */

#define IPC_GRAPH_NAMES_MISSING 0x1u /* a kernel node had no symbol (no cuFuncGetName) */

/* Hello flags: how the library records, so the receiver can say so. */
#define IPC_HELLO_GRAPH_MODE 0x1u   /* graph records only for kernels inside graphs */
#define IPC_HELLO_RATE_LIMITED 0x2u /* token buckets drop some kernel records */
#define IPC_HELLO_DUTY_CYCLE 0x4u   /* activity is on only part of the time */
#define IPC_HELLO_MULTI_SUB 0x8u    /* CUPTI multi-subscriber mode */
#define IPC_HELLO_LAUNCHES 0x10u    /* launch records and marks follow (frame 10) */

/* Liveness state bits. */
#define IPC_LIVE_ENABLED 0x1u   /* our activity kinds are enabled */
#define IPC_LIVE_DISPLACED 0x2u /* launches continue but no buffer reaches us */
#define IPC_LIVE_DUTY_OFF 0x4u  /* in the off part of the duty cycle */

enum ipc_record_kind {
  IPC_KIND_KERNEL = 1,
  IPC_KIND_MEMCPY = 2,
  IPC_KIND_MEMSET = 3,
  IPC_KIND_SYNC = 4,
  IPC_KIND_GRAPH = 5,
};

#define IPC_DEVICE_UNKNOWN 0xFFFFu

/* Capacity limits: memory is allocated once, in ipc_client_init. */
#define IPC_BUF_SIZE (64 * 1024)    /* one batch of frames */
#define IPC_BACKLOG (4 * 1024 * 1024) /* frames the socket did not take yet */
#define IPC_MAX_NAMES 4096          /* distinct kernel names per process */
#define IPC_NAME_ARENA (1024 * 1024) /* bytes of kernel-name storage */
#define IPC_NAME_SLOTS 8192         /* hash slots, a power of two > names */
#define IPC_PTR_CACHE 1024          /* name-pointer front cache entries */
#define IPC_MAX_GRAPHS 8192         /* graph signatures kept (Graphsignal's kMaxTrackedGraphs) */
#define IPC_GRAPH_SLOTS 32768       /* hash slots for two ids per graph, a power of two */

typedef struct ipc_record {
  uint8_t kind;
  uint8_t sub; /* memcpy kind, memory kind or sync type (CUPTI numbering) */
  uint16_t device;
  uint32_t stream;
  uint64_t start; /* Unix ns */
  uint64_t end;
  const char *name; /* kernels only; need not outlive the call */
  uint32_t correlation;
  uint64_t bytes;
  uint32_t graph_id;
  uint64_t graph_node; /* CUDA graph node id, 0 if none */
} ipc_record;

/* A kernel or graph launch as the API-entry callback saw it. time is
 * CLOCK_REALTIME, the clock engine steps are stamped with. */
typedef struct ipc_launch {
  uint8_t kind;   /* IPC_LAUNCH_* */
  uint8_t domain; /* IPC_DOMAIN_* */
  uint32_t correlation;
  uint32_t tid;
  uint64_t time; /* Unix ns */
} ipc_launch;

/* What a CUDA ordinal of this process is: the GPU's UUID
 * (cuDeviceGetUuid) and, for a MIG compute instance, its own. */
typedef struct ipc_device {
  uint16_t ordinal;
  uint16_t flags; /* IPC_DEVICE_MIG */
  uint8_t uuid[16];
  uint8_t mig[16];
} ipc_device;

/* A CUDA graph's structural signature (graph_sig.h), under the ids CUPTI
 * gives the graph and its executable: a graph launch record carries one of
 * them, which one depends on the CUDA version. */
typedef struct ipc_graph {
  uint32_t graph_id; /* cuptiGetGraphId, 0 unknown */
  uint32_t exec_id;  /* cuptiGetGraphExecId, 0 unknown */
  uint64_t signature;
  uint32_t nodes;
  uint32_t flags;    /* IPC_GRAPH_* */
  uint32_t sent_gen; /* connection generation it was last sent on */
} ipc_graph;

typedef struct ipc_stats {
  uint64_t sent_records;
  uint64_t dropped_records; /* collector absent, slow, or a send failed */
  uint64_t cupti_dropped;   /* set by the CUPTI layer */
  uint64_t names_overflow;  /* kernels reported under the overflow name */
  uint64_t connects;
  uint64_t connect_failures;
  uint64_t pool_exhausted;   /* buffer requests the pool could not serve */
  uint64_t overflow_dropped; /* records written to the overflow buffer, dropped */
  uint64_t rate_limited;     /* kernel records the token buckets dropped */
  uint64_t launches_dropped; /* launch records lost: queue full, or no collector */
  uint64_t graph_resets;     /* times the full graph table was forgotten */
} ipc_stats;

/* Liveness: what the receiver needs to tell a quiet engine from a stream
 * another profiler took over. Set by the CUPTI layer, sent with stats. */
typedef struct ipc_liveness {
  uint64_t last_buffer_unix_ns; /* last buffer CUPTI completed to us, 0 = never */
  uint64_t launches;            /* kernel and graph launches seen by our callbacks */
  uint64_t buffers_completed;
  uint32_t free_buffers, total_buffers;
  uint32_t state; /* IPC_LIVE_* */
  uint32_t resumes;
  uint32_t cupti_version; /* cuptiGetVersion */
} ipc_liveness;

/* Clock: Unix ns = CUPTI ns + offset, known to within +- error. */
typedef struct ipc_clock {
  int64_t offset_ns;
  uint64_t error_ns;
  uint64_t sampled_unix_ns; /* 0 = not sampled yet */
} ipc_clock;

typedef uint64_t (*ipc_clock_fn)(void); /* monotonic milliseconds */

typedef struct ipc_name {
  uint32_t off, len;
  uint32_t hash;
  uint32_t sent_gen; /* connection generation it was last sent on */
} ipc_name;

typedef struct ipc_client {
  char path[108];
  char host[IPC_MAX_HOST + 1];
  uint32_t pid;
  uint64_t start_unix_ns;
  int fd;
  uint32_t gen; /* bumped at each new connection */
  int hello_sent;
  uint32_t hello_flags;
  uint64_t next_connect_ms;
  uint64_t backoff_ms;
  uint64_t last_stats_ms;
  ipc_clock_fn now_ms;
  int sndbuf; /* SO_SNDBUF to request, 0 = system default */

  /* Who the process is, sent after every hello (identity frame) with the
   * devices learned so far. */
  uint32_t ppid;
  char instance[IPC_MAX_IDENT + 1];
  char service[IPC_MAX_IDENT + 1];
  ipc_device devices[IPC_MAX_DEVICES];
  uint32_t ndevices;

  /* The batch being built: whole frames; rec_hdr is the offset of the open
   * records or launches frame's header (rec_type says which), or -1. */
  uint8_t *buf;
  size_t len;
  long rec_hdr;
  uint8_t rec_type;
  uint32_t batch_records;
  /* Names first sent in this batch, to roll back when it is dropped. */
  uint16_t *batch_names;
  uint32_t batch_nnames;

  /* Frames the socket has not taken yet (whole frames, or the tail of one
   * it took partly), sent before anything new. CUPTI hands over thousands
   * of records at once; this rides out a collector that is a few tens of
   * ms behind instead of dropping. Batches are dropped only when it is full. */
  uint8_t *pending;
  size_t pending_len, pending_off;
  size_t backlog; /* bytes of backlog allowed, at most IPC_BACKLOG (the default) */

  /* Interned kernel names. ids are index+1 on the wire. */
  ipc_name *names;
  uint32_t nnames;
  char *arena;
  size_t arena_len;
  int32_t *slots; /* name index or -1 */
  const char **ptr_keys;
  uint32_t *ptr_vals;
  uint32_t overflow_id;

  /* Graph signatures, sent before the first graph record that uses one on
   * each connection. graph_slots maps an id to an index (ipc_client.c). */
  ipc_graph *graphs;
  uint32_t ngraphs;
  uint64_t *graph_slots;
  uint32_t *batch_graphs; /* first sent in this batch, to roll back when it is dropped */
  uint32_t batch_ngraphs;

  ipc_stats stats;
  ipc_liveness live;
  ipc_clock clock;
} ipc_client;

/* ipc_client_init allocates every buffer once. path is the collector's
 * socket; host may be NULL. It returns 0, or -1 when memory is short (the
 * caller then runs without profiling). It does not connect yet. */
int ipc_client_init(ipc_client *c, const char *path, uint32_t pid, const char *host,
                    uint64_t start_unix_ns, ipc_clock_fn now_ms);

/* ipc_client_add queues one record, flushing first if the batch is full.
 * When no collector is connected the record is dropped and counted. */
void ipc_client_add(ipc_client *c, const ipc_record *r);

/* ipc_client_add_launch queues one launch record (or mark); dropped and
 * counted when no collector is connected. */
void ipc_client_add_launch(ipc_client *c, const ipc_launch *l);

/* ipc_client_set_identity sets what the identity frame says; call before
 * the first flush. Strings longer than IPC_MAX_IDENT are cut. */
void ipc_client_set_identity(ipc_client *c, uint32_t ppid, const char *instance, const char *service);

/* ipc_client_add_device records a device's UUIDs and queues its frame; it
 * is sent again on every new connection. */
void ipc_client_add_device(ipc_client *c, const ipc_device *d);

/* ipc_client_add_graph records a graph's signature under its ids; its
 * frame goes out before the first graph record with one of them, on every
 * connection. When the table is full it is forgotten first, as
 * Graphsignal's is, and counted. */
void ipc_client_add_graph(ipc_client *c, const ipc_graph *g);

/* ipc_client_flush sends the batch (non-blocking), reconnecting with
 * exponential backoff when the collector is absent. */
void ipc_client_flush(ipc_client *c);

/* ipc_client_close flushes once more without waiting and frees everything. */
void ipc_client_close(ipc_client *c);

/* ipc_client_drop_fd closes the socket without sending anything: for a
 * forked child, whose copy of the connection belongs to its parent. */
void ipc_client_drop_fd(ipc_client *c);

/* ipc_client_status queues stats, liveness and clock frames now instead of
 * at the next once-a-second point (the last send at exit). */
void ipc_client_status(ipc_client *c);

/* ipc_client_connected reports whether a connection is open. */
int ipc_client_connected(const ipc_client *c);

/* ipc_monotonic_ms is the default clock. */
uint64_t ipc_monotonic_ms(void);

#endif
