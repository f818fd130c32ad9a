// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/metadata"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/request"
)

// fuzzNames are span names the processor treats specially, plus one it must
// leave alone.
var fuzzNames = []string{"llm_request", " Req 1a2b3c4d", "decode Req 9f", "generate", "chat_completions",
	"prefill_waiting", "decode_forward", "openai_chat", names.SpanEngineStep, "GET /health"}

// fuzzKeys are attribute keys the processor reads or writes.
var fuzzKeys = []string{
	names.AttrTimeToFirstToken, names.AttrE2E, names.AttrTimeInQueue, names.AttrTimeInPrefill, names.AttrTimeInDecode,
	"gen_ai.latency.time_in_model_inference", "gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens",
	names.AttrInputTokens, names.AttrOutputTokens, names.AttrRequestModel, "gen_ai.response.model", names.AttrRequestID,
	"gen_ai.response.finish_reasons", names.AttrProviderName, "gen_ai.system", names.AttrOperationName, names.AttrErrorType,
	"total_time", "queue_time", "inference_time", "validation_time", "time_per_token", "parameters",
	"gen_ai.latency.kv_cache_transfer_time", "lora_name", names.AttrLoRAAdapter, "gen_ai.prompt", "llm.completions",
	names.AttrTimeInOther, names.AttrAnomaly,
}

var fuzzStrings = []string{"", "1.5s", "830µs", "12.5ms", "abc", `["abort"]`, "chatcmpl-1", "cmpl-2", "NaN", "-1s",
	`GenerateParameters { adapter_id: Some("a") }`, `adapter_id: Some("`, "1e400s"}

// spanFromBytes decodes fuzz input into one span: a name selector, a status
// byte, a duration, then records of (key selector, type, 8 value bytes).
func spanFromBytes(data []byte) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(names.ResourceModelName, "m")
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetTraceID(pcommon.TraceID{1})
	span.SetSpanID(pcommon.SpanID{2})
	next := func(n int) []byte {
		if len(data) < n {
			b := make([]byte, n)
			copy(b, data)
			data = nil
			return b
		}
		b := data[:n]
		data = data[n:]
		return b
	}
	span.SetName(fuzzNames[int(next(1)[0])%len(fuzzNames)])
	if next(1)[0]%3 == 0 {
		span.Status().SetCode(ptrace.StatusCodeError)
	}
	start := uint64(1767225600) * 1e9
	span.SetStartTimestamp(pcommon.Timestamp(start))
	span.SetEndTimestamp(pcommon.Timestamp(start + uint64(binary.LittleEndian.Uint16(next(2)))*1e6))
	attrs := span.Attributes()
	for len(data) > 0 {
		key := fuzzKeys[int(next(1)[0])%len(fuzzKeys)]
		typ := next(1)[0] % 6
		raw := binary.LittleEndian.Uint64(next(8))
		switch typ {
		case 0:
			attrs.PutDouble(key, math.Float64frombits(raw))
		case 1:
			attrs.PutDouble(key, float64(int64(raw)%100000)/1000)
		case 2:
			attrs.PutInt(key, int64(raw))
		case 3:
			attrs.PutStr(key, fuzzStrings[raw%uint64(len(fuzzStrings))])
		case 4:
			attrs.PutBool(key, raw%2 == 0)
		case 5:
			s := attrs.PutEmptySlice(key)
			s.AppendEmpty().SetStr(fuzzStrings[raw%uint64(len(fuzzStrings))])
		}
	}
	return td
}

// FuzzProcessAttributes feeds arbitrary attribute maps on request-shaped
// spans through the processor. It must never panic, and whatever it writes
// must be a well-formed canonical value.
func FuzzProcessAttributes(f *testing.F) {
	f.Add([]byte{0, 1, 0x10, 0x27, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f})
	f.Add([]byte{1, 0, 0xff, 0xff, 6, 2, 200, 0, 0, 0, 0, 0, 0, 0, 7, 2, 1, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{3, 1, 0, 1, 18, 3, 1, 0, 0, 0, 0, 0, 0, 0, 23, 3, 10, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := createDefaultConfig().(*Config)
		sink := new(consumertest.TracesSink)
		p, tp, err := newTraces(t.Context(), processortest.NewNopSettings(metadata.Type), cfg, sink)
		require.NoError(t, err)
		p.now = func() time.Time { return time.Unix(1767225600, 0) }
		td := spanFromBytes(data)
		// Only request spans are ours to check. A span that claims an
		// earlier inference processor handled it is passed on as it is.
		in := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
		kind := request.Classify(in)
		ours := kind != request.KindNone && kind != request.KindSGLangStage && !request.Processed(in.Attributes())
		require.NoError(t, tp.ConsumeTraces(t.Context(), td))
		require.NoError(t, tp.Shutdown(t.Context()))
		require.GreaterOrEqual(t, sink.SpanCount(), 1, "nothing is lost")
		for _, td := range sink.AllTraces() {
			if ours {
				checkCanonical(t, td)
			}
		}
	})
}

func checkCanonical(t *testing.T, td ptrace.Traces) {
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		spans := td.ResourceSpans().At(i).ScopeSpans().At(0).Spans()
		for k := 0; k < spans.Len(); k++ {
			s := spans.At(k)
			require.LessOrEqual(t, s.StartTimestamp(), s.EndTimestamp(), "span %q", s.Name())
			attrs := s.Attributes()
			if _, ok := attrs.Get(names.AttrProviderName); !ok {
				continue // a phase span
			}
			for _, key := range []string{names.AttrTimePerOutputTok, names.AttrTimeInOther} {
				if v, ok := attrs.Get(key); ok {
					require.Equal(t, pcommon.ValueTypeDouble, v.Type(), key)
					require.False(t, math.IsNaN(v.Double()) || math.IsInf(v.Double(), 0) || v.Double() < 0, "%s=%v", key, v.Double())
				}
			}
			for _, key := range []string{names.AttrInputTokens, names.AttrOutputTokens} {
				if v, ok := attrs.Get(key); ok {
					require.Equal(t, pcommon.ValueTypeInt, v.Type(), key)
					require.GreaterOrEqual(t, v.Int(), int64(0), key)
				}
			}
			if v, ok := attrs.Get(names.AttrBottleneck); ok {
				require.Contains(t, []string{"queue", "prefill", "decode", "other"}, v.Str())
			}
			if v, ok := attrs.Get(names.AttrTimePerOutputTok); ok {
				out, _ := attrs.Get(names.AttrOutputTokens)
				require.GreaterOrEqual(t, out.Int(), int64(2), "tpot=%v needs 2 output tokens", v)
			}
		}
	}
}
