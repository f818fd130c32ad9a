// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package privacyprocessor

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/inferprof/inferprof/internal/privacy"
	"github.com/inferprof/inferprof/internal/privacy/privacytest"
	"github.com/inferprof/inferprof/processor/privacyprocessor/internal/metadata"
	"github.com/inferprof/inferprof/processor/privacyprocessor/internal/metadatatest"
)

func TestConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	tests := []struct {
		id      component.ID
		want    *Config
		wantErr string
	}{
		{id: component.NewID(metadata.Type), want: &Config{Attributes: privacy.Attributes, Events: privacy.Events}},
		{id: component.NewIDWithName(metadata.Type, "custom"), want: &Config{
			Attributes: []string{"gen_ai.prompt*", "myapp.user_text"}, Events: []string{"gen_ai.user.message"},
		}},
		{id: component.NewIDWithName(metadata.Type, "empty"), wantErr: "attributes is empty"},
		{id: component.NewIDWithName(metadata.Type, "star"), wantErr: `attributes: pattern "*" matches everything`},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			err = confmap.Validate(cfg)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg)
		})
	}
}

const secret = "SECRET-PROMPT write a poem"

// TestEverySignal runs the processor as a pipeline would, on each signal, and
// checks both the data that reaches the next consumer and the counters.
func TestEverySignal(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	f := NewFactory()
	cfg := f.CreateDefaultConfig()
	set := metadatatest.NewSettings(tel)
	host := componenttest.NewNopHost()

	traces := new(consumertest.TracesSink)
	tp, err := f.CreateTraces(t.Context(), set, cfg, traces)
	require.NoError(t, err)
	logs := new(consumertest.LogsSink)
	lp, err := f.CreateLogs(t.Context(), set, cfg, logs)
	require.NoError(t, err)
	metrics := new(consumertest.MetricsSink)
	mp, err := f.CreateMetrics(t.Context(), set, cfg, metrics)
	require.NoError(t, err)
	for _, c := range []component.Component{tp, lp, mp} {
		require.NoError(t, c.Start(t.Context(), host))
	}

	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.Attributes().PutStr("gen_ai.input.messages", secret)
	span.Attributes().PutInt("gen_ai.usage.input_tokens", 12)
	span.Events().AppendEmpty().SetName("gen_ai.choice")
	require.NoError(t, tp.ConsumeTraces(t.Context(), td))

	ld := plog.NewLogs()
	lr := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetEventName("gen_ai.user.message")
	lr.Body().SetEmptyMap().PutStr("content", secret)
	lr.Attributes().PutStr("gen_ai.prompt", secret)
	require.NoError(t, lp.ConsumeLogs(t.Context(), ld))

	md := pmetric.NewMetrics()
	dp := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty()
	dp.Attributes().PutStr("gen_ai.prompt", secret)
	dp.Attributes().PutStr("gen_ai.request.model", "llama")
	require.NoError(t, mp.ConsumeMetrics(t.Context(), md))

	require.Len(t, traces.AllTraces(), 1)
	gotSpan := traces.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	assert.Equal(t, map[string]any{"gen_ai.usage.input_tokens": int64(12)}, gotSpan.Attributes().AsRaw())
	assert.Equal(t, 0, gotSpan.Events().Len())
	require.Len(t, logs.AllLogs(), 1)
	gotLog := logs.AllLogs()[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	assert.Empty(t, gotLog.Body().AsRaw())
	assert.Equal(t, "gen_ai.user.message", gotLog.EventName())
	assert.Equal(t, 0, gotLog.Attributes().Len())
	require.Len(t, metrics.AllMetrics(), 1)
	gotDP := metrics.AllMetrics()[0].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0)
	assert.Equal(t, map[string]any{"gen_ai.request.model": "llama"}, gotDP.Attributes().AsRaw())

	opts := []metricdatatest.Option{metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars()}
	metadatatest.AssertEqualProcessorPrivacyRemovedAttributes(t, tel, []metricdata.DataPoint[int64]{{Value: 3}}, opts...)
	metadatatest.AssertEqualProcessorPrivacyRemovedEvents(t, tel, []metricdata.DataPoint[int64]{{Value: 1}}, opts...)
	metadatatest.AssertEqualProcessorPrivacyRemovedBodies(t, tel, []metricdata.DataPoint[int64]{{Value: 1}}, opts...)
	for _, c := range []component.Component{tp, lp, mp} {
		require.NoError(t, c.Shutdown(t.Context()))
	}
}

// TestErrorText: the spans and log record a failed chat call leaves, with the
// model's output quoted in the error (privacytest, which cites the
// instrumentations), leave the processor with their status codes and
// exception types, without the text, and the processor counts each text.
func TestErrorText(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	f := NewFactory()
	set := metadatatest.NewSettings(tel)
	traces := new(consumertest.TracesSink)
	tp, err := f.CreateTraces(t.Context(), set, f.CreateDefaultConfig(), traces)
	require.NoError(t, err)
	logs := new(consumertest.LogsSink)
	lp, err := f.CreateLogs(t.Context(), set, f.CreateDefaultConfig(), logs)
	require.NoError(t, err)
	for _, c := range []component.Component{tp, lp} {
		require.NoError(t, c.Start(t.Context(), componenttest.NewNopHost()))
	}

	now := time.Now()
	td := ptrace.NewTraces()
	spans := privacytest.AppendErrorSpans(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans(), pcommon.TraceID{7}, now, secret)
	require.NoError(t, tp.ConsumeTraces(t.Context(), td))
	ld := plog.NewLogs()
	privacytest.AppendErrorLog(ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords(), now, secret)
	require.NoError(t, lp.ConsumeLogs(t.Context(), ld))

	require.Len(t, traces.AllTraces(), 1)
	var tm ptrace.JSONMarshaler
	b, err := tm.MarshalTraces(traces.AllTraces()[0])
	require.NoError(t, err)
	assert.NotContains(t, string(b), "SECRET")
	got := traces.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	require.Equal(t, len(spans), got.Len())
	for _, s := range got.All() {
		assert.Equal(t, ptrace.StatusCodeError, s.Status().Code())
		assert.Equal(t, privacy.ErrorTextMarker, s.Status().Message())
	}
	require.Len(t, logs.AllLogs(), 1)
	var lm plog.JSONMarshaler
	b, err = lm.MarshalLogs(logs.AllLogs()[0])
	require.NoError(t, err)
	assert.NotContains(t, string(b), "SECRET")
	assert.Contains(t, string(b), "openai.UnprocessableEntityError")

	// 4 status messages, 3 exception events and the log record, each with a
	// message and a stacktrace.
	opts := []metricdatatest.Option{metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars()}
	metadatatest.AssertEqualProcessorPrivacyRemovedErrorTexts(t, tel, []metricdata.DataPoint[int64]{{Value: 4 + 3*2 + 2}}, opts...)
	for _, c := range []component.Component{tp, lp} {
		require.NoError(t, c.Shutdown(t.Context()))
	}
}
