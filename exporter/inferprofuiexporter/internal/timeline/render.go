// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/timeline"

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Event is one Chrome Trace Event. Every event carries ph, ts, pid and tid
// (metadata events at ts 0), so strict readers accept them all.
type Event struct {
	Name  string         `json:"name,omitempty"`
	Cat   string         `json:"cat,omitempty"`
	Ph    string         `json:"ph"`
	Ts    float64        `json:"ts"`
	Dur   *float64       `json:"dur,omitempty"`
	Pid   int            `json:"pid"`
	Tid   int            `json:"tid"`
	ID    string         `json:"id,omitempty"`
	S     string         `json:"s,omitempty"`
	Bp    string         `json:"bp,omitempty"`
	Cname string         `json:"cname,omitempty"`
	Args  map[string]any `json:"args,omitempty"`
}

// Trace is the JSON object format of the Trace Event Format.
type Trace struct {
	TraceEvents     []Event   `json:"traceEvents"`
	DisplayTimeUnit string    `json:"displayTimeUnit"`
	OtherData       OtherData `json:"otherData"`
}

// OtherData says what the trace covers; ts 0 is OriginUnixNs.
type OtherData struct {
	Producer     string `json:"producer"`
	OriginUnixNs int64  `json:"origin_unix_ns"`
	FromUnixNs   int64  `json:"from_unix_ns"`
	ToUnixNs     int64  `json:"to_unix_ns"`
	Requests     int    `json:"requests"`
	Steps        int    `json:"steps"`
	Kernels      int    `json:"kernels"`
	Samples      int    `json:"samples"`
	Flows        int    `json:"flows"`
	// KernelsSampled: kernels are the cupti receiver's sample
	// (spans.sampling_ratio), not every execution.
	KernelsSampled bool `json:"kernels_sampled"`
	// Truncated: the response reached timeline.max_response_mib and
	// EventsOmitted events were left out (the last ones drawn: GPU kernels
	// and counters first). Ask for a shorter window.
	Truncated     bool `json:"truncated"`
	EventsOmitted int  `json:"events_omitted,omitempty"`
}

// Colours from the trace viewer's reserved palette (catapult
// tracing/base/color_scheme.html); chrome://tracing honours cname, Perfetto
// colours by name.
var categoryColour = map[string]string{
	"attention_prefill": "rail_response",
	"attention_decode":  "rail_load",
	"attention":         "thread_state_runnable",
	"gemm":              "rail_animate",
	"moe":               "detailed_memory_dump",
	"communication":     "terrible",
	"kv_cache":          "rail_idle",
	"normalization":     "thread_state_running",
	"activation":        "cq_build_passed",
	"rope":              "thread_state_iowait",
	"sampling":          "cq_build_running",
	"quantization":      "thread_state_unknown",
	"memory":            "bad",
	"other":             "generic_work",
}

var phaseColour = map[string]string{
	"queue":   "rail_idle",
	"prefill": "rail_response",
	"decode":  "rail_load",
}

// Thread ids inside an engine instance's process.
const (
	tidSteps    = 10      // onwards: one per data-parallel engine, more where steps overlap
	tidRequests = 1000000 // + lane
)

// Pid ranges: engine instances first, then GPUs.
const (
	pidEngines = 1
	pidGPUs    = 100000
)

// builder hands events, with times relative to origin, to emit: Render
// collects them, StreamTrace encodes each as it comes, so that a long window
// never exists as one document in memory.
type builder struct {
	origin int64
	emit   func(Event)
}

func (b *builder) us(ns int64) float64 { return float64(ns-b.origin) / 1e3 }

func (b *builder) meta(pid, tid int, name, value string) {
	b.emit(Event{Name: name, Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"name": value}})
}

func (b *builder) sortIndex(pid, tid int, idx int) {
	name := "process_sort_index"
	if tid != 0 {
		name = "thread_sort_index"
	}
	b.emit(Event{Name: name, Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"sort_index": idx}})
}

