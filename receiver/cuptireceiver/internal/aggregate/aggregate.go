// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package aggregate sums CUDA activity records per source, device and kernel
// series (CUDA graph signature for graph launches) between flushes, without
// allocating per record.
package aggregate // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"

// OtherKernel is the series name of kernels past top_kernels.
const OtherKernel = "other"

// UnknownSignature is the graph signature of graph records whose graph id
// no graph frame named, and of signatures past MaxSignatures.
const UnknownSignature = "unknown"

// Limits keep the tables bounded whatever the engines send.
type Limits struct {
	MaxNames      int // distinct raw kernel names
	MaxSources    int // distinct (source kind, host, pid)
	MaxKeys       int // aggregation keys between two flushes
	MaxSignatures int // distinct CUDA graph signatures
}

// DefaultLimits fit thousands of kernels on tens of workers. A graph
// signature is structural (shape-independent), so an engine's thousands of
// captured graphs share a few dozen; 1024 leaves room for several models.
var DefaultLimits = Limits{MaxNames: 16384, MaxSources: 1024, MaxKeys: 1 << 18, MaxSignatures: 1024}

// SourceKind tells the socket from trace files.
type SourceKind uint8

// Source kinds.
const (
	SourceKindCUPTI SourceKind = iota
	SourceKindKineto
)

// Source names where records came from; it becomes the resource.
type Source struct {
	Kind     SourceKind
	Host     string
	PID      uint32
	Flags    uint32 // cuptiwire.Hello* flags of the library's hello
	Instance string // service.instance.id, from the library's identity frame
	Service  string // service.name, from the same
}

// DeviceID is what the library told of a CUDA ordinal: the GPU's UUID and,
// for a MIG compute instance, its MIG UUID (both as nvidia-smi prints them).
type DeviceID struct {
	UUID string
	MIG  string
}
