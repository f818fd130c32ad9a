// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package stepwire decodes engine step records, the wire format the Python
// hook (integrations/python/inferprof_hook/wire.py) writes once per scheduler
// step, and the shared-memory ring that carries them (ring.go). The format
// is specified in docs/step-wire.md.
package stepwire // import "github.com/inferprof/inferprof/internal/stepwire"

import (
	"errors"
	"strconv"
)

// Version is the wire format version the hook sends and Encode writes by
// default. Decode also reads every older version down to MinVersion, so a
// collector upgraded before its engines keeps their steps.
const Version = 4

// MinVersion is the oldest wire format version Decode reads.
const MinVersion = 1

// Header sizes per version: version 2 added hook_evicted_ids and n_resumed;
// version 3 has version 2's header and a fourth identity string; version 4
// adds the batch number and the count of launch windows.
const (
	HeaderSizeV1 = 72
	HeaderSizeV2 = 78
	HeaderSizeV3 = HeaderSizeV2
	HeaderSizeV4 = 88
)

// HeaderSize is the size of the current version's fixed header in bytes.
const HeaderSize = HeaderSizeV4

// WindowSize is the size of one launch window on the wire (version 4).
const WindowSize = 20

// MaxWindows bounds the launch windows of one step; the hook sends at most
// a handful (vLLM: one, from the batch's schedule() to the next schedule()
// or update; SGLang: preparation, launch, delayed sampling, result
// processing, and the forward thread's iteration in older releases).
const MaxWindows = 16

// MaxDatagram bounds a datagram; the hook never sends more than 200 KiB.
const MaxDatagram = 256 << 10

var magic = [4]byte{'I', 'P', 'S', 'T'}

// Header flags.
const (
	FlagIDsTruncated uint16 = 1 << 0 // the hook left out request ids to stay under its size limit
	FlagKVUsage      uint16 = 1 << 1 // KVUsage holds a value
	FlagDegraded     uint16 = 1 << 2 // version 2: the engine lacked something the hook reads; see the engine's log
)

// layout is what distinguishes one wire version from another.
type layout struct {
	header     int    // fixed header size
	flags      uint16 // flags the version defines
	evictedIDs bool   // header carries hook_evicted_ids
	resumed    bool   // header carries n_resumed; resumed ids follow preempted ids
	instanceID bool   // the identity block ends with service.instance.id
	windows    bool   // header carries the batch number and n_windows; windows follow the resumed ids
}

var layouts = [Version + 1]layout{
	1: {header: HeaderSizeV1, flags: FlagIDsTruncated | FlagKVUsage},
	2: {header: HeaderSizeV2, flags: FlagIDsTruncated | FlagKVUsage | FlagDegraded, evictedIDs: true, resumed: true},
	3: {header: HeaderSizeV3, flags: FlagIDsTruncated | FlagKVUsage | FlagDegraded, evictedIDs: true, resumed: true, instanceID: true},
	4: {header: HeaderSizeV4, flags: FlagIDsTruncated | FlagKVUsage | FlagDegraded, evictedIDs: true, resumed: true, instanceID: true, windows: true},
}

// Engine names the engine that sent a step.
type Engine uint8

// Engines.
const (
	EngineUnknown Engine = 0
	EngineVLLM    Engine = 1
	EngineSGLang  Engine = 2
)

// String returns the engine's name as used in gen_ai.provider.name.
func (e Engine) String() string {
	switch e {
	case EngineVLLM:
		return "vllm"
	case EngineSGLang:
		return "sglang"
	default:
		return "unknown"
	}
}

