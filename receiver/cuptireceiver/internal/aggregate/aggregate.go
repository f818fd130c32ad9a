// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package aggregate sums CUDA activity records per source, device and kernel
// series (CUDA graph signature for graph launches) between flushes, without
// allocating per record.
package aggregate // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"

import (
	"cmp"
	"maps"
	"slices"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/kernelclass"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadata"
)

// scopeName is the instrumentation scope of kernel spans.
const scopeName = "github.com/inferprof/inferprof/receiver/cuptireceiver"

// OtherKernel is the series name of kernels past top_kernels.
const OtherKernel = "other"

// overflowSeries is the series every kernel name lands in once MaxNames
// distinct names were registered, so memory stays bounded.
const overflowSeries = 0

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

// Source returns the index of src, registering it, and holds it until
// Release; ok is false when the source table is full. A source no one holds
// is forgotten at the flush after its last data, so engines that restart
// (new pids) do not fill the table.
func (a *Aggregator) Source(src Source) (idx uint32, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if i, found := a.sources[src]; found {
		a.srcRefs[i]++
		return i, true
	}
	var i uint32
	switch {
	case len(a.srcFree) > 0:
		i = a.srcFree[len(a.srcFree)-1]
		a.srcFree = a.srcFree[:len(a.srcFree)-1]
		a.srcList[i], a.srcRefs[i], a.srcLive[i], a.srcSpan[i], a.srcDevs[i] = src, 1, true, span{}, nil
	case len(a.srcList) < a.limits.MaxSources:
		i = uint32(len(a.srcList))
		a.srcList = append(a.srcList, src)
		a.srcRefs = append(a.srcRefs, 1)
		a.srcLive = append(a.srcLive, true)
		a.srcSpan = append(a.srcSpan, span{})
		a.srcDevs = append(a.srcDevs, nil)
	default:
		return 0, false
	}
	a.sources[src] = i
	return i, true
}

// Release drops one hold on a source taken with Source.
func (a *Aggregator) Release(idx uint32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if int(idx) < len(a.srcRefs) && a.srcRefs[idx] > 0 {
		a.srcRefs[idx]--
	}
}

// SetDevice records what the library told of a device ordinal of src.
func (a *Aggregator) SetDevice(src uint32, ordinal uint16, id DeviceID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if int(src) >= len(a.srcDevs) {
		return
	}
	if a.srcDevs[src] == nil {
		a.srcDevs[src] = map[uint16]DeviceID{}
	}
	if len(a.srcDevs[src]) < maxDevices {
		a.srcDevs[src][ordinal] = id
	}
}

// maxDevices bounds the devices a source may name; a process sees at most a
// few dozen GPUs.
const maxDevices = 1024

// KernelName returns the shortened name of a kernel series.
func (a *Aggregator) KernelName(series uint32) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if int(series) < len(a.series) {
		return a.series[series].name
	}
	return OtherKernel
}

// Category returns the category of a kernel series.
func (a *Aggregator) Category(series uint32) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if int(series) < len(a.series) {
		return a.series[series].category
	}
	return kernelclass.CategoryOther
}

// Sources returns how many sources are registered.
func (a *Aggregator) Sources() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.sources)
}

// prune forgets sources no one holds; called at the end of a flush, when
// their data has been emitted.
func (a *Aggregator) prune() {
	for i, live := range a.srcLive {
		if !live || a.srcRefs[i] > 0 {
			continue
		}
		src := uint32(i)
		delete(a.sources, a.srcList[i])
		a.srcLive[i] = false
		for k := range a.chosen {
			if k.src == src {
				delete(a.chosen, k)
			}
		}
		a.srcFree = append(a.srcFree, src)
		for k, b := range a.busyIx {
			if k.src == src {
				delete(a.busyIx, k)
				a.busyVals[b] = busyState{}
				a.busyFree = append(a.busyFree, b)
			}
		}
	}
}

