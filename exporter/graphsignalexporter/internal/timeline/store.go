// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package timeline keeps the recent request, phase, engine step and GPU kernel
// spans and the GPU counters the exporter sees, within a memory budget, and
// renders a time window of them as Chrome Trace Event JSON (Perfetto UI and
// chrome://tracing open it as it is).
package timeline // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/timeline"

import (
	"math"
	"sync"
	"time"
	"unique"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/stepwindow"
)

// Attributes of the cupti receiver's kernel spans (spans.enabled) that only
// the timeline reads.
const (
	attrStream      = "inferprof.gpu.stream"
	attrCorrelation = "inferprof.cuda.correlation_id"
	attrGraphID     = "inferprof.cuda.graph_id"
)

// NVML metrics drawn as counter tracks (the nvml receiver's names).
const (
	metricGPUUtil     = "hw.gpu.utilization"
	metricGPUMemUsed  = "hw.gpu.memory.usage"
	metricGPUMemLimit = "hw.gpu.memory.limit"
	metricGPUPower    = "hw.power"
	attrGPUTask       = "hw.gpu.task"
)

// Request is a request span with the inference processor's canonical
// figures. A figure the span lacks is NaN (or -1 for token counts).
type Request struct {
	Instance   string // engine instance (stepwindow.InstanceKey)
	Model      string
	RequestID  string
	ErrorType  string
	Bottleneck string
	TraceID    pcommon.TraceID
	SpanID     pcommon.SpanID
	Start, End int64 // unix ns
	TTFT       float64
	E2E        float64
	Queue      float64
	Prefill    float64
	Decode     float64
	Other      float64
	TPOT       float64
	InputToks  int64
	OutputToks int64
	Gaps       []float64 // inter-token gaps, s
}

// Phase is one of the inference processor's queue/prefill/decode child spans.
type Phase struct {
	TraceID    pcommon.TraceID
	Parent     pcommon.SpanID
	Name       string
	Start, End int64
}

// Step is an engine.step span.
type Step struct {
	Instance    string
	EngineIndex int64
	TraceID     pcommon.TraceID
	SpanID      pcommon.SpanID
	Index       int64
	Start, End  int64
	Prefill     int64
	Decode      int64
	Tokens      int64
	Running     int64
	Waiting     int64
	KVUsage     float64 // NaN when the hook could not read it
}

// Kernel is a sampled kernel execution from the cupti receiver.
type Kernel struct {
	Host, Device string
	PID          int64
	Stream       int64
	Start, End   int64
	Name         string
	Category     string
	Correlation  int64
	GraphID      int64
	// The engine step that launched the kernel, when the record says so
	// (a span link, or the step as parent span); zero otherwise.
	StepTrace pcommon.TraceID
	StepSpan  pcommon.SpanID
}

// Sample is an NVML reading drawn as a counter.
type Sample Reading

// queue is a FIFO of records with their arrival number, so the store can
// evict the oldest record of any kind.
type queue[T any] struct {
	items []T
	seqs  []uint64
	sizes []int64
	head  int
}

func (q *queue[T]) push(v T, seq uint64, size int64) {
	q.items = append(q.items, v)
	q.seqs = append(q.seqs, seq)
	q.sizes = append(q.sizes, size)
}

func (q *queue[T]) len() int { return len(q.items) - q.head }

func (q *queue[T]) headSeq() uint64 {
	if q.len() == 0 {
		return math.MaxUint64
	}
	return q.seqs[q.head]
}

// pop drops the oldest record and returns its size.
func (q *queue[T]) pop() int64 {
	var zero T
	q.items[q.head] = zero // let go of its strings and slices
	size := q.sizes[q.head]
	q.head++
	// Compact once the dead prefix is half the slice.
	if q.head > 1024 && q.head*2 > len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items = q.items[:n]
		copy(q.seqs, q.seqs[q.head:])
		q.seqs = q.seqs[:n]
		copy(q.sizes, q.sizes[q.head:])
		q.sizes = q.sizes[:n]
		q.head = 0
	}
	return size
}

