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
	"github.com/inferprof/inferprof/internal/request"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/metadata"
)

// fuzzNames are span names the processor treats specially, plus one it must
// leave alone.
var fuzzNames = []string{"llm_request", " Req 1a2b3c4d", "decode Req 9f", "generate", "chat_completions",
	"prefill_waiting", "decode_forward", "openai_chat", names.SpanEngineStep, "GET /health",
	"Req 1a2b3c4d", "prefill Req 5e6f", "llm_core", "completions", "generate_stream", "decode_waiting",
	"Scheduler [TP 0] (host:1a2b3c4d | pid:7)"}

// fuzzEvents are event names the extractors read (vLLM's journey branch,
// TensorRT-LLM's disaggregated server, exceptions).
var fuzzEvents = []string{"api.ARRIVED", "api.FIRST_RESPONSE_FROM_CORE", "api.DEPARTED", "api.ABORTED",
	"journey.QUEUED", "journey.SCHEDULED", "journey.FIRST_TOKEN", "journey.FINISHED",
	"gen_server.selected", "exception"}

// fuzzKeys are attribute keys the processor reads or writes.
var fuzzKeys = []string{
	names.AttrTimeToFirstToken, names.AttrE2E, names.AttrTimeInQueue, names.AttrTimeInPrefill, names.AttrTimeInDecode,
	"gen_ai.latency.time_in_model_inference", "gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens",
	names.AttrInputTokens, names.AttrOutputTokens, names.AttrRequestModel, "gen_ai.response.model", names.AttrRequestID,
	"gen_ai.response.finish_reasons", names.AttrProviderName, "gen_ai.system", names.AttrOperationName, names.AttrErrorType,
	"total_time", "queue_time", "inference_time", "validation_time", "time_per_token", "parameters",
	"gen_ai.latency.kv_cache_transfer_time", "lora_name", names.AttrLoRAAdapter, "gen_ai.prompt", "llm.completions",
	names.AttrTimeInOther, names.AttrAnomaly,
	"gen_ai.usage.cached_tokens", request.AttrCacheRead, request.AttrDecodeQueue, "code.namespace",
	"gen_ai.request.top_k", "gen_ai.latency.time_in_scheduler", "finish.status", "exception.type",
}

var fuzzStrings = []string{"", "1.5s", "830µs", "12.5ms", "abc", `["abort"]`, "chatcmpl-1", "cmpl-2", "NaN", "-1s",
	`GenerateParameters { adapter_id: Some("a") }`, `adapter_id: Some("`, "1e400s", `["cancelled"]`, `["error", "stop"]`,
	"text_generation_router::server", "aborted", `"`, "m"}

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
		sel := next(1)[0]
		if sel >= 0xf0 {
			// An event at an offset into the span, with one attribute.
			ev := span.Events().AppendEmpty()
			ev.SetName(fuzzEvents[int(next(1)[0])%len(fuzzEvents)])
			ev.SetTimestamp(pcommon.Timestamp(start + uint64(binary.LittleEndian.Uint16(next(2)))*1e6))
			ev.Attributes().PutStr(fuzzKeys[int(next(1)[0])%len(fuzzKeys)], fuzzStrings[int(next(1)[0])%len(fuzzStrings)])
			continue
		}
		key := fuzzKeys[int(sel)%len(fuzzKeys)]
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
	// llm_core with journey events at 10 ms and 300 ms.
	f.Add([]byte{12, 1, 0, 4, 0xf0, 4, 10, 0, 0, 0, 0xf0, 6, 44, 1, 0, 0})
	// llm_request with TensorRT-LLM's -1 and an integer request id.
	f.Add([]byte{0, 1, 0xdc, 5, 1, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 12, 2, 3, 0, 0, 0, 0, 0, 0, 0})
	// A TGI router span named by code.namespace alone.
	f.Add([]byte{13, 0, 4, 0, 34, 3, 14, 0, 0, 0, 0, 0, 0, 0})
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
