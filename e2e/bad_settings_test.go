// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// TestBadFlushIntervalIsRefused: INFERPROF_METRICS_FLUSH_INTERVAL=15 (no
// unit) used to run a 15ns flush ticker that kept a core busy; a value that
// is no duration was reported without the value. Both now stop startup with
// an error that names the key and the value.
func TestBadFlushIntervalIsRefused(t *testing.T) {
	for value, want := range map[string]string{
		"15":  "metrics_flush_interval: 15ns is below the minimum of 100ms; did you forget a unit, e.g. 15s?",
		"abc": `metrics_flush_interval: "abc" is not a duration`,
	} {
		t.Run(value, func(t *testing.T) {
			ports := e2etest.NewPorts(t)
			env := append(defaultEnv(t, ports, t.TempDir()), "INFERPROF_METRICS_FLUSH_INTERVAL="+value)
			c := e2etest.Launch(t, e2etest.Options{ConfigFiles: []string{shippedConfig("default.yaml")}, Env: env})
			assert.NotEqual(t, 0, c.Wait(2*time.Minute), "the collector started with metrics_flush_interval %q", value)
			assert.Contains(t, c.Output(), want)
		})
	}
}
