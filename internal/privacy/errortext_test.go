// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package privacy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/privacy/privacytest"
)

// modelOutput is what the model generated, quoted back by the engine's error.
const modelOutput = "SECRET-OUTPUT my account number is 0042"

var traceID = pcommon.TraceID{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}

// TestSpanErrorText runs the default scrubber over the spans a failed chat
// call leaves (privacytest.AppendErrorSpans: OpenLLMetry, the OpenTelemetry
// API's use_span, OpenInference LangChain, openai-agents), and checks the
// text is gone from every status and exception event while what says an
// error happened, and of what kind, stays.
func TestSpanErrorText(t *testing.T) {
	td := ptrace.NewTraces()
	spans := privacytest.AppendErrorSpans(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans(), traceID, time.Unix(1700000000, 0), modelOutput)
	require.Contains(t, dumpTraces(t, td), "SECRET-OUTPUT", "the fixture carries the text")
	var types []any
	for _, s := range spans {
		for _, e := range s.Events().All() {
			types = append(types, e.Attributes().AsRaw()["exception.type"])
		}
	}

	r := DefaultScrubber().Traces(td)

	// Four status messages, and message and stacktrace of three exception
	// events.
	assert.Equal(t, Removed{ErrorTexts: 4 + 3*2}, r)
	assert.NotContains(t, dumpTraces(t, td), "SECRET-OUTPUT")
	var typesAfter []any
	for _, s := range spans {
		assert.Equal(t, ptrace.StatusCodeError, s.Status().Code(), s.Name())
		assert.Equal(t, ErrorTextMarker, s.Status().Message(), s.Name())
		for _, e := range s.Events().All() {
			a := e.Attributes().AsRaw()
			assert.Equal(t, ErrorTextMarker, a["exception.message"], s.Name())
			assert.Equal(t, ErrorTextMarker, a["exception.stacktrace"], s.Name())
			assert.Equal(t, "False", a["exception.escaped"])
			typesAfter = append(typesAfter, a["exception.type"])
		}
	}
	assert.Equal(t, types, typesAfter, "exception.type stays")
	chat := spans[0]
	assert.Equal(t, "UnprocessableEntityError", chat.Attributes().AsRaw()["error.type"])
	assert.Equal(t, int64(500), spans[1].Attributes().AsRaw()["http.response.status_code"])

	// Scrubbed once, nothing is left: a second privacy processor (agent,
	// then gateway) counts nothing.
	assert.Equal(t, Removed{}, DefaultScrubber().Traces(td))
}

// TestSpanErrorTextLeavesOthersAlone: spans with no error text, an Error
// status with no description (SGLang's abort, observability/trace.py
// @b8e5a7c3; tracing-opentelemetry's ERROR event, layer.rs v0.21.0) and an
// exception event with only a type are left as they are.
func TestSpanErrorTextLeavesOthersAlone(t *testing.T) {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	ok := ss.AppendEmpty()
	ok.SetName("llm_request")
	ok.Attributes().PutDouble("gen_ai.latency.e2e", 1.5)
	abort := ss.AppendEmpty()
	abort.SetName("Scheduler [TP 0]")
	abort.Status().SetCode(ptrace.StatusCodeError)
	abort.Attributes().PutStr("type", "abort")
	typed := ss.AppendEmpty()
	typed.Status().SetCode(ptrace.StatusCodeOk)
	ev := typed.Events().AppendEmpty()
	ev.SetName("exception")
	ev.Attributes().PutStr("exception.type", "vllm.v1.engine.exceptions.EngineDeadError")
	before := dumpTraces(t, td)

	assert.Equal(t, Removed{}, DefaultScrubber().Traces(td))
	assert.Equal(t, before, dumpTraces(t, td))

	// The check is a few lookups, with no allocation, on every span.
	assert.Zero(t, testing.AllocsPerRun(100, func() { SpanErrorText(typed) }))
}

// TestErrorTextAnyType: tracing-opentelemetry records the stacktrace as an
// array of the error's source chain (layer.rs v0.21.0 record_error, with
// exception fields on, propagated to the span); the marker replaces it.
func TestErrorTextAnyType(t *testing.T) {
	s := ptrace.NewSpan()
	s.Attributes().PutStr("exception.message", "invalid tool arguments: "+modelOutput)
	require.NoError(t, s.Attributes().PutEmptySlice("exception.stacktrace").FromRaw([]any{"expected value: " + modelOutput}))
	assert.Equal(t, 2, SpanErrorText(s))
	assert.Equal(t, map[string]any{"exception.message": ErrorTextMarker, "exception.stacktrace": ErrorTextMarker}, s.Attributes().AsRaw())
}

// TestLogErrorText: the Python logging handler's record of
// logger.exception(...) keeps its body, severity and exception.type.
func TestLogErrorText(t *testing.T) {
	ld := plog.NewLogs()
	lr := privacytest.AppendErrorLog(ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords(), time.Unix(1700000000, 0), modelOutput)
	r := DefaultScrubber().Logs(ld)
	assert.Equal(t, Removed{ErrorTexts: 2}, r)
	assert.Equal(t, "chat completion failed", lr.Body().Str())
	assert.Equal(t, plog.SeverityNumberError, lr.SeverityNumber())
	assert.Equal(t, map[string]any{
		"exception.type":       "openai.UnprocessableEntityError",
		"exception.message":    ErrorTextMarker,
		"exception.stacktrace": ErrorTextMarker,
	}, lr.Attributes().AsRaw())
}