func (q *queue[T]) live() []T { return q.items[q.head:] }

// Stats counts what the store did with its input.
type Stats struct {
	Evicted int64 // records dropped to stay within the budget or max age
	Bad     int64 // spans with no usable time range, skipped
}

// Store holds recent timeline records within a memory budget. It is safe for
// concurrent use.
type Store struct {
	mu       sync.Mutex
	budget   int64
	maxAge   time.Duration
	now      func() time.Time
	used     int64
	seq      uint64
	requests queue[Request]
	phases   queue[Phase]
	steps    queue[Step]
	kernels  queue[Kernel]
	samples  queue[Sample]
	memLimit map[string]float64 // host/device -> memory limit, bytes
	stats    Stats
}

// New returns a store that keeps records up to budget bytes (estimated) and
// for at most maxAge.
func New(budget int64, maxAge time.Duration, now func() time.Time) *Store {
	return &Store{budget: budget, maxAge: maxAge, now: now, memLimit: map[string]float64{}}
}

// Record sizes, estimated: the struct, its bookkeeping, and its strings
// (interned strings are counted for every record, an upper bound).
const perRecord = 8 + 8 // seq and size

var (
	sizeRequest = int64(unsafe.Sizeof(Request{})) + perRecord
	sizePhase   = int64(unsafe.Sizeof(Phase{})) + perRecord
	sizeStep    = int64(unsafe.Sizeof(Step{})) + perRecord
	sizeKernel  = int64(unsafe.Sizeof(Kernel{})) + perRecord
	sizeSample  = int64(unsafe.Sizeof(Sample{})) + perRecord
)

// intern shares repeated strings (instances, kernel names, devices) between
// records.
func intern(s string) string { return unique.Make(s).Value() }

// Used returns the estimated bytes held.
func (s *Store) Used() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// Stats returns the counts since the store was made.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Batch is what one batch of spans or metrics adds to the store, read out of
// the pdata first so that the store can be fed after the data has gone on
// (to a queue that owns it) and only if it was accepted.
type Batch struct {
	requests []Request
	phases   []Phase
	steps    []Step
	kernels  []Kernel
	samples  []Sample
	limits   map[string]float64
	// Bad counts spans skipped for a bad time range.
	Bad int
}

// Empty tells whether the batch adds nothing.
func (b *Batch) Empty() bool {
	return len(b.requests)+len(b.phases)+len(b.steps)+len(b.kernels)+len(b.samples)+len(b.limits) == 0
}

// ConsumeTraces keeps the request, phase, step and kernel spans of td and
// returns how many spans it skipped and how many records it evicted.
func (s *Store) ConsumeTraces(td ptrace.Traces) (bad, evicted int) {
	b := Collect(td)
	return b.Bad, s.Apply(b)
}

// ConsumeMetrics keeps the NVML readings of md; it returns how many records
// it evicted.
func (s *Store) ConsumeMetrics(md pmetric.Metrics) (evicted int) {
	return s.Apply(CollectMetrics(md))
}

// Collect reads the request, phase, step and kernel spans of td; every other
// span is ignored. It only reads td.
func Collect(td ptrace.Traces) *Batch {
	b := &Batch{}
	for _, rs := range td.ResourceSpans().All() {
		res := rs.Resource()
		instance := ""
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				start, end := int64(sp.StartTimestamp()), int64(sp.EndTimestamp())
				kind := classify(sp)
				if kind == kindNone {
					continue
				}
				if start <= 0 || end < start {
					b.Bad++
					continue
				}
				if instance == "" && kind != kindKernel {
					instance = intern(stepwindow.InstanceKey(res))
				}
				switch kind {
				case kindRequest:
					b.requests = append(b.requests, requestOf(sp, instance))
				case kindPhase:
					b.phases = append(b.phases, Phase{TraceID: sp.TraceID(), Parent: sp.ParentSpanID(), Name: intern(sp.Name()), Start: start, End: end})
				case kindStep:
					b.steps = append(b.steps, stepOf(sp, res, instance))
				case kindKernel:
					b.kernels = append(b.kernels, kernelOf(sp, res))
				}
			}
		}
	}
	return b
}

