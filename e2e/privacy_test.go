// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/graphsignaltest"
	"github.com/inferprof/inferprof/internal/e2etest"
	"github.com/inferprof/inferprof/internal/privacy"
	"github.com/inferprof/inferprof/internal/privacy/privacytest"
)

// privacyPrompt is the user text the test plants in every signal.
const privacyPrompt = "PRIVACY-E2E-PROMPT my card is 4111 and my name is Ada"

// privacyTokenIDs are output token ids the test plants; privacyTokenID, a
// number nothing else here makes, is what it looks for (OTLP JSON writes
// ints as strings, so no list separator can be relied on).
var privacyTokenIDs = []int64{917351, 917352, 917353, 917354}

const privacyTokenID = "917353"

func postTraces(t *testing.T, addr string, td ptrace.Traces) {
	t.Helper()
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	require.NoError(t, err)
	postOTLP(t, "http://"+addr+"/v1/traces", b)
}

// contentSpan is a vLLM request span that also carries content the way
// GenAI instrumentations write it: an opt-in message attribute, the old
// gen_ai.prompt attribute, a gen_ai.user.message event and an ordinary
// event with a content attribute. With it, from the application, come the
// spans of a chat call that failed with the prompt quoted in the error: in
// status messages and exception events (privacytest.AppendErrorSpans cites
// the instrumentations whose shapes they follow).
func contentSpan(start time.Time) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "vllm")
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetName("llm_request")
	s.SetKind(ptrace.SpanKindServer)
	s.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	s.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(1500 * time.Millisecond)))
	a := s.Attributes()
	a.PutStr("gen_ai.request.id", "cmpl-privacy-0")
	a.PutStr("gen_ai.response.model", "meta-llama/Llama-3.1-8B-Instruct")
	a.PutInt("gen_ai.usage.prompt_tokens", 42)
	a.PutInt("gen_ai.usage.completion_tokens", 17)
	a.PutDouble("gen_ai.latency.time_in_queue", 0.05)
	a.PutDouble("gen_ai.latency.time_to_first_token", 0.2)
	a.PutDouble("gen_ai.latency.e2e", 1.5)
	a.PutStr("gen_ai.prompt", privacyPrompt)
	a.PutStr("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"`+privacyPrompt+`"}]}]`)
	ev := s.Events().AppendEmpty()
	ev.SetName("gen_ai.user.message")
	ev.Attributes().PutStr("content", privacyPrompt)
	// Issue #30: listed keys one level down, and instrumentations whose keys
	// were not listed, and output token ids.
	a.PutEmptyMap("gen_ai.request").PutStr("gen_ai.prompt", privacyPrompt)
	msg := a.PutEmptySlice("messages").AppendEmpty().SetEmptyMap()
	msg.PutStr("role", "user")
	msg.PutStr("content", privacyPrompt)
	for _, k := range []string{
		"ai.prompt", "ai.prompt.messages", "ai.response.text", "ai.response.toolCalls",
		"langfuse.observation.input", "langfuse.observation.output",
		"mlflow.spanInputs", "mlflow.spanOutputs", "all_messages_events",
	} {
		a.PutStr(k, `[{"content":"`+privacyPrompt+`"}]`)
	}
	for _, k := range []string{"gen_ai.response.token_ids", "new_token_ids", "output_token_ids"} {
		ids := a.PutEmptySlice(k)
		for _, id := range privacyTokenIDs {
			ids.AppendEmpty().SetInt(id)
		}
	}
	nested := s.Events().AppendEmpty()
	nested.SetName("ai.stream.finish")
	nested.Attributes().PutEmptyMap("payload").PutStr("ai.response.text", privacyPrompt)
	ex := s.Events().AppendEmpty()
	ex.SetName("exception")
	ex.Attributes().PutStr("exception.type", "ValueError")
	ex.Attributes().PutStr("gen_ai.completion", privacyPrompt)

	app := td.ResourceSpans().AppendEmpty()
	app.Resource().Attributes().PutStr("service.name", "chat-app")
	privacytest.AppendErrorSpans(app.ScopeSpans().AppendEmpty().Spans(),
		pcommon.TraceID{2, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, start, privacyPrompt)
	return td
}

// contentLogs are the log records GenAI instrumentations emit with content
// capture on (opentelemetry-instrumentation-openai-v2 utils.py @0047a962,
// util-genai span_utils.py @034b5c46): a gen_ai.user.message with a map
// body, a gen_ai.choice whose tool call carries arguments, a
// gen_ai.system.message named by the older event.name attribute with a JSON
// string body, and gen_ai.client.inference.operation.details with structured
// message attributes. Then an ordinary error log with a prompt in an
// attribute: it must arrive, without the attribute; and the record Python's
// logging handler makes of logger.exception() after a chat call whose error
// quotes the prompt (privacytest.AppendErrorLog).
func contentLogs() plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "chat-app")
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	now := pcommon.NewTimestampFromTime(time.Now())

	user := lrs.AppendEmpty()
	user.SetTimestamp(now)
	user.SetEventName("gen_ai.user.message")
	user.Attributes().PutStr("gen_ai.system", "openai")
	user.Body().SetEmptyMap().PutStr("content", privacyPrompt)

	choice := lrs.AppendEmpty()
	choice.SetTimestamp(now)
	choice.SetEventName("gen_ai.choice")
	body := choice.Body().SetEmptyMap()
	body.PutInt("index", 0)
	body.PutStr("finish_reason", "tool_calls")
	msg := body.PutEmptyMap("message")
	msg.PutStr("role", "assistant")
	fn := msg.PutEmptySlice("tool_calls").AppendEmpty().SetEmptyMap().PutEmptyMap("function")
	fn.PutStr("name", "lookup")
	fn.PutStr("arguments", `{"q":"`+privacyPrompt+`"}`)

	old := lrs.AppendEmpty()
	old.SetTimestamp(now)
	old.Attributes().PutStr("event.name", "gen_ai.system.message")
	old.Body().SetStr(`{"content":"` + privacyPrompt + `"}`)

	details := lrs.AppendEmpty()
	details.SetTimestamp(now)
	details.SetEventName("gen_ai.client.inference.operation.details")
	details.Attributes().PutStr("gen_ai.request.model", "llama")
	in := details.Attributes().PutEmptySlice("gen_ai.input.messages").AppendEmpty().SetEmptyMap()
	in.PutStr("role", "user")
	in.PutEmptySlice("parts").AppendEmpty().SetEmptyMap().PutStr("content", privacyPrompt)
	details.Attributes().PutStr("gen_ai.output.messages", privacyPrompt)

	nestedBody := lrs.AppendEmpty()
	nestedBody.SetTimestamp(now)
	nestedBody.Body().SetEmptyMap().PutEmptyMap("data").PutStr("gen_ai.prompt", privacyPrompt)
	nestedBody.Attributes().PutEmptyMap("gen_ai.request").PutStr("gen_ai.prompt", privacyPrompt)
	nestedBody.Attributes().PutStr("mlflow.spanInputs", privacyPrompt)

	marker := lrs.AppendEmpty()
	marker.SetTimestamp(now)
	marker.SetSeverityNumber(plog.SeverityNumberError)
	marker.Body().SetStr("PRIVACY-E2E-MARKER request failed")
	marker.Attributes().PutStr("gen_ai.prompt", privacyPrompt)
	marker.Attributes().PutStr("llm.input_messages.0.message.content", privacyPrompt)
	privacytest.AppendErrorLog(lrs, now.AsTime(), privacyPrompt)
	return ld
}

