// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver // import "github.com/inferprof/inferprof/receiver/cuptireceiver"

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto"
)

// stepScope is the instrumentation scope of the step spans made from
// Kineto traces.
const stepScope = "github.com/inferprof/inferprof/receiver/cuptireceiver"

// stepSpans turns a trace's ProfilerStep#N annotations into engine.step
// spans, one trace per file, one resource per process, with the same
// inferprof.step.gpu.* attributes live steps get.
func stepSpans(steps []kineto.Step) ptrace.Traces {
	td := ptrace.NewTraces()
	var traceID pcommon.TraceID
	binary.LittleEndian.PutUint64(traceID[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(traceID[8:], rand.Uint64())
	byPID := map[int64]ptrace.SpanSlice{}
	for _, st := range steps {
		spans, ok := byPID[st.PID]
		if !ok {
			rs := td.ResourceSpans().AppendEmpty()
			ra := rs.Resource().Attributes()
			ra.PutStr("inferprof.activity.source", "kineto")
			if st.PID >= 0 {
				ra.PutInt(names.ResourceProcessPID, st.PID)
			}
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(stepScope)
			spans = ss.Spans()
			byPID[st.PID] = spans
		}
		sp := spans.AppendEmpty()
		sp.SetName(names.SpanEngineStep)
		sp.SetTraceID(traceID)
		var id pcommon.SpanID
		binary.LittleEndian.PutUint64(id[:], rand.Uint64()|1)
		sp.SetSpanID(id)
		sp.SetKind(ptrace.SpanKindInternal)
		sp.SetStartTimestamp(pcommon.Timestamp(st.Start))
		sp.SetEndTimestamp(pcommon.Timestamp(st.End))
		a := sp.Attributes()
		a.PutInt(names.AttrStepIndex, int64(st.Index))
		a.PutStr(names.AttrStepSource, "kineto")
		if st.TID >= 0 {
			a.PutInt(names.AttrThreadID, st.TID)
		}
		st.Result.WriteAttributes(a)
	}
	return td
}

// emitSteps sends a trace's step spans to the traces pipeline.
func (r *cuptiReceiver) emitSteps(ctx context.Context, path string, steps []kineto.Step) {
	if len(steps) == 0 || r.nextTraces == nil {
		return
	}
	td := stepSpans(steps)
	r.tb.ReceiverCuptiStepSpans.Add(ctx, int64(td.SpanCount()))
	if err := r.nextTraces.ConsumeTraces(ctx, td); err != nil {
		r.badLog.Warn("kineto step spans refused by the next consumer", zap.String("file", path), zap.Int("spans", td.SpanCount()), zap.Error(err))
	}
}
