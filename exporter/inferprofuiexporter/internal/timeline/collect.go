// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/timeline"

import (
	"context"
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/request"
	"github.com/inferprof/inferprof/internal/stepspan"
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

// ConsumeTraces keeps the request, phase, step and kernel spans of td and
// returns how many spans it skipped and how many records it evicted.
func (s *Store) ConsumeTraces(td ptrace.Traces) (bad, evicted int) {
	b := Collect(td, nil)
	return b.Bad, s.Apply(b)
}

// ConsumeMetrics keeps the NVML readings of md; it returns how many records
// it evicted.
func (s *Store) ConsumeMetrics(md pmetric.Metrics) (evicted int) {
	return s.Apply(CollectMetrics(md))
}

// Collect reads the request, phase, step and kernel spans of td; every other
// span is ignored. It only reads td. steps reads the engine.step spans.
func Collect(td ptrace.Traces, steps *stepspan.Reader) *Batch {
	b := &Batch{}
	var st stepspan.Step
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
					steps.Read(context.Background(), sp, &st, stepspan.Batch)
					b.steps = append(b.steps, stepOf(sp, &st, res, instance))
				case kindKernel:
					b.kernels = append(b.kernels, kernelOf(sp, res))
				}
			}
		}
	}
	return b
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
						Metric: intern(name), TS: int64(dp.Timestamp()), Value: v})
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
	if sp.Name() == names.SpanEngineStep {
		return kindStep
	}
	if request.IsSyntheticPhase(sp) {
		return kindPhase
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

// stepOf is the timeline's record of a step read by stepspan: its counts
// are -1 (stepspan.Absent) and its KV usage NaN when unknown.
func stepOf(sp ptrace.Span, st *stepspan.Step, res pcommon.Resource, instance string) Step {
	return Step{
		Instance:    instance,
		EngineIndex: max(integer(res.Attributes(), names.ResourceEngineIndex), 0),
		TraceID:     sp.TraceID(),
		SpanID:      sp.SpanID(),
		Index:       st.Index,
		Start:       st.StartUnixNs,
		End:         st.EndUnixNs,
		Prefill:     max(st.PrefillRequests, 0),
		Decode:      max(st.DecodeRequests, 0),
		Tokens:      st.ScheduledTokens,
		Running:     st.RunningRequests,
		Waiting:     st.WaitingRequests,
		KVUsage:     st.KVCacheUsage,
	}
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