// Kernel returns the series index of a raw kernel name, classifying and
// shortening it the first time it is seen. Past MaxNames every new name maps
// to the overflow series ("other"/"other").
func (a *Aggregator) Kernel(raw []byte) uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if i, ok := a.names[string(raw)]; ok {
		return i
	}
	if len(a.names) >= a.limits.MaxNames {
		return overflowSeries
	}
	name := string(raw)
	s := series{name: kernelclass.Shorten(name), category: a.classes.Classify(name)}
	i, ok := a.seriesIx[s]
	if !ok {
		i = uint32(len(a.series))
		a.series = append(a.series, s)
		a.seriesIx[s] = i
	}
	a.names[name] = i
	return i
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

// Add aggregates a batch of records from source src. kernels maps a record's
// Name (a per-connection string id) to a series index from Kernel; ids it
// does not cover fall into the overflow series. It returns how many records
// were dropped because the key table was full.
func (a *Aggregator) Add(src uint32, recs []cuptiwire.Record, kernels []uint32, c *Cache) (dropped int) {
	return a.add(src, recs, kernels, c, true, true)
}

// AddTrace aggregates records of a Kineto trace. A trace is read in
// batches in no particular time order, so its busy time and time range
// come from the reader (AddTraceRange, AddBusy), not from the records;
// spans are sampled only from records with Unix times (absolute).
func (a *Aggregator) AddTrace(src uint32, recs []cuptiwire.Record, kernels []uint32, c *Cache, absolute bool) (dropped int) {
	return a.add(src, recs, kernels, c, false, absolute)
}

// AddTraceRange extends the time range the source's points span this
// interval with a trace's [lo, hi), in Unix ns.
func (a *Aggregator) AddTraceRange(src uint32, lo, hi uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if int(src) >= len(a.srcSpan) || hi <= lo {
		return
	}
	sp := &a.srcSpan[src]
	if sp.lo == 0 || lo < sp.lo {
		sp.lo = lo
	}
	sp.hi = max(sp.hi, hi)
}

// AddBusy adds a device's busy time, computed elsewhere, to the interval.
func (a *Aggregator) AddBusy(src uint32, device uint16, ns uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ns > 0 {
		a.busyVals[a.busySlot(busyKey{src: src, device: device})].busy += ns
	}
}

