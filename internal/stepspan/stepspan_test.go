// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepspan

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/stepspan/internal/metadatatest"
)

func stepSpan(attrs map[string]any) ptrace.Span {
	s := ptrace.NewSpan()
	s.SetName(names.SpanEngineStep)
	s.SetStartTimestamp(100)
	s.SetEndTimestamp(200)
	if err := s.Attributes().FromRaw(attrs); err != nil {
		panic(err)
	}
	return s
}

func TestReadGoodStep(t *testing.T) {
	var st Step
	require.True(t, Read(stepSpan(map[string]any{
		names.AttrStepIndex:         7,
		names.AttrStepBatch:         3.0, // OTLP/JSON senders give whole doubles
		names.AttrThreadID:          4242,
		names.AttrStepScheduledToks: 512,
		names.AttrStepPrefillReqs:   1,
		names.AttrStepDecodeReqs:    15,
		names.AttrStepRunningReqs:   16,
		names.AttrStepWaitingReqs:   0,
		names.AttrStepPreempted:     []any{"a", "b"},
		names.AttrStepKVCacheUsage:  0.25,
		names.AttrStepRequestIDs:    []any{"r1", "r2"},
		names.AttrStepRequestTokens: []any{1, 4},
		names.AttrStepIDsTruncated:  true,
		names.AttrStepLaunchStarts:  []any{110, 150},
		names.AttrStepLaunchEnds:    []any{120, 160},
		names.AttrStepLaunchThreads: []any{4242, 0},
	}), &st, All))
	assert.Equal(t, Step{
		StartUnixNs: 100, EndUnixNs: 200,
		Index: 7, Batch: 3, ThreadID: 4242, ScheduledTokens: 512, PrefillRequests: 1, DecodeRequests: 15,
		RunningRequests: 16, WaitingRequests: 0, Preempted: 2, KVCacheUsage: 0.25,
		RequestIDs: []string{"r1", "r2"}, RequestTokens: []int64{1, 4}, Truncated: true,
		Windows: []Window{{Start: 110, End: 120, ThreadID: 4242}, {Start: 150, End: 160}},
	}, st)
}

func TestReadAbsent(t *testing.T) {
	var st Step
	require.True(t, Read(stepSpan(nil), &st, All))
	for _, v := range []int64{st.Index, st.Batch, st.ThreadID, st.ScheduledTokens, st.PrefillRequests,
		st.DecodeRequests, st.RunningRequests, st.WaitingRequests, st.Preempted} {
		assert.Equal(t, int64(Absent), v)
	}
	assert.True(t, math.IsNaN(st.KVCacheUsage))
	assert.Nil(t, st.Windows)
	assert.Empty(t, st.RequestIDs)
	assert.Zero(t, st.Bad, "absent is not bad")

	other := ptrace.NewSpan()
	other.SetName("llm_request")
	st.Index = 9
	require.False(t, Read(other, &st, All))
	assert.Equal(t, int64(9), st.Index, "another span leaves dst alone")
}

