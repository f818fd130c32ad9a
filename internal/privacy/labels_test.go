// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package privacy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIsLabelResourceAttribute(t *testing.T) {
	for _, k := range []string{"service.name", "host.name", "process.pid", "k8s.pod.name", "k8s.deployment.uid", "hw.id", "nvidia.gpu.index", "inferprof.activity.source", "deployment.environment.name"} {
		assert.True(t, IsLabelResourceAttribute(k), k)
	}
	for _, k := range []string{"app.secret", "gen_ai.prompt", "process.command_line", "process.command_args", "vllm.process_id", "k8s.pod.labels", "service.name.extra", "xservice.name", ""} {
		assert.False(t, IsLabelResourceAttribute(k), k)
	}
}

// TestConfigsHoldTheLabelList: every shipped config's transform/labels
// keeps exactly LabelResourceAttributes, so target_info and Graphsignal
// tags follow one list.
func TestConfigsHoldTheLabelList(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "*.yaml"))
	require.NoError(t, err)
	want := `keep_matching_keys(attributes, "` + strings.ReplaceAll(LabelResourceAttributes, `\`, `\\`) + `")`
	found := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "keep_matching_keys(") {
				found++
				assert.Contains(t, line, want, "%s: transform/labels is not privacy.LabelResourceAttributes", f)
			}
		}
	}
	assert.GreaterOrEqual(t, found, 2, "default.yaml and graphsignal.yaml hold the list")
}
