// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package kineto reads PyTorch profiler (Kineto) Chrome-trace files into
// the same records the CUPTI injection library sends, so one aggregation
// serves both sources. It streams: a JSON tokenizer keeps only the fields it
// uses, records leave in batches, and memory is bounded by fixed caps, not
// by the size of the file.
package kineto // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto"

import "github.com/inferprof/inferprof/internal/cuptiwire"

// Limits bound what one file may hold in memory.
type Limits struct {
	// Batch is how many records are held before they go to the handler.
	// A file with fewer GPU events is handed over whole, at its end, with
	// baseTimeNanoseconds applied wherever it appears in the file.
	Batch int
	// Intervals bounds the busy intervals kept per file (16 bytes each);
	// past it the smallest idle gaps are merged, overstating busy time by
	// their sum (Summary.BusyOverstated).
	Intervals int
	// NameBytes bounds the kernel-name table; later new names go to the
	// overflow id 0, which the aggregator sums as "other".
	NameBytes int
	// StepEvents, when positive, turns on step figures (Summary.Steps):
	// it bounds the ProfilerStep annotations, launches and kernels kept to
	// compute them, 32 bytes each; past it the steps are marked incomplete.
	// The handler must implement StepNames.
	StepEvents int
}

// DefaultLimits keep a file's state under about 40 MiB, whatever its size:
// 128 Ki records (7 MiB), 1 Mi intervals (16 MiB), 16 MiB of names; with
// step figures, 32 MiB more for 1 Mi launches and kernels.
var DefaultLimits = Limits{Batch: 1 << 17, Intervals: 1 << 20, NameBytes: 16 << 20}

// DefaultStepEvents is the StepEvents the receiver sets when it makes
// step spans.
const DefaultStepEvents = 1 << 20

// Handler receives a trace while it is read.
type Handler interface {
	// Kernel defines a kernel name id (from 1) before any record uses it;
	// name is valid only during the call.
	Kernel(id uint32, name []byte)
	// Records hands over a batch of records, valid only during the call.
	// Times are Unix ns when absolute is true; otherwise they are relative
	// to a baseTimeNanoseconds the file gives later (only a file with more
	// than Limits.Batch GPU events in PyTorch 2.x's layout, which writes
	// the base after the events).
	Records(recs []cuptiwire.Record, absolute bool)
}

// DeviceBusy is the union of a device's kernel, memcpy and memset time.
type DeviceBusy struct {
	Device uint16
	NS     uint64
}

// Summary is what a whole file held.
type Summary struct {
	Events    uint64 // trace events read
	Records   uint64 // GPU records handed over
	Lo, Hi    uint64 // Unix ns range of the records; 0, 0 when none
	Busy      []DeviceBusy
	Overflow  uint64 // records whose kernel name went to the overflow id
	Unordered bool   // some batch left before the base time was known
	// Steps are the ProfilerStep#N annotations and the GPU work each
	// launched, with Limits.StepEvents.
	Steps []Step
	// BusyOverstated bounds the idle time merged into busy time because a
	// device had more than Limits.Intervals separate busy intervals (a
	// later record inside a merged gap makes the real error smaller).
	BusyOverstated uint64
}