// Reading is one NVML gauge reading of a GPU: utilisation (general task,
// a fraction), memory used or total (bytes), or power (W).
type Reading struct {
	Host, Device, DeviceName string
	Metric                   string // the nvml receiver's metric name
	TS                       int64  // unix ns
	Value                    float64
}

// Readings returns the NVML utilisation, memory and power readings of md,
// for the timeline's counters and the dashboard. It only reads md.
func Readings(md pmetric.Metrics) []Reading {
	var out []Reading
	for _, rm := range md.ResourceMetrics().All() {
		ra := rm.Resource().Attributes()
		host, device, devName := str(ra, names.ResourceHostName), str(ra, names.AttrDeviceID), str(ra, "hw.name")
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				name := m.Name()
				if name != metricGPUUtil && name != metricGPUMemUsed && name != metricGPUMemLimit && name != metricGPUPower {
					continue
				}
				var dps pmetric.NumberDataPointSlice
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					dps = m.Gauge().DataPoints()
				case pmetric.MetricTypeSum:
					dps = m.Sum().DataPoints()
				default:
					continue
				}
				for _, dp := range dps.All() {
					if name == metricGPUUtil {
						if task := str(dp.Attributes(), attrGPUTask); task != "" && task != "general" {
							continue
						}
					}
					dev := device
					if dev == "" {
						dev = str(dp.Attributes(), names.AttrDeviceID)
					}
					v := number(dp)
					if dev == "" || dp.Timestamp() == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
						continue
					}
					out = append(out, Reading{Host: intern(host), Device: intern(dev), DeviceName: intern(devName),
						Metric: name, TS: int64(dp.Timestamp()), Value: v})
				}
			}
		}
	}
	return out
}

// CollectMetrics reads the NVML utilisation, memory and power readings of
// md. It only reads md.
func CollectMetrics(md pmetric.Metrics) *Batch {
	b := &Batch{}
	for _, r := range Readings(md) {
		if r.Metric == metricGPUMemLimit {
			if b.limits == nil {
				b.limits = map[string]float64{}
			}
			b.limits[r.Host+"/"+r.Device] = r.Value
			continue
		}
		b.samples = append(b.samples, Sample(r))
	}
	return b
}

// Apply adds a batch and returns how many records it evicted to stay within
// the budget and max age.
func (s *Store) Apply(b *Batch) (evicted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range b.requests {
		s.seq++
		size := sizeRequest + int64(len(r.Model)+len(r.RequestID)+len(r.ErrorType)+len(r.Instance)) + 8*int64(len(r.Gaps))
		s.requests.push(r, s.seq, size)
		s.used += size
	}
	for _, p := range b.phases {
		s.seq++
		s.phases.push(p, s.seq, sizePhase)
		s.used += sizePhase
	}
	for _, st := range b.steps {
		s.seq++
		size := sizeStep + int64(len(st.Instance))
		s.steps.push(st, s.seq, size)
		s.used += size
	}
	for _, k := range b.kernels {
		s.seq++
		size := sizeKernel + int64(len(k.Name)+len(k.Category)+len(k.Host)+len(k.Device))
		s.kernels.push(k, s.seq, size)
		s.used += size
	}
	for k, v := range b.limits {
		if _, ok := s.memLimit[k]; ok || len(s.memLimit) < 4096 {
			s.memLimit[k] = v
		}
	}
	for _, sm := range b.samples {
		s.seq++
		size := sizeSample + int64(len(sm.Host)+len(sm.Device)+len(sm.DeviceName))
		s.samples.push(sm, s.seq, size)
		s.used += size
	}
	s.stats.Bad += int64(b.Bad)
	return s.evictLocked()
}