func (a *Aggregator) add(src uint32, recs []cuptiwire.Record, kernels []uint32, c *Cache, sweep, spans bool) (dropped int) {
	if len(c.kern) < len(kernels) {
		c.kern = append(c.kern, make([]slotRef, len(kernels)-len(c.kern))...)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range recs {
		r := &recs[i]
		var ref *slotRef
		switch {
		case r.Kind == cuptiwire.RecordKindKernel:
			if int(r.Name) < len(c.kern) {
				ref = &c.kern[r.Name]
			}
		case r.Kind >= cuptiwire.RecordKindMemcpy && r.Kind <= cuptiwire.RecordKindSync && r.Sub < 16:
			ref = &c.other[r.Kind-cuptiwire.RecordKindMemcpy][r.Sub]
		}
		var slot int32
		if ref != nil && ref.epoch == a.epoch && ref.device == r.Device {
			slot = ref.slot
		} else {
			var ok bool
			if slot, ok = a.slot(src, r, kernels, c); !ok {
				dropped++
				continue
			}
			if ref != nil {
				*ref = slotRef{epoch: a.epoch, device: r.Device, slot: slot}
			}
		}
		v := &a.vals[slot]
		v.dur += r.End - r.Start
		v.count++
		v.bytes += r.Bytes
		if spans && a.spanStride > 0 && (r.Kind == cuptiwire.RecordKindKernel || r.Kind == cuptiwire.RecordKindGraph) {
			a.sampleSpan(src, r, kernels, c)
		}
		if sweep && r.Kind != cuptiwire.RecordKindSync && r.Device != cuptiwire.DeviceUnknown {
			var b int32
			if int(r.Device) < len(c.busy) && c.busy[r.Device] > 0 {
				b = c.busy[r.Device] - 1
			} else {
				b = a.busySlot(busyKey{src: src, device: r.Device})
				if int(r.Device) < len(c.busy) {
					c.busy[r.Device] = b + 1
				}
			}
			a.busyVals[b].sweep(r.Start, r.End)
		}
	}
	a.records += uint64(len(recs) - dropped)
	a.dropped += uint64(dropped)
	return dropped
}

// slot finds or makes the slot of a record's key.
func (a *Aggregator) slot(src uint32, r *cuptiwire.Record, kernels []uint32, c *Cache) (int32, bool) {
	k := key{src: src, kind: r.Kind, device: r.Device}
	refused := false
	switch r.Kind {
	case cuptiwire.RecordKindKernel:
		if int(r.Name) < len(kernels) {
			k.series = kernels[r.Name]
		}
	case cuptiwire.RecordKindMemcpy, cuptiwire.RecordKindMemset, cuptiwire.RecordKindSync:
		k.sub = r.Sub
	case cuptiwire.RecordKindGraph:
		// One record per graph launch, so graph records skip the slot
		// cache and look their graph id up here: a missing id is unknown.
		k.series, refused = c.graphSignature(r.GraphID)
	}
	s, ok := a.slots[k]
	if !ok {
		if len(a.vals) >= a.limits.MaxKeys {
			return 0, false
		}
		s = int32(len(a.vals))
		a.vals = append(a.vals, value{})
		a.slots[k] = s
	}
	if refused {
		a.sigOverflow++
	}
	return s, true
}

// busySlot finds or makes a device's busy state; these live across flushes
// because the union's end carries over.
func (a *Aggregator) busySlot(k busyKey) int32 {
	if s, ok := a.busyIx[k]; ok {
		return s
	}
	if n := len(a.busyFree); n > 0 {
		s := a.busyFree[n-1]
		a.busyFree = a.busyFree[:n-1]
		a.busyIx[k] = s
		return s
	}
	s := int32(len(a.busyVals))
	a.busyVals = append(a.busyVals, busyState{})
	a.busyIx[k] = s
	return s
}

// sweep adds [start, end) to the device's busy union. It is exact when
// records arrive in start order per device, which CUPTI buffers nearly give;
// an out-of-order record that lies wholly before the union's end adds
// nothing. (Kineto traces bring their own union: AddBusy.)
func (s *busyState) sweep(start, end uint64) {
	switch {
	case start >= s.end:
		s.busy += end - start
		s.end = end
	case end > s.end:
		s.busy += end - s.end
		s.end = end
	}
}

// Stats returns the records aggregated and dropped since New.
func (a *Aggregator) Stats() (records, dropped uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.records, a.dropped
}

// Flush emits everything summed since the last flush as delta metrics
// ending at now, and resets the sums. It returns empty metrics when nothing
// arrived.
func (a *Aggregator) Flush(now pcommon.Timestamp) pmetric.Metrics {
	md, tx := a.FlushTx(now)
	a.Commit(tx)
	return md
}

// Tx is one flushed interval until the next consumer took it (Commit) or
// refused it with a retryable error (Restore). It holds the interval's raw
// sums, not the emitted pdata, so a restored interval is merged into the
// next one and emitted once, with the next interval's top_kernels choice.
type Tx struct {
	start   pcommon.Timestamp // the interval's start
	keys    []key
	vals    []value                           // by keys' index
	busy    []uint64                          // by busy slot
	srcSpan []span                            // by source
	chosen  map[chosenKey]map[uint32]struct{} // top_kernels choice before the flush
	ends    map[seriesKey]pcommon.Timestamp   // the emitted series' ends, kept at Commit
	now     pcommon.Timestamp
	hasData bool
}

// FlushTx is Flush with the interval held in a Tx: the caller passes the
// metrics on outside the lock, then calls Commit or Restore exactly once,
// before the next FlushTx. Sources released meanwhile are forgotten only at
// Commit, so a restored interval keeps its resources.
func (a *Aggregator) FlushTx(now pcommon.Timestamp) (pmetric.Metrics, *Tx) {
	a.mu.Lock()
	defer a.mu.Unlock()
	tx := &Tx{start: a.last, now: now}
	a.mb.Reset(metadata.WithStartTime(a.last))
	a.last = now
	if len(a.vals) == 0 && len(a.busyIx) == 0 {
		return pmetric.NewMetrics(), tx
	}
	keys := make([]key, 0, len(a.slots))
	for k := range a.slots {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y key) int {
		return cmp.Or(cmp.Compare(x.src, y.src), cmp.Compare(x.device, y.device),
			cmp.Compare(x.kind, y.kind), cmp.Compare(x.sub, y.sub), cmp.Compare(x.series, y.series))
	})
	srcs := map[uint32]struct{}{}
	for k, i := range a.busyIx {
		if a.busyVals[i].busy > 0 {
			srcs[k.src] = struct{}{}
		}
	}
	for _, k := range keys {
		srcs[k.src] = struct{}{}
	}
	order := make([]uint32, 0, len(srcs))
	for s := range srcs {
		order = append(order, s)
	}
	slices.Sort(order)
	tx.chosen = maps.Clone(a.chosen)
	for _, src := range order {
		start, ts := tx.start, now
		if sp := a.srcSpan[src]; a.srcList[src].Kind == SourceKindKineto && sp.hi > sp.lo {
			start, ts = pcommon.Timestamp(sp.lo), pcommon.Timestamp(sp.hi)
		}
		a.emitSource(start, ts, src, keys)
	}
	tx.keys, tx.vals = keys, make([]value, len(keys))
	for i, k := range keys {
		tx.vals[i] = a.vals[a.slots[k]]
	}
	tx.srcSpan = slices.Clone(a.srcSpan)
	clear(a.srcSpan)
	tx.busy = make([]uint64, len(a.busyVals))
	for i := range a.busyVals {
		tx.busy[i] = a.busyVals[i].busy
		a.busyVals[i].busy = 0
	}
	tx.hasData = true
	clear(a.slots)
	a.vals = a.vals[:0]
	a.epoch++
	md := a.mb.Emit()
	tx.ends = a.continueStarts(md)
	return md, tx
}

