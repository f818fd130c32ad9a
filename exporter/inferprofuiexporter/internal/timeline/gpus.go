// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/timeline"

import (
	"cmp"
	"slices"
	"strconv"
)

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
