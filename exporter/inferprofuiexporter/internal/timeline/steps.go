// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/timeline"

import (
	"cmp"
	"math"
	"slices"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

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
