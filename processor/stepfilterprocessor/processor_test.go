// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepfilterprocessor

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/processor/stepfilterprocessor/internal/metadata"
	"github.com/inferprof/inferprof/processor/stepfilterprocessor/internal/metadatatest"
)

func TestConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	tests := []struct {
		id      component.ID
		want    *Config
		wantErr string
	}{
		{id: component.NewID(metadata.Type), want: &Config{SpanNames: []string{names.SpanEngineStep}}},
		{id: component.NewIDWithName(metadata.Type, "custom"), want: &Config{SpanNames: []string{"engine.step", "scheduler.tick"}}},
		{id: component.NewIDWithName(metadata.Type, "empty"), wantErr: "span_names: must name at least one span"},
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

func traces(spanNames ...[]string) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, group := range spanNames {
		ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
		for _, n := range group {
			ss.Spans().AppendEmpty().SetName(n)
		}
	}
	return td
}

func TestDropsOnlyNamedSpans(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	sink := new(consumertest.TracesSink)
	p, err := NewFactory().CreateTraces(t.Context(), metadatatest.NewSettings(tel), NewFactory().CreateDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(t.Context(), componenttest.NewNopHost()))

	// A resource of steps only disappears; a mixed one keeps its request span.
	require.NoError(t, p.ConsumeTraces(t.Context(), traces(
		[]string{names.SpanEngineStep, names.SpanEngineStep},
		[]string{"llm_request", names.SpanEngineStep},
	)))
	require.Len(t, sink.AllTraces(), 1)
	got := sink.AllTraces()[0]
	require.Equal(t, 1, got.ResourceSpans().Len())
	require.Equal(t, 1, got.SpanCount())
	assert.Equal(t, "llm_request", got.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Name())

	// A batch of steps only is not passed on at all.
	require.NoError(t, p.ConsumeTraces(t.Context(), traces([]string{names.SpanEngineStep})))
	assert.Len(t, sink.AllTraces(), 1)

	metadatatest.AssertEqualProcessorStepFilterDroppedSpans(t, tel, []metricdata.DataPoint[int64]{{Value: 4}}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	require.NoError(t, p.Shutdown(t.Context()))
}
