// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !cgo

package nvmlreceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/inferprof/inferprof/receiver/nvmlreceiver/internal/metadata"
)

// Run with CGO_ENABLED=0 go test ./receiver/nvmlreceiver/: without cgo the receiver warns and idles.
func TestNoCgoWarnsAndIdles(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	sink := new(consumertest.MetricsSink)
	r, err := NewFactory().CreateMetrics(t.Context(), set, createDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, r.Start(t.Context(), componenttest.NewNopHost()))
	require.NoError(t, r.Shutdown(t.Context()))
	assert.Equal(t, 1, logs.FilterMessageSnippet("built without cgo").Len())
	assert.Zero(t, sink.DataPointCount())
}
