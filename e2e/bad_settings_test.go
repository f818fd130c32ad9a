// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// TestOldInferenceKeysNameTheirNewComponent: a config written before the
// inference processor was split (its privacy block, its engine_steps and gpu
// blocks, the agent tier's defer_figures, its agents and prices) stops
// startup, and the error names the component that does the job now.
func TestOldInferenceKeysNameTheirNewComponent(t *testing.T) {
	for name, tc := range map[string]struct{ overlay, want string }{
		"privacy":       {"processors:\n  inference:\n    privacy:\n      keep_content: false\n", "content removal is the privacy processor's job"},
		"engine_steps":  {"processors:\n  inference:\n    engine_steps:\n      enabled: false\n", "the step_figures processor's job"},
		"gpu":           {"processors:\n  inference:\n    gpu:\n      wait: 2s\n", "the step_figures processor's job"},
		"defer_figures": {"processors:\n  inference:\n    defer_figures: true\n", "a node agent runs the step_figures processor in place of inference"},
		"agents":        {"processors:\n  inference:\n    agents:\n      wait: 1s\n", "agent runs and cost are the agent_run processor's job"},
		"prices":        {"processors:\n  inference:\n    prices:\n      m: {input: 1, output: 2, currency: USD}\n", "agent runs and cost are the agent_run processor's job"},
	} {
		t.Run(name, func(t *testing.T) {
			ports := e2etest.NewPorts(t)
			overlay := filepath.Join(t.TempDir(), "old.yaml")
			require.NoError(t, os.WriteFile(overlay, []byte(tc.overlay), 0o600))
			c := e2etest.Launch(t, e2etest.Options{
				ConfigFiles: []string{shippedConfig("default.yaml"), overlay},
				Env:         defaultEnv(t, ports, t.TempDir()),
			})
			assert.NotEqual(t, 0, c.Wait(2*time.Minute), "the collector started with inference.%s", name)
			assert.Contains(t, c.Output(), `"`+name+`" is no longer a key of this processor`)
			assert.Contains(t, c.Output(), tc.want)
		})
	}
}
