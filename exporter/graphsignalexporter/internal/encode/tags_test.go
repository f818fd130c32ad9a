// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package encode

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"google.golang.org/protobuf/proto"

	"github.com/inferprof/inferprof/internal/privacy"
)

func TestEnvTags(t *testing.T) {
	got := EnvTags([]string{"GRAPHSIGNAL_TAG_DEPLOYMENT=prod", "GRAPHSIGNAL_TAG_Team=ml", "GRAPHSIGNAL_TAG_=x", "HOME=/root", "GRAPHSIGNAL_API_KEY=k"})
	assert.Equal(t, map[string]string{"deployment": "prod", "team": "ml"}, got)
}

func TestConfigTagsWinAndLimits(t *testing.T) {
	long := strings.Repeat("é", 300)
	e := New(map[string]string{"deployment": "env", strings.Repeat("k", 60): long}, map[string]string{"deployment": "cfg"}, "0123456789ab", time.Now)
	tags := map[string]string{}
	for _, tg := range e.GlobalTags() {
		tags[tg.Key] = tg.Value
	}
	assert.Equal(t, "cfg", tags["deployment"])
	assert.Equal(t, "0123456789ab", tags["instance.id"])
	v, ok := tags[strings.Repeat("k", MaxTagKey)]
	require.True(t, ok, "key cut at 50 characters")
	assert.Equal(t, strings.Repeat("é", MaxTagValue), v, "value cut at 250 characters, not bytes")

	md := pmetric.NewMetrics()
	dp := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty()
	dp.Attributes().PutStr("x", long)
	_, st := e.Metrics(md)
	assert.Equal(t, 1, st.Truncated, "the attribute value; global tags were cut once, up front")
}

func TestIsContent(t *testing.T) {
	for _, k := range []string{"gen_ai.prompt", "gen_ai.completion", "gen_ai.input.messages", "GEN_AI.PROMPT.0.content", "input.value", "gen_ai.system_instructions", "gen_ai.user.message"} {
		assert.True(t, IsContent(k), k)
	}
	for _, k := range []string{"gen_ai.request.model", "exception.message", "hw.id", "gen_ai.usage.input_tokens"} {
		assert.False(t, IsContent(k), k)
	}
}

func TestInvalidUTF8IsRepaired(t *testing.T) {
	bad := "gpu\xff\xfe"
	e := New(nil, nil, "0123456789ab", time.Now)
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("host.name", bad)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(bad)
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.Attributes().PutStr(bad, bad)
	req, _ := e.Metrics(md)
	_, err := proto.Marshal(req)
	require.NoError(t, err, "protobuf refuses invalid UTF-8 in strings")
	assert.Equal(t, "gpu\uFFFD", req.Metrics[0].Name)

	ld := plog.NewLogs()
	lr := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.Body().SetStr(bad)
	lr.Attributes().PutStr("exception.stacktrace", bad)
	lreq, _ := e.Logs(ld)
	_, err = proto.Marshal(lreq)
	require.NoError(t, err)
}