func (b *builder) slice(pid, tid int, name, cat, cname string, start, end int64, args map[string]any) {
	d := float64(end-start) / 1e3
	b.emit(Event{Name: name, Cat: cat, Ph: "X", Ts: b.us(start), Dur: &d, Pid: pid, Tid: tid, Cname: cname, Args: args})
}

func (b *builder) counter(pid int, name string, ts int64, args map[string]any) {
	b.emit(Event{Name: name, Ph: "C", Ts: b.us(ts), Pid: pid, Tid: 0, Args: args})
}

// lanes packs intervals into the fewest rows where none overlap: a
// thread's slices must nest, and concurrent requests do not.
type lanes []int64

func (l *lanes) place(start, end int64) int {
	for i, last := range *l {
		if start >= last {
			(*l)[i] = end
			return i
		}
	}
	*l = append(*l, end)
	return len(*l) - 1
}

// Render turns a snapshot into a Chrome trace, in memory; the handler
// streams instead (StreamTrace).
func Render(sn Snapshot) Trace {
	var events []Event
	od := render(sn, func(e Event) { events = append(events, e) })
	if events == nil {
		events = []Event{}
	}
	return Trace{TraceEvents: events, DisplayTimeUnit: "ms", OtherData: od}
}

// render hands sn's events to emit and returns what the trace covers.
func render(sn Snapshot, emit func(Event)) OtherData {
	// ts 0 is the earliest record, so that times stay small and keep
	// sub-microsecond precision as float64.
	origin := int64(math.MaxInt64)
	for _, r := range sn.Requests {
		origin = min(origin, r.Start)
	}
	for _, st := range sn.Steps {
		origin = min(origin, st.Start)
	}
	for _, k := range sn.Kernels {
		origin = min(origin, k.Start)
	}
	for _, sm := range sn.Samples {
		origin = min(origin, sm.TS)
	}
	if origin == math.MaxInt64 {
		origin = sn.From
	}
	b := &builder{origin: origin, emit: emit}
	od := OtherData{
		Producer: "inferprof", OriginUnixNs: origin, FromUnixNs: sn.From, ToUnixNs: sn.To,
		Requests: len(sn.Requests), Steps: len(sn.Steps), Kernels: len(sn.Kernels), Samples: len(sn.Samples),
		KernelsSampled: len(sn.Kernels) > 0,
	}

	// One process per engine instance, in name order.
	instances := map[string]int{}
	var instNames []string
	for _, r := range sn.Requests {
		if _, ok := instances[r.Instance]; !ok {
			instances[r.Instance] = 0
			instNames = append(instNames, r.Instance)
		}
	}
	for _, st := range sn.Steps {
		if _, ok := instances[st.Instance]; !ok {
			instances[st.Instance] = 0
			instNames = append(instNames, st.Instance)
		}
	}
	slices.Sort(instNames)
	for i, n := range instNames {
		pid := pidEngines + i
		instances[n] = pid
		b.meta(pid, 0, "process_name", "engine "+n)
		b.sortIndex(pid, 0, i)
	}

	stepLoc := b.steps(sn.Steps, instances)
	b.requests(sn.Requests, sn.Phases, instances)
	od.Flows = b.gpus(sn, stepLoc)
	return od
}

type stepKey struct {
	trace pcommon.TraceID
	span  pcommon.SpanID
}

type stepPlace struct {
	pid, tid   int
	start, end int64
}

func stepName(st Step) (string, string) {
	switch {
	case st.Prefill > 0 && st.Decode > 0:
		return "mixed step", "rail_animate"
	case st.Prefill > 0:
		return "prefill step", "rail_response"
	case st.Decode > 0:
		return "decode step", "rail_load"
	}
	return "step", "generic_work"
}

