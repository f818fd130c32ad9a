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

var phaseColour = map[string]string{
	"queue":   "rail_idle",
	"prefill": "rail_response",
	"decode":  "rail_load",
}

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

func putFloat(m map[string]any, k string, v float64) {
	if !math.IsNaN(v) {
		m[k] = v
	}
}