// Commit ends a flushed interval the next consumer took, or one that is
// lost (a permanent refusal): sources no one holds are forgotten.
func (a *Aggregator) Commit(tx *Tx) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.commitEnds(tx.ends, tx.now)
	a.prune()
}

// Restore merges a refused interval back into the sums, so the next flush
// emits it with what arrived since, over both intervals. The key table keeps
// its MaxKeys bound: it returns the records it had no room for (the table
// filled meanwhile), which the caller counts as lost.
func (a *Aggregator) Restore(tx *Tx) (dropped uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last = tx.start
	if !tx.hasData {
		return 0
	}
	a.chosen = tx.chosen
	for i, k := range tx.keys {
		v := tx.vals[i]
		s, ok := a.slots[k]
		if !ok {
			if len(a.vals) >= a.limits.MaxKeys {
				dropped += v.count
				continue
			}
			s = int32(len(a.vals))
			a.vals = append(a.vals, value{})
			a.slots[k] = s
		}
		a.vals[s].dur += v.dur
		a.vals[s].count += v.count
		a.vals[s].bytes += v.bytes
	}
	for i, b := range tx.busy {
		a.busyVals[i].busy += b // busy slots are freed only by Commit's prune
	}
	for i, sp := range tx.srcSpan {
		if sp.hi <= sp.lo {
			continue
		}
		cur := &a.srcSpan[i]
		if cur.hi <= cur.lo {
			*cur = sp
			continue
		}
		cur.lo, cur.hi = min(cur.lo, sp.lo), max(cur.hi, sp.hi)
	}
	return dropped
}

// Records is how many activity records the interval summed.
func (tx *Tx) Records() (n uint64) {
	for _, v := range tx.vals {
		n += v.count
	}
	return n
}

// Series is how many aggregation keys the interval holds.
func (tx *Tx) Series() int { return len(tx.keys) }