// steps draws engine steps per instance and data-parallel engine, with
// batch, KV cache and scheduler queue counters, and returns where each step
// was drawn, for flows.
func (b *builder) steps(steps []Step, instances map[string]int) map[stepKey]stepPlace {
	type laneKey struct {
		instance string
		engine   int64
	}
	slices.SortFunc(steps, func(x, y Step) int {
		return cmp.Or(cmp.Compare(x.Instance, y.Instance), cmp.Compare(x.EngineIndex, y.EngineIndex), cmp.Compare(x.Start, y.Start))
	})
	lanesOf := map[laneKey]*lanes{}
	tidOf := map[[3]int64]int{} // (pid, engine, lane) -> tid
	nextTid := map[int]int{}
	loc := make(map[stepKey]stepPlace, len(steps))
	for _, st := range steps {
		k := laneKey{st.Instance, st.EngineIndex}
		l, ok := lanesOf[k]
		if !ok {
			l = &lanes{}
			lanesOf[k] = l
		}
		lane := l.place(st.Start, st.End)
		pid := instances[st.Instance]
		tk := [3]int64{int64(pid), st.EngineIndex, int64(lane)}
		tid, ok := tidOf[tk]
		if !ok {
			tid = tidSteps + nextTid[pid]
			nextTid[pid]++
			tidOf[tk] = tid
			label := "engine steps"
			if st.EngineIndex > 0 {
				label += " (dp " + strconv.FormatInt(st.EngineIndex, 10) + ")"
			}
			if lane > 0 {
				label += " overlap " + strconv.Itoa(lane)
			}
			b.meta(pid, tid, "thread_name", label)
			b.sortIndex(pid, tid, tidSteps+int(st.EngineIndex)*64+lane)
		}
		name, colour := stepName(st)
		args := map[string]any{
			"step": st.Index, "prefill_requests": st.Prefill, "decode_requests": st.Decode,
			"scheduled_tokens": st.Tokens, "running": st.Running, "waiting": st.Waiting,
		}
		if !math.IsNaN(st.KVUsage) {
			args["kv_cache_usage"] = st.KVUsage
		}
		b.slice(pid, tid, name, "engine.step", colour, st.Start, st.End, args)
		loc[stepKey{st.TraceID, st.SpanID}] = stepPlace{pid, tid, st.Start, st.End}

		suffix := ""
		if st.EngineIndex > 0 {
			suffix = " (dp " + strconv.FormatInt(st.EngineIndex, 10) + ")"
		}
		b.counter(pid, "batch size"+suffix, st.Start, map[string]any{"prefill": st.Prefill, "decode": st.Decode})
		if !math.IsNaN(st.KVUsage) {
			b.counter(pid, "KV cache usage %"+suffix, st.Start, map[string]any{"used": round(st.KVUsage * 100)})
		}
		if st.Running >= 0 && st.Waiting >= 0 {
			b.counter(pid, "scheduler requests"+suffix, st.Start, map[string]any{"running": st.Running, "waiting": st.Waiting})
		}
	}
	return loc
}

func round(v float64) float64 { return math.Round(v*1000) / 1000 }