// TestLogContentNeverEncoded: a prompt in a content event's body or in a
// map body's content key is not uploaded, even when no privacy processor
// ran before the exporter; other logs keep their message.
func TestLogContentNeverEncoded(t *testing.T) {
	const prompt = "my secret prompt"
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	ev := lrs.AppendEmpty()
	ev.SetEventName("gen_ai.user.message")
	ev.Body().SetStr(prompt)
	old := lrs.AppendEmpty()
	old.Attributes().PutStr("event.name", "gen_ai.choice")
	old.Body().SetStr(prompt)
	structured := lrs.AppendEmpty()
	structured.Body().SetEmptyMap().PutStr("gen_ai.prompt", prompt)
	structured.Body().Map().PutStr("status", "ok")
	plain := lrs.AppendEmpty()
	plain.Body().SetStr("engine started")
	// The Python logging handler's record of a failed call: str(e) of the
	// openai client's error, which quotes the server's body (the shapes in
	// internal/privacy/privacytest cite their sources).
	failed := lrs.AppendEmpty()
	failed.Body().SetStr("chat call failed")
	failed.Attributes().PutStr("exception.type", "openai.BadRequestError")
	failed.Attributes().PutStr("exception.message", "Error code: 400 - {'message': '"+prompt+"'}")
	failed.Attributes().PutStr("exception.stacktrace", "Traceback (most recent call last):\nopenai.BadRequestError: "+prompt)

	req, _ := New(nil, nil, "0123456789ab", time.Now).Logs(ld)
	body, err := proto.Marshal(req)
	require.NoError(t, err)
	assert.NotContains(t, string(body), prompt)
	var msgs, excs []string
	for _, lb := range req.LogBatches {
		for _, le := range lb.LogEntries {
			msgs = append(msgs, le.Message)
			excs = append(excs, le.Exception)
		}
	}
	assert.Len(t, msgs, 3, "the two content events are not sent")
	assert.Contains(t, excs, "openai.BadRequestError: "+privacy.ErrorTextMarker, "the type stays, the error text does not")
	assert.Contains(t, msgs, "engine started")
	assert.Contains(t, strings.Join(msgs, " "), "status")
}

// TestUnknownResourceAttributeIsNoTag: resource attributes become tags (of
// metrics, logs and host/process resources) only from the allow-list
// privacy.LabelResourceAttributes, also with no transform/labels before the
// exporter. An application's own attribute, a command line or a JSON blob
// never does (issue #30).
func TestUnknownResourceAttributeIsNoTag(t *testing.T) {
	const secret = "summarise my private medical notes"
	unknown := map[string]any{
		"app.customer_note":    secret,
		"process.command_line": "python serve.py --prompt '" + secret + "'",
		"vllm.request":         `{"prompt":"` + secret + `"}`,
		"service.name.x":       secret,
	}
	known := map[string]any{"service.name": "vllm", "host.name": "gpu-1", "process.pid": int64(42), "k8s.pod.name": "vllm-0", "os.type": "linux"}
	for _, names := range []Names{NamesSource, NamesGraphsignal} {
		gs := names == NamesGraphsignal
		e := New(nil, nil, "0123456789ab", time.Now, WithNames(names))
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		require.NoError(t, rm.Resource().Attributes().FromRaw(known))
		for k, v := range unknown {
			rm.Resource().Attributes().PutStr(k, v.(string))
		}
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName("inferprof.server.requests")
		m.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(1)
		req, _ := e.Metrics(md)
		body, err := proto.Marshal(req)
		require.NoError(t, err)
		assert.NotContains(t, string(body), secret, "graphsignal names %v", gs)
		keys := map[string]bool{}
		for _, met := range req.Metrics {
			for _, tg := range met.Tags {
				keys[tg.Key] = true
			}
		}
		for _, res := range req.Resources {
			for _, tg := range res.Tags {
				keys[tg.Key] = true
			}
			for _, a := range res.Attributes {
				keys[a.Name] = true
			}
		}
		for k := range unknown {
			assert.False(t, keys[k], "%s became a tag (graphsignal names %v)", k, gs)
		}
		assert.NotEmpty(t, keys, "allow-listed attributes still tag")

		ld := plog.NewLogs()
		rl := ld.ResourceLogs().AppendEmpty()
		require.NoError(t, rl.Resource().Attributes().FromRaw(known))
		for k, v := range unknown {
			rl.Resource().Attributes().PutStr(k, v.(string))
		}
		rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("engine started")
		lreq, _ := e.Logs(ld)
		lbody, err := proto.Marshal(lreq)
		require.NoError(t, err)
		assert.NotContains(t, string(lbody), secret, "logs, graphsignal names %v", gs)
		assert.Contains(t, string(lbody), "vllm-0", "an allow-listed attribute still tags a log")
	}
}
