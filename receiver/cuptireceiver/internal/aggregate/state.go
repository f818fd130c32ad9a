// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"

import (
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/kernelclass"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadata"
)

// overflowSeries is the series every kernel name lands in once MaxNames
// distinct names were registered, so memory stays bounded.
const overflowSeries = 0

// Series is the kernel name and category a raw kernel name maps to.
type series struct {
	name     string
	category string
}

type key struct {
	src    uint32
	kind   cuptiwire.RecordKind
	sub    uint8
	device uint16
	series uint32
}

type value struct {
	dur   uint64 // ns
	count uint64
	bytes uint64
}

type busyKey struct {
	src    uint32
	device uint16
}

type busyState struct {
	busy uint64 // ns of union this interval
	end  uint64 // end of the union so far, kept across flushes
}

// Aggregator holds the sums. One mutex guards everything; it is held per
// batch of records, never across a call to the next consumer.
type Aggregator struct {
	mu       sync.Mutex
	limits   Limits
	classes  *kernelclass.Table
	names    map[string]uint32 // raw kernel name → series index
	series   []series
	seriesIx map[series]uint32
	sources  map[Source]uint32
	srcList  []Source
	srcRefs  []int    // open connections or files per source
	srcLive  []bool   // false: the slot is free for reuse
	srcFree  []uint32 // free source slots
	srcSpan  []span   // Kineto sources: time range of the records since the last flush
	srcDevs  []map[uint16]DeviceID
	busyFree []int32       // free busy slots, from pruned sources
	slots    map[key]int32 // key → index in vals; cleared at each flush
	vals     []value
	epoch    uint32 // bumped at each flush, invalidating every Cache
	busyIx   map[busyKey]int32
	busyVals []busyState
	dropped  uint64 // records not aggregated: a table was full
	records  uint64
	// Graph signatures: index → the attribute value; index 0 is unknown.
	sigs        map[uint64]uint32
	sigNames    []string
	sigOverflow uint64 // graph records put in unknown because sigs was full
	mb          *metadata.MetricsBuilder
	last        pcommon.Timestamp
	ends        map[seriesKey]pcommon.Timestamp // each series' last emitted end (starts.go)
	pending     map[seriesKey]pcommon.Timestamp // the flushed interval's ends, until Commit
	top         int
	scratch     []seriesTotal
	// chosen keeps, per device, the kernel series that had their own series
	// at the last flush, so a kernel near the cut does not flip between its
	// name and "other" from one interval to the next.
	chosen map[chosenKey]map[uint32]struct{}
	// Kernel span sampling: every spanStride-th kernel record is kept, up to
	// cap(spans) per flush. spanStride 0 turns it off.
	spanStride uint64
	spanSeen   uint64
	spans      []spanRec
}

type spanRec struct {
	src    uint32
	series uint32 // kernel records: the kernel's series; graph launches: the signature's index
	rec    cuptiwire.Record
}

// span is the time range records covered; a Kineto trace is emitted over
// its own range, so a long trace read in one interval cannot report more
// busy time than the time it covers.
type span struct{ lo, hi uint64 }

type seriesTotal struct {
	series uint32
	v      value
}

// chosenKey is one device of one source.
type chosenKey struct {
	src    uint32
	device uint16
}

// seriesKey names one emitted series: resource, metric and point attributes.
type seriesKey struct {
	resource [16]byte
	metric   string
	attrs    [16]byte
}

// Cache is one connection's shortcut from a record to its slot, so the hot
// path indexes slices instead of hashing, and its table of graph ids. It is
// owned by one goroutine.
type Cache struct {
	kern   []slotRef         // by the connection's string id
	other  [3][16]slotRef    // memcpy, memset, sync by sub kind
	busy   [64]int32         // busy slot + 1 by device ordinal; 0 = not looked up yet
	graphs map[uint32]uint32 // graph id → signature index, from the connection's graph frames
}

type slotRef struct {
	epoch  uint32
	device uint16
	slot   int32
}

// NewCache returns an empty cache for one connection or file.
func NewCache() *Cache { return &Cache{} }

// New returns an empty aggregator. topKernels is how many kernel series each
// device keeps per flush; the rest is summed per category as OtherKernel.
func New(classes *kernelclass.Table, limits Limits, topKernels int, mb *metadata.MetricsBuilder, start pcommon.Timestamp) *Aggregator {
	a := &Aggregator{
		limits:   limits,
		classes:  classes,
		names:    map[string]uint32{},
		seriesIx: map[series]uint32{},
		sources:  map[Source]uint32{},
		slots:    map[key]int32{},
		busyIx:   map[busyKey]int32{},
		sigs:     map[uint64]uint32{},
		sigNames: []string{UnknownSignature},
		epoch:    1,
		mb:       mb,
		last:     start,
		top:      topKernels,
	}
	overflow := series{name: OtherKernel, category: kernelclass.CategoryOther}
	a.series = append(a.series, overflow)
	a.seriesIx[overflow] = overflowSeries
	return a
}

// deviceOrdinal is the inferprof.cuda.device.ordinal value: -1 unknown.
func deviceOrdinal(d uint16) int64 {
	if d == cuptiwire.DeviceUnknown {
		return -1
	}
	return int64(d)
}