// contentMetrics is an engine gauge with a prompt as a datapoint attribute.
func contentMetrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "vllm")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("privacy_e2e_marker")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	dp.SetDoubleValue(1)
	dp.Attributes().PutStr("gen_ai.prompt", privacyPrompt)
	dp.Attributes().PutStr("gen_ai.request.model", "llama")
	// Issue #30: a kvlist and an array under unlisted keys became labels
	// (gen_ai_request="{\"gen_ai.prompt\":…}"), and resource attributes
	// became target_info labels.
	dp.Attributes().PutEmptyMap("gen_ai.request").PutStr("gen_ai.prompt", privacyPrompt)
	dp.Attributes().PutEmptySlice("messages").AppendEmpty().SetEmptyMap().PutStr("content", privacyPrompt)
	rm.Resource().Attributes().PutStr("app.last_prompt", privacyPrompt)
	rm.Resource().Attributes().PutEmptyMap("app.context").PutStr("prompt", privacyPrompt)
	return md
}

func httpText(addr, path string) (string, bool) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err == nil && resp.StatusCode == http.StatusOK
}

// TestPromptsReachNoExporter sends prompt text through OTLP logs (bodies,
// attributes and exception text), span attributes, events, status messages
// and exception events, and metric attributes into
// each shipped config, waits until the data carrying it has reached every
// place data leaves (the traces file, the Prometheus scrape, /signals, the
// Graphsignal upload and the collector's own output), and checks the prompt
// is in none of them.
func TestPromptsReachNoExporter(t *testing.T) {
	for _, cfg := range []string{"default.yaml", "graphsignal.yaml"} {
		t.Run(cfg, func(t *testing.T) {
			ports := e2etest.NewPorts(t)
			srv := graphsignaltest.NewServer(t)
			dataDir := t.TempDir()
			env := append(defaultEnv(t, ports, dataDir),
				"GRAPHSIGNAL_ENDPOINT="+srv.URL, "INFERPROF_METRICS_FLUSH_INTERVAL=1s")
			upload := cfg == "graphsignal.yaml"
			if upload {
				env = append(env, "GRAPHSIGNAL_API_KEY=privacy-key")
			}
			c := e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig(cfg)}, Env: env})

			otlp := ports.Addr("otlp_http")
			// Built in the instrumentations' shapes, sent with the Go SDK.
			sdkSendTraces(t, otlp, contentSpan(time.Now().Add(-2*time.Second)))
			sdkSendLogs(t, otlp, contentLogs())
			sdkSendGauges(t, otlp, contentMetrics())

			tracesPath := filepath.Join(dataDir, "inferprof-traces.jsonl")
			var scrape, signals string
			require.Eventually(t, func() bool {
				batches := readTraces(t, tracesPath)
				_, _, spanOut := findSpan(batches, "llm_request")
				_, _, errOut := findSpan(batches, "openai.chat")
				var ok1, ok2 bool
				scrape, ok1 = httpText(ports.Addr("prometheus"), "/metrics")
				signals, ok2 = httpText(ports.Addr("graphsignal_local"), "/signals")
				done := spanOut && errOut && ok1 && ok2 &&
					strings.Contains(scrape, "privacy_e2e_marker") &&
					strings.Contains(scrape, "gen_ai_server_time_to_first_token") &&
					strings.Contains(signals, "PRIVACY-E2E-MARKER") &&
					strings.Contains(signals, "privacy_e2e_marker")
				if upload {
					done = done && srv.Contains("PRIVACY-E2E-MARKER") && srv.Contains("privacy_e2e_marker")
				}
				return done
			}, 60*time.Second, 100*time.Millisecond, "the planted data never reached every exporter")

			file, err := os.ReadFile(tracesPath)
			require.NoError(t, err)
			assert.Contains(t, string(file), "cmpl-privacy-0", "the span itself is exported")
			assert.Contains(t, string(file), "exception", "the ordinary span event stays")
			errSpan, _, _ := findSpan(readTraces(t, tracesPath), "openai.chat")
			assert.Equal(t, ptrace.StatusCodeError, errSpan.Status().Code(), "the error status stays")
			assert.Equal(t, privacy.ErrorTextMarker, errSpan.Status().Message())
			assert.Contains(t, string(file), "openai.UnprocessableEntityError", "exception.type stays")
			assert.Contains(t, signals, "chat completion failed", "the error log record arrives")
			assert.Equal(t, upload, len(srv.Uploads()) > 0)
			for where, text := range map[string]string{
				"traces file": string(file), "Prometheus scrape": scrape, "/signals": signals,
				"collector output (debug exporter)": c.Output(),
			} {
				assert.Falsef(t, strings.Contains(text, "PRIVACY-E2E-PROMPT"), "the prompt reached the %s", where)
				assert.Falsef(t, strings.Contains(text, privacyTokenID), "output token ids reached the %s", where)
			}
			assert.False(t, srv.Contains("PRIVACY-E2E-PROMPT"), "the prompt reached the Graphsignal upload bodies")
			assert.False(t, srv.Contains(privacyTokenID), "output token ids reached the Graphsignal upload bodies")
			assert.NotContains(t, scrape, "gen_ai_request=", "a kvlist became a Prometheus label")
			assert.NotContains(t, scrape, "messages=", "an array became a Prometheus label")
			assert.NotContains(t, scrape, "app_last_prompt", "an unlisted resource attribute became a target_info label")

			// The privacy processor says what it removed.
			tel, ok := httpText(ports.Addr("telemetry"), "/metrics")
			require.True(t, ok)
			for _, m := range []string{"otelcol_processor_privacy_removed_attributes", "otelcol_processor_privacy_removed_events", "otelcol_processor_privacy_removed_bodies", "otelcol_processor_privacy_removed_error_texts"} {
				assert.Truef(t, strings.Contains(tel, m), "%s missing from the collector's telemetry", m)
			}
			c.Stop()
		})
	}
}

// TestShippedPipelinesScrubFirst: in each shipped config, every pipeline fed
// by a receiver from outside has privacy right after memory_limiter, so no
// later processor or exporter of that pipeline sees content. Pipelines fed
// only by connectors carry data that already passed it.
func TestShippedPipelinesScrubFirst(t *testing.T) {
	for _, cfg := range []string{"default.yaml", "graphsignal.yaml", "agent.yaml", "gateway.yaml"} {
		s := loadShipped(t, cfg)
		require.Contains(t, s.Processors, "privacy", cfg)
		for name, p := range s.Service.Pipelines {
			external := slices.ContainsFunc(p.Receivers, func(r string) bool { _, conn := s.Connectors[r]; return !conn })
			if !external {
				continue
			}
			require.GreaterOrEqualf(t, len(p.Processors), 2, "%s pipeline %s", cfg, name)
			assert.Equalf(t, []string{"memory_limiter", "privacy"}, p.Processors[:2], "%s pipeline %s", cfg, name)
		}
	}
}