// requests draws each request on a lane of its instance, its phases nested
// inside, and its tokens as instants when inter-token gaps are known.
func (b *builder) requests(reqs []Request, phases []Phase, instances map[string]int) {
	type parent struct {
		trace pcommon.TraceID
		span  pcommon.SpanID
	}
	byParent := map[parent][]Phase{}
	for _, p := range phases {
		k := parent{p.TraceID, p.Parent}
		byParent[k] = append(byParent[k], p)
	}
	slices.SortFunc(reqs, func(x, y Request) int {
		return cmp.Or(cmp.Compare(x.Instance, y.Instance), cmp.Compare(x.Start, y.Start), cmp.Compare(y.End, x.End))
	})
	lanesOf := map[string]*lanes{}
	named := map[[2]int]bool{}
	for _, r := range reqs {
		l, ok := lanesOf[r.Instance]
		if !ok {
			l = &lanes{}
			lanesOf[r.Instance] = l
		}
		lane := l.place(r.Start, r.End)
		pid, tid := instances[r.Instance], tidRequests+lane
		if !named[[2]int{pid, tid}] {
			named[[2]int{pid, tid}] = true
			b.meta(pid, tid, "thread_name", "requests "+strconv.Itoa(lane+1))
			b.sortIndex(pid, tid, tid)
		}
		args := map[string]any{"request_id": r.RequestID, "trace_id": r.TraceID.String(), "span_id": r.SpanID.String()}
		putFloat(args, "ttft_s", r.TTFT)
		putFloat(args, "e2e_s", r.E2E)
		putFloat(args, "queue_s", r.Queue)
		putFloat(args, "prefill_s", r.Prefill)
		putFloat(args, "decode_s", r.Decode)
		putFloat(args, "other_s", r.Other)
		putFloat(args, "tpot_s", r.TPOT)
		if r.Model != "" {
			args["model"] = r.Model
		}
		if r.Bottleneck != "" {
			args["bottleneck"] = r.Bottleneck
		}
		if r.ErrorType != "" {
			args["error_type"] = r.ErrorType
		}
		if r.InputToks >= 0 {
			args["input_tokens"] = r.InputToks
		}
		if r.OutputToks >= 0 {
			args["output_tokens"] = r.OutputToks
		}
		colour := "generic_work"
		if r.ErrorType != "" {
			colour = "terrible"
		}
		name := "request"
		if r.RequestID != "" {
			name = "request " + r.RequestID
		}
		b.slice(pid, tid, name, "request", colour, r.Start, r.End, args)

		// Phases, clamped into the request so that they nest even when the
		// engine's clocks disagree slightly.
		ps := byParent[parent{r.TraceID, r.SpanID}]
		slices.SortFunc(ps, func(x, y Phase) int { return cmp.Compare(x.Start, y.Start) })
		prevEnd := r.Start
		for _, p := range ps {
			start := min(max(p.Start, prevEnd), r.End)
			end := min(max(p.End, start), r.End)
			if end <= start {
				continue
			}
			b.slice(pid, tid, p.Name, "phase", phaseColour[p.Name], start, end, nil)
			prevEnd = end
		}

		if len(r.Gaps) > 0 && !math.IsNaN(r.TTFT) {
			t := float64(r.Start) + r.TTFT*1e9
			b.instant(pid, tid, int64(t), 0)
			for i, g := range r.Gaps {
				t += g * 1e9
				b.instant(pid, tid, int64(t), i+1)
			}
		}
	}
}

func (b *builder) instant(pid, tid int, ts int64, index int) {
	b.emit(Event{Name: "token", Cat: "token", Ph: "i", S: "t", Ts: b.us(ts), Pid: pid, Tid: tid,
		Args: map[string]any{"index": index}})
}

func putFloat(m map[string]any, k string, v float64) {
	if !math.IsNaN(v) {
		m[k] = v
	}
}