// One rule for every bad value: the attribute reads as absent and counts.
func TestReadBadValues(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs map[string]any
		check func(*testing.T, *Step)
	}{
		{"fractional index", map[string]any{names.AttrStepIndex: 2.5}, func(t *testing.T, s *Step) { assert.Equal(t, int64(Absent), s.Index) }},
		{"negative tokens", map[string]any{names.AttrStepScheduledToks: -1}, func(t *testing.T, s *Step) { assert.Equal(t, int64(Absent), s.ScheduledTokens) }},
		{"string count", map[string]any{names.AttrStepDecodeReqs: "8"}, func(t *testing.T, s *Step) { assert.Equal(t, int64(Absent), s.DecodeRequests) }},
		{"NaN double", map[string]any{names.AttrStepPrefillReqs: math.NaN()}, func(t *testing.T, s *Step) { assert.Equal(t, int64(Absent), s.PrefillRequests) }},
		{"huge double", map[string]any{names.AttrStepBatch: 1e19}, func(t *testing.T, s *Step) { assert.Equal(t, int64(Absent), s.Batch) }},
		{"infinite kv", map[string]any{names.AttrStepKVCacheUsage: math.Inf(1)}, func(t *testing.T, s *Step) { assert.True(t, math.IsNaN(s.KVCacheUsage)) }},
		{"non-bool truncated", map[string]any{names.AttrStepIDsTruncated: "yes"}, func(t *testing.T, s *Step) { assert.False(t, s.Truncated) }},
		{"ids not a list", map[string]any{names.AttrStepRequestIDs: "r1"}, func(t *testing.T, s *Step) { assert.Empty(t, s.RequestIDs) }},
		{"an id not a string", map[string]any{names.AttrStepRequestIDs: []any{"r1", 2}}, func(t *testing.T, s *Step) { assert.Empty(t, s.RequestIDs) }},
		{"a double token", map[string]any{names.AttrStepRequestIDs: []any{"r1"}, names.AttrStepRequestTokens: []any{1.5}}, func(t *testing.T, s *Step) {
			assert.Equal(t, []string{"r1"}, s.RequestIDs)
			assert.Empty(t, s.RequestTokens)
		}},
		{"windows of other lengths", map[string]any{names.AttrStepLaunchStarts: []any{1, 2}, names.AttrStepLaunchEnds: []any{3}, names.AttrStepLaunchThreads: []any{0, 0}}, func(t *testing.T, s *Step) { assert.Nil(t, s.Windows) }},
		{"window ends first", map[string]any{names.AttrStepLaunchStarts: []any{5}, names.AttrStepLaunchEnds: []any{3}, names.AttrStepLaunchThreads: []any{0}}, func(t *testing.T, s *Step) { assert.Nil(t, s.Windows) }},
		{"one window list", map[string]any{names.AttrStepLaunchStarts: []any{5}}, func(t *testing.T, s *Step) { assert.Nil(t, s.Windows) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st Step
			require.True(t, Read(stepSpan(tc.attrs), &st, All))
			assert.Equal(t, 1, st.Bad)
			assert.NotEmpty(t, st.BadKey)
			tc.check(t, &st)
		})
	}
}

// The slices are reused: a second Read does not keep the first's values.
func TestReadReusesSlices(t *testing.T) {
	var st Step
	require.True(t, Read(stepSpan(map[string]any{names.AttrStepRequestIDs: []any{"a", "b", "c"}}), &st, All))
	first := &st.RequestIDs[0]
	require.True(t, Read(stepSpan(map[string]any{names.AttrStepRequestIDs: []any{"d"}}), &st, All))
	assert.Equal(t, []string{"d"}, st.RequestIDs)
	assert.Same(t, first, &st.RequestIDs[0], "the first read's array is reused")
}

// The Reader counts every bad value and logs once, with the key, never a
// value (request ids are step attributes).
func TestReaderCountsAndLogsOnce(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	set := tel.NewTelemetrySettings()
	core, logs := observer.New(zap.InfoLevel)
	set.Logger = zap.New(core)
	r, err := NewReader(set)
	require.NoError(t, err)
	defer r.Shutdown()
	var st Step
	for range 3 {
		require.True(t, r.Read(t.Context(), stepSpan(map[string]any{
			names.AttrStepIndex: -4, names.AttrStepRequestIDs: []any{"secret-request", 1},
		}), &st, All))
	}
	metadatatest.AssertEqualEngineStepBadAttributes(t, tel, []metricdata.DataPoint[int64]{{Value: 6}}, metricdatatest.IgnoreTimestamp())
	require.Equal(t, 1, logs.Len())
	assert.NotContains(t, logs.All()[0].Message, "secret")
	assert.Equal(t, map[string]any{"attribute": st.BadKey}, logs.All()[0].ContextMap())
}