func (a *Aggregator) emitSource(start, now pcommon.Timestamp, src uint32, keys []key) {
	lo, _ := slices.BinarySearchFunc(keys, src, func(k key, s uint32) int { return cmp.Compare(k.src, s) })
	hi := lo
	for hi < len(keys) && keys[hi].src == src {
		hi++
	}
	busy := map[uint16]uint64{}
	for k, i := range a.busyIx {
		if s := a.busyVals[i]; k.src == src && s.busy > 0 {
			busy[k.device] = s.busy
		}
	}
	devs := make([]uint16, 0, len(busy)+2)
	for d := range busy {
		devs = append(devs, d)
	}
	for i := lo; i < hi; i++ {
		if len(devs) == 0 || !slices.Contains(devs, keys[i].device) {
			devs = append(devs, keys[i].device)
		}
	}
	slices.Sort(devs)
	// One resource per device: the GPU's UUID (hw.id) is a resource
	// attribute, as in the nvml receiver, so the two join on it.
	for _, dev := range devs {
		i := lo
		for i < hi && keys[i].device < dev {
			i++
		}
		j := i
		for j < hi && keys[j].device == dev {
			j++
		}
		if i < j {
			a.emitDevice(now, src, dev, keys[i:j])
		}
		if b := busy[dev]; b > 0 {
			a.mb.RecordInferprofGpuBusyTimeDataPoint(now, seconds(b), deviceOrdinal(dev))
		}
		a.mb.EmitForResource(metadata.WithResource(a.resourceOf(src, dev)), metadata.WithStartTimeOverride(start))
	}
}

// resourceOf is the resource of one device of one source.
func (a *Aggregator) resourceOf(src uint32, dev uint16) pcommon.Resource {
	rb := a.mb.NewResourceBuilder()
	s := a.srcList[src]
	switch s.Kind {
	case SourceKindCUPTI:
		rb.SetInferprofActivitySourceCupti()
		rb.SetProcessPid(int64(s.PID))
		if s.Host != "" {
			rb.SetHostName(s.Host)
		}
		if s.Instance != "" {
			rb.SetServiceInstanceID(s.Instance)
		}
		if s.Service != "" {
			rb.SetServiceName(s.Service)
		}
		if s.Flags&cuptiwire.HelloGraphMode != 0 {
			rb.SetInferprofCuptiGraphModeGraph()
		} else {
			rb.SetInferprofCuptiGraphModeNode()
		}
		rb.SetInferprofCuptiSampled(s.Flags&(cuptiwire.HelloRateLimited|cuptiwire.HelloDutyCycle) != 0)
	case SourceKindKineto:
		rb.SetInferprofActivitySourceKineto()
	}
	if id, ok := a.srcDevs[src][dev]; ok {
		if id.UUID != "" {
			rb.SetHwID(id.UUID)
		}
		if id.MIG != "" {
			rb.SetInferprofGpuMigUUID(id.MIG)
		}
	}
	return rb.Emit()
}

// chosenKey is one device of one source.
type chosenKey struct {
	src    uint32
	device uint16
}

