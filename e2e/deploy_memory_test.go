// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// gomemlimitShare is GOMEMLIMIT's share of the container's memory limit,
// and memory_limiter's limit_percentage in the shipped configs: the Go
// runtime's memory then stays at memory_limiter's limit.
const gomemlimitShare = 80

// memBytes reads a Kubernetes memory quantity (2Gi, 512Mi, 1G, 1048576).
func memBytes(t *testing.T, q string) float64 {
	t.Helper()
	units := []struct {
		suffix string
		mult   float64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(q, u.suffix); ok {
			v, err := strconv.ParseFloat(n, 64)
			require.NoError(t, err, "memory quantity %q", q)
			return v * u.mult
		}
	}
	v, err := strconv.ParseFloat(q, 64)
	require.NoError(t, err, "memory quantity %q", q)
	return v
}

// chartGOMEMLIMIT is what the collector chart's useGOMEMLIMIT sets for a
// memory limit: its "opentelemetry-collector.gomemlimit" template
// (open-telemetry/opentelemetry-helm-charts,
// charts/opentelemetry-collector/templates/_helpers.tpl at dd5665c06f37,
// chart 0.170.0): 80% of the limit in bytes, in whole MiB, rounded down.
func chartGOMEMLIMIT(t *testing.T, limit string) string {
	return fmt.Sprintf("%dMiB", int64(math.Floor(memBytes(t, limit)*0.8/(1<<20))))
}

// TestDeployMemory checks that every workload under deploy/ runs the
// collector with GOMEMLIMIT at 80% of its container's memory limit, the
// share memory_limiter takes in the config it runs.
func TestDeployMemory(t *testing.T) {
	docs := deployDocs(t)
	root := e2etest.RepoRoot()
	for _, cfg := range []string{"agent.yaml", "gateway.yaml"} {
		b, err := os.ReadFile(filepath.Join(root, "config", cfg))
		require.NoError(t, err)
		var c obj
		require.NoError(t, yaml.Unmarshal(b, &c))
		assert.Equal(t, gomemlimitShare, get(c, "processors", "memory_limiter", "limit_percentage"),
			"config/%s: memory_limiter's limit_percentage is GOMEMLIMIT's share of the container", cfg)
	}

	manifest := map[string]string{} // workload → GOMEMLIMIT
	for _, m := range []struct{ file, kind, name string }{
		{"manifests/agent-daemonset.yaml", "DaemonSet", "inferprof-agent"},
		{"manifests/gateway.yaml", "Deployment", "inferprof-gateway"},
	} {
		w := byKind(docs[m.file], m.kind, m.name)
		require.NotNil(t, w, m.file)
		c := getList(w, "spec", "template", "spec", "containers")[0]
		limit := getStr(c, "resources", "limits", "memory")
		require.NotEmpty(t, limit, "%s: the collector container needs a memory limit", m.file)
		env := envOf(getList(c, "env"), nil)
		assert.Equal(t, chartGOMEMLIMIT(t, limit), env["GOMEMLIMIT"], "%s: GOMEMLIMIT is 80%% of limits.memory %s", m.file, limit)
		manifest[m.name] = env["GOMEMLIMIT"]
	}

	for _, h := range []string{"helm/agent-values.yaml", "helm/gateway-values.yaml"} {
		v := docs[h][0]
		assert.Equal(t, true, get(v, "useGOMEMLIMIT"), "%s: the chart sets GOMEMLIMIT from limits.memory", h)
		limit := getStr(v, "resources", "limits", "memory")
		require.NotEmpty(t, limit, "%s: useGOMEMLIMIT needs resources.limits.memory", h)
		for _, e := range getList(v, "extraEnvs") {
			assert.NotEqual(t, "GOMEMLIMIT", getStr(e, "name"), "%s: the chart sets GOMEMLIMIT; a second one in extraEnvs would clash", h)
		}
		assert.Equal(t, manifest[getStr(v, "fullnameOverride")], chartGOMEMLIMIT(t, limit), "%s: the same GOMEMLIMIT as the plain manifest", h)
	}
}