// Errors returned by Decode; every one means the datagram is dropped.
var (
	ErrShort     = errors.New("datagram shorter than its contents")
	ErrMagic     = errors.New("not an engine step datagram (bad magic)")
	ErrVersion   = errors.New("unsupported wire format version")
	ErrTrailing  = errors.New("trailing bytes after the last field")
	ErrFlags     = errors.New("unknown flags")
	ErrTimes     = errors.New("step ends before it starts")
	ErrKVUsage   = errors.New("kv cache usage outside 0..1")
	ErrUTF8      = errors.New("string is not valid UTF-8")
	ErrTooLarge  = errors.New("datagram larger than the maximum")
	ErrZeroIndex = errors.New("step index 0 (steps count from 1)")
	ErrWindows   = errors.New("more launch windows than allowed")
	ErrWindow    = errors.New("launch window ends before it starts")
)

// Step is one decoded scheduler step. Decode reuses its slices.
type Step struct {
	// Version is the wire format version the step came in (Encode writes
	// it; zero means Version).
	Version     uint8
	Engine      Engine
	Flags       uint16
	PID         uint32
	EngineIndex uint32 // data-parallel rank of the engine in its server
	Index       uint64 // step number in its process, from 1
	StartUnixNs int64
	EndUnixNs   int64

	PrefillRequests uint32
	DecodeRequests  uint32
	ScheduledTokens uint32
	Running         uint32
	Waiting         uint32
	KVUsage         float32 // fraction 0..1, meaningful when Flags has FlagKVUsage
	HookDropped     uint32  // datagrams the hook process dropped before this one
	// HookEvictedIDs counts request ids the hook process evicted from its
	// id table at its limit (version 2; running count). Such a request may
	// be reported under the engine's internal id.
	HookEvictedIDs uint32

	ServiceName   string
	EngineVersion string
	Host          string
	// InstanceID is the service.instance.id the engine process found in
	// OTEL_RESOURCE_ATTRIBUTES (version 3; inferprof-run sets it), the
	// same as the engine's request spans carry. Empty without one.
	InstanceID string

	// RequestIDs got RequestTokens[i] tokens each in this step.
	RequestIDs    []string
	RequestTokens []int64
	Preempted     []string
	// Resumed lists requests that came back from preemption in this step
	// (version 2).
	Resumed []string

	// Batch numbers the step's batch among the batches its engine handed
	// the model executor, from 1 (version 4; 0 when the hook could not
	// count them). The engine's executor workers count the same calls, so
	// their launch marks (Mark) name the same number.
	Batch uint64
	// Windows are the intervals in which the engine process launched the
	// batch's GPU work (version 4, on the wire right after the identity;
	// empty when the hook could not see the launching calls): vLLM's
	// execute_model and sample_tokens, from the batch's schedule() call to
	// the next schedule() or update end; SGLang's preparation, run_batch
	// and delayed sampling of the batch and the processing of its result.
	// Under async scheduling they are not the step's time range: the next
	// batch launches inside that range.
	Windows []Window
}

// Window is one interval of a batch's launches, on one thread.
type Window struct {
	StartUnixNs, EndUnixNs int64
	// ThreadID is the Linux thread id (gettid) that ran the launching call;
	// 0 when any thread counts.
	ThreadID uint32
}

// FallbackInstanceID is the service.instance.id of a step whose hook found
// none in OTEL_RESOURCE_ATTRIBUTES: "host/pid/engine_index". It names the
// engine process, not the server whose request spans the step serves, so
// the step window does not key on it (see internal/stepwindow).
func FallbackInstanceID(host string, pid, engineIndex uint32) string {
	return host + "/" + strconv.FormatUint(uint64(pid), 10) + "/" + strconv.FormatUint(uint64(engineIndex), 10)
}

// KVUsageKnown reports whether the hook could read the KV cache usage.
func (s *Step) KVUsageKnown() bool { return s.Flags&FlagKVUsage != 0 }

// IDsTruncated reports whether the hook left out request ids.
func (s *Step) IDsTruncated() bool { return s.Flags&FlagIDsTruncated != 0 }

// Degraded reports whether the hook found the engine lacking something it
// reads, so some fields are estimates or absent.
func (s *Step) Degraded() bool { return s.Flags&FlagDegraded != 0 }