func (a *Aggregator) emitDevice(now pcommon.Timestamp, src uint32, dev uint16, keys []key) {
	devName := deviceOrdinal(dev)
	a.scratch = a.scratch[:0]
	for _, k := range keys {
		v := a.vals[a.slots[k]]
		switch k.kind {
		case cuptiwire.RecordKindKernel:
			a.scratch = append(a.scratch, seriesTotal{series: k.series, v: v})
		case cuptiwire.RecordKindMemcpy:
			kind := memcpyKind(k.sub)
			a.mb.RecordInferprofGpuMemcpyDurationDataPoint(now, seconds(v.dur), kind, devName)
			a.mb.RecordInferprofGpuMemcpyBytesDataPoint(now, int64(v.bytes), kind, devName)
		case cuptiwire.RecordKindMemset:
			kind := memoryKind(k.sub)
			a.mb.RecordInferprofGpuMemsetDurationDataPoint(now, seconds(v.dur), kind, devName)
			a.mb.RecordInferprofGpuMemsetBytesDataPoint(now, int64(v.bytes), kind, devName)
		case cuptiwire.RecordKindSync:
			a.mb.RecordInferprofGpuSyncDurationDataPoint(now, seconds(v.dur), syncKind(k.sub), devName)
		case cuptiwire.RecordKindGraph:
			sig := a.signatureName(k.series)
			a.mb.RecordInferprofGpuGraphDurationDataPoint(now, seconds(v.dur), sig, devName)
			a.mb.RecordInferprofGpuGraphCountDataPoint(now, int64(v.count), sig, devName)
		}
	}
	// The longest kernels keep their own series; the rest are summed per
	// category so category totals stay exact. Kernels chosen at the last
	// flush stay chosen while they still rank within twice top_kernels, so
	// one near the cut keeps one series instead of flipping to "other".
	slices.SortFunc(a.scratch, func(x, y seriesTotal) int {
		return cmp.Or(cmp.Compare(y.v.dur, x.v.dur), cmp.Compare(x.series, y.series))
	})
	ck := chosenKey{src: src, device: dev}
	prev := a.chosen[ck]
	next := make(map[uint32]struct{}, a.top)
	for i, st := range a.scratch {
		if len(next) >= a.top || i >= 2*a.top {
			break
		}
		if _, ok := prev[st.series]; ok && st.series != overflowSeries {
			next[st.series] = struct{}{}
		}
	}
	for _, st := range a.scratch {
		if len(next) >= a.top {
			break
		}
		if st.series != overflowSeries {
			next[st.series] = struct{}{}
		}
	}
	if a.top > 0 {
		if a.chosen == nil {
			a.chosen = map[chosenKey]map[uint32]struct{}{}
		}
		a.chosen[ck] = next
	}
	var other map[string]value
	for _, st := range a.scratch {
		s := a.series[st.series]
		if _, ok := next[st.series]; ok {
			a.mb.RecordInferprofGpuKernelDurationDataPoint(now, seconds(st.v.dur), s.name, s.category, devName)
			a.mb.RecordInferprofGpuKernelCountDataPoint(now, int64(st.v.count), s.name, s.category, devName)
			continue
		}
		if other == nil {
			other = map[string]value{}
		}
		o := other[s.category]
		o.dur += st.v.dur
		o.count += st.v.count
		other[s.category] = o
	}
	cats := make([]string, 0, len(other))
	for c := range other {
		cats = append(cats, c)
	}
	slices.Sort(cats)
	for _, c := range cats {
		o := other[c]
		a.mb.RecordInferprofGpuKernelDurationDataPoint(now, seconds(o.dur), OtherKernel, c, devName)
		a.mb.RecordInferprofGpuKernelCountDataPoint(now, int64(o.count), OtherKernel, c, devName)
	}
}

func seconds(ns uint64) float64 { return float64(ns) / 1e9 }

// deviceOrdinal is the inferprof.cuda.device.ordinal value: -1 unknown.
func deviceOrdinal(d uint16) int64 {
	if d == cuptiwire.DeviceUnknown {
		return -1
	}
	return int64(d)
}

// The generated enums are CUPTI's numbering plus one; values a newer CUPTI
// adds fall back to unknown.
func memcpyKind(sub uint8) metadata.AttributeMemcpyKind {
	if sub > 10 {
		return metadata.AttributeMemcpyKindUnknown
	}
	return metadata.AttributeMemcpyKind(sub + 1)
}

func memoryKind(sub uint8) metadata.AttributeMemoryKind {
	if sub > 7 {
		return metadata.AttributeMemoryKindUnknown
	}
	return metadata.AttributeMemoryKind(sub + 1)
}

func syncKind(sub uint8) metadata.AttributeSyncKind {
	if sub > 4 {
		return metadata.AttributeSyncKindUnknown
	}
	return metadata.AttributeSyncKind(sub + 1)
}