// gpus draws one process per GPU: kernels on their streams and NVML
// counters. It draws a flow from the launching step to each kernel whose
// step is in the window, and returns how many.
func (b *builder) gpus(sn Snapshot, stepLoc map[stepKey]stepPlace) int {
	gpuPid := map[string]int{}
	var gpuNames []string
	label := map[string]string{}
	add := func(host, device, devName string) {
		key := host + "/" + device
		if _, ok := gpuPid[key]; !ok {
			gpuPid[key] = 0
			gpuNames = append(gpuNames, key)
		}
		if devName != "" {
			label[key] = devName
		}
	}
	for _, k := range sn.Kernels {
		add(k.Host, k.Device, "")
	}
	for _, s := range sn.Samples {
		add(s.Host, s.Device, s.DeviceName)
	}
	slices.Sort(gpuNames)
	for i, key := range gpuNames {
		pid := pidGPUs + i
		gpuPid[key] = pid
		name := "GPU " + key
		if l := label[key]; l != "" {
			name += " (" + l + ")"
		}
		b.meta(pid, 0, "process_name", name)
		b.sortIndex(pid, 0, 1000+i)
	}

	type streamKey struct {
		gpu    string
		stream int64
	}
	kernels := slices.Clone(sn.Kernels)
	slices.SortFunc(kernels, func(x, y Kernel) int {
		return cmp.Or(cmp.Compare(x.Host+"/"+x.Device, y.Host+"/"+y.Device), cmp.Compare(x.Stream, y.Stream), cmp.Compare(x.Start, y.Start))
	})
	streamLanes := map[streamKey]*lanes{}
	tids := map[[2]int]bool{}
	nextTid := map[int]int{}
	tidOf := map[[3]int64]int{}
	flows := 0
	for _, k := range kernels {
		key := k.Host + "/" + k.Device
		pid := gpuPid[key]
		sk := streamKey{key, k.Stream}
		l, ok := streamLanes[sk]
		if !ok {
			l = &lanes{}
			streamLanes[sk] = l
		}
		lane := l.place(k.Start, k.End)
		tk := [3]int64{int64(pid), k.Stream, int64(lane)}
		tid, ok := tidOf[tk]
		if !ok {
			nextTid[pid]++
			tid = nextTid[pid]
			tidOf[tk] = tid
		}
		if !tids[[2]int{pid, tid}] {
			tids[[2]int{pid, tid}] = true
			name := "stream " + strconv.FormatInt(k.Stream, 10)
			if lane > 0 {
				name += " overlap " + strconv.Itoa(lane)
			}
			b.meta(pid, tid, "thread_name", name)
			b.sortIndex(pid, tid, int(k.Stream)*16+lane)
		}
		cat := k.Category
		if cat == "" {
			cat = "other"
		}
		colour, ok := categoryColour[cat]
		if !ok {
			colour = "generic_work"
		}
		args := map[string]any{"category": cat, "correlation_id": k.Correlation}
		if k.GraphID > 0 {
			args["graph_id"] = k.GraphID
		}
		if k.PID > 0 {
			args["pid"] = k.PID
		}
		b.slice(pid, tid, k.Name, cat, colour, k.Start, k.End, args)
		if k.StepSpan.IsEmpty() {
			continue
		}
		st, ok := stepLoc[stepKey{k.StepTrace, k.StepSpan}]
		if !ok {
			continue
		}
		flows++
		id := "0x" + strconv.FormatInt(int64(flows), 16)
		// Flow ends sit inside their slices (mid-points), so both bind to
		// the enclosing slice whatever the order of equal timestamps.
		b.emit(Event{Name: "launch", Cat: "launch", Ph: "s", Ts: b.us(st.start + (st.end-st.start)/2), Pid: st.pid, Tid: st.tid, ID: id})
		b.emit(Event{Name: "launch", Cat: "launch", Ph: "f", Bp: "e", Ts: b.us(k.Start + (k.End-k.Start)/2), Pid: pid, Tid: tid, ID: id})
	}

	slices.SortStableFunc(sn.Samples, func(x, y Sample) int { return cmp.Compare(x.TS, y.TS) })
	for _, s := range sn.Samples {
		key := s.Host + "/" + s.Device
		pid := gpuPid[key]
		switch s.Metric {
		case metricGPUUtil:
			b.counter(pid, "GPU utilization %", s.TS, map[string]any{"busy": round(s.Value * 100)})
		case metricGPUMemUsed:
			args := map[string]any{"used": round(s.Value / (1 << 30))}
			if lim, ok := sn.MemLimit[key]; ok && lim >= s.Value {
				args["free"] = round((lim - s.Value) / (1 << 30))
			}
			b.counter(pid, "GPU memory GiB", s.TS, args)
		case metricGPUPower:
			b.counter(pid, "GPU power W", s.TS, map[string]any{"power": round(s.Value)})
		}
	}
	return flows
}

// String is for test failure messages.
func (e Event) String() string {
	d := 0.0
	if e.Dur != nil {
		d = *e.Dur
	}
	return fmt.Sprintf("%s %q pid=%d tid=%d ts=%.3f dur=%.3f", e.Ph, e.Name, e.Pid, e.Tid, e.Ts, d)
}
