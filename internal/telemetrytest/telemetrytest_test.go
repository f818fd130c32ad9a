// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package telemetrytest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
)

func TestSum(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metadata.yaml")
	require.NoError(t, os.WriteFile(path, []byte("type: x\ntelemetry:\n  metrics:\n    receiver_x_records:\n      enabled: true\n"), 0o600))
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	c := NewCounters(t, tel, path)
	assert.Zero(t, c.Sum(t, "receiver_x_records"), "declared and not yet counted")

	counter, err := tel.NewTelemetrySettings().MeterProvider.Meter("x").Int64Counter("otelcol_receiver_x_records")
	require.NoError(t, err)
	counter.Add(t.Context(), 3)
	counter.Add(t.Context(), 4)
	assert.Equal(t, int64(7), c.Sum(t, "receiver_x_records"))

	// A misspelt name fails instead of reading 0.
	rec := &recorder{TB: t}
	c.Sum(rec, "receiver_x_record")
	assert.True(t, rec.failed)
	assert.Contains(t, rec.msg, `"receiver_x_record" is not a telemetry metric`)
}

// recorder is a testing.TB that records a failure instead of ending the test.
type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}
func (r *recorder) FailNow() { r.failed = true }
