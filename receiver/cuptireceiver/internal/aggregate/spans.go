// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"

import (
	"cmp"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/kernelclass"
	"github.com/inferprof/inferprof/internal/names"
)

// scopeName is the instrumentation scope of kernel spans.
const scopeName = "github.com/inferprof/inferprof/receiver/cuptireceiver"

// EnableSpans keeps about ratio of kernel records, at most max per flush,
// for FlushSpans. The buffer is allocated here, once.
func (a *Aggregator) EnableSpans(ratio float64, maxPerFlush int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ratio <= 0 || maxPerFlush <= 0 {
		a.spanStride = 0
		return
	}
	a.spanStride = uint64(math.Round(1 / ratio))
	if a.spanStride == 0 {
		a.spanStride = 1
	}
	a.spans = make([]spanRec, 0, maxPerFlush)
}

// sampleSpan is systematic sampling: cheap, and unbiased across kernels
// because records of all kernels interleave. Whole graph launches (the
// library's graph mode) are sampled with them, so a timeline in graph mode
// still shows the GPU's work.
func (a *Aggregator) sampleSpan(src uint32, r *cuptiwire.Record, kernels []uint32, c *Cache) {
	a.spanSeen++
	if a.spanSeen%a.spanStride != 0 || len(a.spans) == cap(a.spans) {
		return
	}
	var series uint32
	switch {
	case r.Kind == cuptiwire.RecordKindGraph:
		series, _ = c.graphSignature(r.GraphID)
	case int(r.Name) < len(kernels):
		series = kernels[r.Name]
	}
	a.spans = append(a.spans, spanRec{src: src, series: series, rec: *r})
}

// GraphLaunchName names a whole graph launch: its sampled span and kernel
// name, and its entry among a step's top kernels.
const GraphLaunchName = "cudaGraphLaunch"

// spanName returns the name, category and, for a graph launch, the graph
// signature of a sampled span.
func (a *Aggregator) spanName(sp *spanRec) (name, category, signature string) {
	if sp.rec.Kind == cuptiwire.RecordKindGraph {
		return GraphLaunchName, kernelclass.CategoryCUDAGraph, a.signatureName(sp.series)
	}
	s := a.series[sp.series]
	return s.name, s.category, ""
}

// StepLink names the engine step that launched a kernel: the step span's
// ids and index.
type StepLink struct {
	TraceID pcommon.TraceID
	SpanID  pcommon.SpanID
	Index   uint64
}

// Linker finds the step that launched correlation id corr on source src.
type Linker func(src uint32, corr uint32) (StepLink, bool)

// FlushSpans returns the sampled kernel spans since the last call, one
// trace per source, and empties the buffer. With link, a kernel span
// launched by a known engine step links to that step's span, so a timeline
// can draw the step-to-kernel flow.
func (a *Aggregator) FlushSpans(link Linker) ptrace.Traces {
	a.mu.Lock()
	defer a.mu.Unlock()
	td := ptrace.NewTraces()
	if len(a.spans) == 0 {
		return td
	}
	slices.SortFunc(a.spans, func(x, y spanRec) int {
		return cmp.Or(cmp.Compare(x.src, y.src), cmp.Compare(x.rec.Start, y.rec.Start))
	})
	var ss ptrace.ScopeSpans
	var traceID pcommon.TraceID
	cur := ^uint32(0)
	for _, sp := range a.spans {
		if sp.src != cur {
			cur = sp.src
			rs := td.ResourceSpans().AppendEmpty()
			a.resource(sp.src, rs.Resource().Attributes())
			ss = rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(scopeName)
			binary.LittleEndian.PutUint64(traceID[:8], rand.Uint64())
			binary.LittleEndian.PutUint64(traceID[8:], rand.Uint64())
		}
		name, category, signature := a.spanName(&sp)
		span := ss.Spans().AppendEmpty()
		span.SetName(name)
		span.SetTraceID(traceID)
		var id pcommon.SpanID
		binary.LittleEndian.PutUint64(id[:], rand.Uint64()|1)
		span.SetSpanID(id)
		span.SetKind(ptrace.SpanKindInternal)
		span.SetStartTimestamp(pcommon.Timestamp(sp.rec.Start))
		span.SetEndTimestamp(pcommon.Timestamp(sp.rec.End))
		attrs := span.Attributes()
		attrs.EnsureCapacity(8)
		attrs.PutStr(names.AttrKernelName, name)
		attrs.PutStr(names.AttrKernelCategory, category)
		if signature != "" {
			attrs.PutStr(names.AttrCUDAGraphSignature, signature)
		}
		attrs.PutInt(names.AttrCUDADeviceOrdinal, deviceOrdinal(sp.rec.Device))
		if id := a.srcDevs[sp.src][sp.rec.Device]; id.UUID != "" {
			attrs.PutStr(names.AttrDeviceID, id.UUID)
		}
		attrs.PutInt(names.AttrGPUStream, int64(sp.rec.Stream))
		attrs.PutInt(names.AttrCUDACorrelationID, int64(sp.rec.Correlation))
		if sp.rec.GraphID != 0 {
			attrs.PutInt(names.AttrCUDAGraphID, int64(sp.rec.GraphID))
		}
		if link == nil {
			continue
		}
		if l, ok := link(sp.src, sp.rec.Correlation); ok {
			attrs.PutInt(names.AttrStepIndex, int64(l.Index))
			sl := span.Links().AppendEmpty()
			sl.SetTraceID(l.TraceID)
			sl.SetSpanID(l.SpanID)
		}
	}
	a.spans = a.spans[:0]
	return td
}

// resource writes a source's resource attributes (the same as the
// metrics' resource) into m.
func (a *Aggregator) resource(src uint32, m pcommon.Map) {
	s := a.srcList[src]
	switch s.Kind {
	case SourceKindCUPTI:
		m.PutStr("inferprof.activity.source", "cupti")
		m.PutInt("process.pid", int64(s.PID))
		if s.Host != "" {
			m.PutStr("host.name", s.Host)
		}
		if s.Instance != "" {
			m.PutStr(names.ResourceServiceInstance, s.Instance)
		}
		if s.Service != "" {
			m.PutStr(names.ResourceServiceName, s.Service)
		}
		if s.Flags&cuptiwire.HelloGraphMode != 0 {
			m.PutStr("inferprof.cupti.graph_mode", "graph")
		} else {
			m.PutStr("inferprof.cupti.graph_mode", "node")
		}
		m.PutBool("inferprof.cupti.sampled", s.Flags&(cuptiwire.HelloRateLimited|cuptiwire.HelloDutyCycle) != 0)
	case SourceKindKineto:
		m.PutStr("inferprof.activity.source", "kineto")
	}
}
