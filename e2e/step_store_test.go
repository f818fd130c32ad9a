// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// A step_store reference to an extension the config does not declare, or
// to one that is not a step store, stops the built collector at Start with
// an error naming the component's key and the id.
func TestStepStoreReferenceErrors(t *testing.T) {
	for name, tc := range map[string]struct{ receiverRef, processorRef, want string }{
		"missing": {
			receiverRef: "step_store/other", processorRef: "step_store",
			want: `step_store: extension "step_store/other" not found; add it under extensions and service.extensions`,
		},
		"wrong type": {
			receiverRef: "step_store", processorRef: "health_check",
			want: `gpu.step_store: extension "health_check" is not a step_store extension`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			ports := e2etest.NewPorts(t)
			cfg := e2etest.Render(t, ports, t.TempDir(), fmt.Sprintf(`
extensions:
  step_store: {}
  health_check:
    endpoint: {{addr "health"}}
receivers:
  engine_step:
    endpoint: %s
    step_store: %s
processors:
  step_figures:
    gpu:
      step_store: %s
exporters:
  debug: {}
service:
  extensions: [step_store, health_check]
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [engine_step]
      processors: [step_figures]
      exporters: [debug]
`, filepath.Join(socketDir(t), "step.sock"), tc.receiverRef, tc.processorRef))
			c := e2etest.Launch(t, e2etest.Options{Config: cfg})
			assert.NotEqual(t, 0, c.Wait(2*time.Minute), "the collector started")
			assert.Contains(t, c.Output(), tc.want)
		})
	}
}
