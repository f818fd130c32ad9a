// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/timeline"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
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

// record is what the store keeps: its shared() strings are interned, held
// once however many records name them.
type record interface {
	shared() [4]string
}

func (r Request) shared() [4]string { return [4]string{r.Model, r.ErrorType, r.Bottleneck, r.Instance} }
func (p Phase) shared() [4]string   { return [4]string{p.Name} }
func (s Step) shared() [4]string    { return [4]string{s.Instance} }
func (k Kernel) shared() [4]string  { return [4]string{k.Name, k.Category, k.Host, k.Device} }
func (s Sample) shared() [4]string  { return [4]string{s.Host, s.Device, s.DeviceName, s.Metric} }

// Reading is one NVML gauge reading of a GPU: utilisation (general task,
// a fraction), memory used or total (bytes), or power (W).
type Reading struct {
	Host, Device, DeviceName string
	Metric                   string // the nvml receiver's metric name
	TS                       int64  // unix ns
	Value                    float64
}