// evictLocked drops the oldest records until the store fits its budget, and
// records older than maxAge.
func (s *Store) evictLocked() int {
	n := 0
	cutoff := s.now().Add(-s.maxAge).UnixNano()
	for {
		q, seq := s.oldestLocked()
		if q == nil {
			break
		}
		if s.used <= s.budget && !s.expiredLocked(seq, cutoff) {
			break
		}
		s.used -= q.pop()
		n++
	}
	s.stats.Evicted += int64(n)
	return n
}

// popper is what eviction needs from a queue of any record type.
type popper interface {
	headSeq() uint64
	pop() int64
	len() int
}

func (s *Store) oldestLocked() (popper, uint64) {
	var best popper
	seq := uint64(math.MaxUint64)
	for _, q := range []popper{&s.requests, &s.phases, &s.steps, &s.kernels, &s.samples} {
		if q.len() > 0 && q.headSeq() < seq {
			best, seq = q, q.headSeq()
		}
	}
	return best, seq
}

// expiredLocked tells whether the record with arrival number seq ended
// before cutoff.
func (s *Store) expiredLocked(seq uint64, cutoff int64) bool {
	if s.maxAge <= 0 {
		return false
	}
	switch {
	case s.requests.headSeq() == seq:
		return s.requests.live()[0].End < cutoff
	case s.phases.headSeq() == seq:
		return s.phases.live()[0].End < cutoff
	case s.steps.headSeq() == seq:
		return s.steps.live()[0].End < cutoff
	case s.kernels.headSeq() == seq:
		return s.kernels.live()[0].End < cutoff
	case s.samples.headSeq() == seq:
		return s.samples.live()[0].TS < cutoff
	}
	return false
}

type spanKind int

const (
	kindNone spanKind = iota
	kindRequest
	kindPhase
	kindStep
	kindKernel
)

func classify(sp ptrace.Span) spanKind {
	a := sp.Attributes()
	switch sp.Name() {
	case names.SpanEngineStep:
		return kindStep
	case names.SpanPhaseQueue, names.SpanPhasePrefill, names.SpanPhaseDecode:
		if v, ok := a.Get(names.AttrSynthetic); ok && v.Type() == pcommon.ValueTypeBool && v.Bool() {
			return kindPhase
		}
	}
	// A request span is what the inference_metrics connector counts as one.
	if _, ok := a.Get(names.AttrE2E); ok {
		return kindRequest
	}
	if _, ok := a.Get(names.AttrTimeToFirstToken); ok {
		return kindRequest
	}
	if _, ok := a.Get(names.AttrKernelName); ok {
		return kindKernel
	}
	return kindNone
}

func requestOf(sp ptrace.Span, instance string) Request {
	a := sp.Attributes()
	r := Request{
		Instance:   instance,
		Model:      intern(str(a, names.AttrRequestModel)),
		RequestID:  str(a, names.AttrRequestID),
		ErrorType:  intern(str(a, names.AttrErrorType)),
		Bottleneck: intern(str(a, names.AttrBottleneck)),
		TraceID:    sp.TraceID(),
		SpanID:     sp.SpanID(),
		Start:      int64(sp.StartTimestamp()),
		End:        int64(sp.EndTimestamp()),
		TTFT:       float(a, names.AttrTimeToFirstToken),
		E2E:        float(a, names.AttrE2E),
		Queue:      float(a, names.AttrTimeInQueue),
		Prefill:    float(a, names.AttrTimeInPrefill),
		Decode:     float(a, names.AttrTimeInDecode),
		Other:      float(a, names.AttrTimeInOther),
		TPOT:       float(a, names.AttrTimePerOutputTok),
		InputToks:  integer(a, names.AttrInputTokens),
		OutputToks: integer(a, names.AttrOutputTokens),
	}
	if r.RequestID == "" {
		// Some engines put the id on the span only as an integer
		// (TensorRT-LLM); keep it readable.
		if v, ok := a.Get(names.AttrRequestID); ok {
			r.RequestID = v.AsString()
		}
	}
	if r.ErrorType == "" && sp.Status().Code() == ptrace.StatusCodeError {
		r.ErrorType = names.ErrorTypeOther
	}
	if v, ok := a.Get(names.AttrITLGaps); ok && v.Type() == pcommon.ValueTypeSlice {
		gaps := v.Slice()
		r.Gaps = make([]float64, 0, gaps.Len())
		for _, g := range gaps.All() {
			if f, ok := toFloat(g); ok && f >= 0 {
				r.Gaps = append(r.Gaps, f)
			}
		}
	}
	return r
}

