// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package kineto // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto"

import "bytes"

// Category is an event's "cat", for the categories the receiver reads or
// will join on (issue 13: launches to kernels by correlation id, and
// ProfilerStep#N annotations to engine steps).
type Category uint8

// Categories, as PyTorch's profiler (pytorch/kineto libkineto/src/
// output_json.cpp and ActivityType.cpp) names them.
const (
	CatOther             Category = iota
	CatKernel                     // "kernel"
	CatMemcpy                     // "gpu_memcpy"
	CatMemset                     // "gpu_memset"
	CatSync                       // "cuda_sync"
	CatRuntime                    // "cuda_runtime": cudaLaunchKernel and friends
	CatDriver                     // "cuda_driver": cuLaunchKernel and friends
	CatUserAnnotation             // "user_annotation": record_function ranges, ProfilerStep#N
	CatGPUUserAnnotation          // "gpu_user_annotation"
)

func category(b []byte) Category {
	switch string(b) {
	case "kernel":
		return CatKernel
	case "gpu_memcpy":
		return CatMemcpy
	case "gpu_memset":
		return CatMemset
	case "cuda_sync":
		return CatSync
	case "cuda_runtime":
		return CatRuntime
	case "cuda_driver":
		return CatDriver
	case "user_annotation":
		return CatUserAnnotation
	case "gpu_user_annotation":
		return CatGPUUserAnnotation
	}
	return CatOther
}

// Categories is a set of categories.
type Categories uint32

// Has reports whether c is in the set.
func (cs Categories) Has(c Category) bool { return cs&(1<<c) != 0 }

// GPUCategories are the events that become records.
const GPUCategories = Categories(1<<CatKernel | 1<<CatMemcpy | 1<<CatMemset | 1<<CatSync)

// AllCategories are every category the decoder knows, launches and
// annotations included.
const AllCategories = GPUCategories | 1<<CatRuntime | 1<<CatDriver | 1<<CatUserAnnotation | 1<<CatGPUUserAnnotation

// Event is one trace event, holding only the fields the receiver uses.
// Name and SyncKind are valid until the next call to Next.
type Event struct {
	Phase    byte // 'X' for complete events; 0 when absent or not one byte
	Cat      Category
	Name     []byte
	TS, Dur  uint64 // ns from the trace's base time (see Decoder.Base)
	HasTS    bool
	HasDur   bool
	TSErr    error // set when ts or dur is present but not a non-negative number of µs
	Device   int64 // args.device; -1 when absent
	Stream   int64 // args.stream
	Corr     int64 // args.correlation; launches and the kernels they launched share it
	External int64 // args["External id"]: the CPU op or annotation a launch belongs to
	PID, TID int64 // pid and tid: the process and thread of a CPU event; -1 when absent or not a number
	Bytes    int64 // args.bytes
	SyncKind []byte
	catSeen  bool
}

func (e *Event) reset() {
	*e = Event{Name: e.Name[:0], SyncKind: e.SyncKind[:0], Device: -1, PID: -1, TID: -1}
}

// MemcpyKind maps "Memcpy HtoD (Pageable -> Device)" to CUPTI's memcpy kind.
func MemcpyKind(name []byte) uint8 {
	switch string(secondField(name)) {
	case "HtoD":
		return 1
	case "DtoH":
		return 2
	case "HtoA":
		return 3
	case "AtoH":
		return 4
	case "AtoA":
		return 5
	case "AtoD":
		return 6
	case "DtoA":
		return 7
	case "DtoD":
		return 8
	case "HtoH":
		return 9
	case "PtoP":
		return 10
	}
	return 0
}

// secondField is the second white-space-separated word of b, as
// bytes.Fields(b)[1] would be, without allocating.
func secondField(b []byte) []byte {
	field := 0
	for i := 0; i < len(b); {
		for i < len(b) && asciiSpace(b[i]) {
			i++
		}
		j := i
		for j < len(b) && !asciiSpace(b[j]) {
			j++
		}
		if j > i {
			if field == 1 {
				return b[i:j]
			}
			field++
		}
		i = j
	}
	return nil
}

func asciiSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// MemsetKind maps "Memset (Device)" to CUPTI's memory kind.
func MemsetKind(name []byte) uint8 {
	_, rest, ok := bytes.Cut(name, []byte("("))
	if !ok {
		return 0
	}
	switch string(bytes.TrimSuffix(rest, []byte(")"))) {
	case "Pageable":
		return 1
	case "Pinned":
		return 2
	case "Device":
		return 3
	case "Array":
		return 4
	case "Managed":
		return 5
	case "Device Static":
		return 6
	case "Managed Static":
		return 7
	}
	return 0
}

// SyncKind maps Kineto's "Stream Sync" and friends to CUPTI's sync type.
func SyncKind(s []byte) uint8 {
	switch string(s) {
	case "Event Sync":
		return 1
	case "Stream Wait Event":
		return 2
	case "Stream Sync":
		return 3
	case "Context Sync":
		return 4
	}
	return 0
}