func stepOf(sp ptrace.Span, res pcommon.Resource, instance string) Step {
	a := sp.Attributes()
	st := Step{
		Instance:    instance,
		EngineIndex: max(integer(res.Attributes(), names.ResourceEngineIndex), 0),
		TraceID:     sp.TraceID(),
		SpanID:      sp.SpanID(),
		Index:       integer(a, names.AttrStepIndex),
		Start:       int64(sp.StartTimestamp()),
		End:         int64(sp.EndTimestamp()),
		Prefill:     max(integer(a, names.AttrStepPrefillReqs), 0),
		Decode:      max(integer(a, names.AttrStepDecodeReqs), 0),
		Tokens:      integer(a, names.AttrStepScheduledToks),
		Running:     integer(a, names.AttrStepRunningReqs),
		Waiting:     integer(a, names.AttrStepWaitingReqs),
		KVUsage:     float(a, names.AttrStepKVCacheUsage),
	}
	return st
}

func kernelOf(sp ptrace.Span, res pcommon.Resource) Kernel {
	a, ra := sp.Attributes(), res.Attributes()
	device := str(a, names.AttrDeviceID)
	if device == "" {
		device = str(ra, names.AttrDeviceID)
	}
	k := Kernel{
		Host:        intern(str(ra, names.ResourceHostName)),
		Device:      intern(device),
		PID:         integer(ra, names.ResourceProcessPID),
		Stream:      max(integer(a, attrStream), 0),
		Start:       int64(sp.StartTimestamp()),
		End:         int64(sp.EndTimestamp()),
		Name:        intern(str(a, names.AttrKernelName)),
		Category:    intern(str(a, names.AttrKernelCategory)),
		Correlation: integer(a, attrCorrelation),
		GraphID:     integer(a, attrGraphID),
	}
	// The launching step: a span link, else the parent span.
	if sp.Links().Len() > 0 {
		l := sp.Links().At(0)
		k.StepTrace, k.StepSpan = l.TraceID(), l.SpanID()
	} else if !sp.ParentSpanID().IsEmpty() {
		k.StepTrace, k.StepSpan = sp.TraceID(), sp.ParentSpanID()
	}
	return k
}

func str(a pcommon.Map, k string) string {
	if v, ok := a.Get(k); ok && v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
}

func float(a pcommon.Map, k string) float64 {
	if v, ok := a.Get(k); ok {
		if f, ok := toFloat(v); ok {
			return f
		}
	}
	return math.NaN()
}

func toFloat(v pcommon.Value) (float64, bool) {
	switch v.Type() {
	case pcommon.ValueTypeDouble:
		f := v.Double()
		return f, !math.IsNaN(f) && !math.IsInf(f, 0)
	case pcommon.ValueTypeInt:
		return float64(v.Int()), true
	}
	return 0, false
}

func integer(a pcommon.Map, k string) int64 {
	if v, ok := a.Get(k); ok {
		switch v.Type() {
		case pcommon.ValueTypeInt:
			return v.Int()
		case pcommon.ValueTypeDouble:
			if f := v.Double(); !math.IsNaN(f) && !math.IsInf(f, 0) {
				return int64(f)
			}
		}
	}
	return -1
}

func number(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}
