// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"strconv"
	"testing"

	"github.com/expr-lang/expr"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/observer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestEngineDiscoveryRule evaluates the overlay's rule and its expansions the
// way receiver_creator v0.161.0 does (expr, with the builtin type disabled,
// over the hostport endpoint's Env from the observer package), on command
// lines the e2e tests do not start: SGLang, the --port=N form, the default
// ports, a port that only starts like the API port, an engine's other
// sockets.
func TestEngineDiscoveryRule(t *testing.T) {
	b, err := os.ReadFile(shippedConfig("engine-discovery.yaml"))
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal(b, &cfg))
	tmpl := get(cfg, "receivers", "receiver_creator/engines", "receivers", "prometheus/engine")
	rule, _ := get(tmpl, "rule").(string)
	require.NotEmpty(t, rule)
	program, err := expr.Compile(rule, expr.DisableBuiltin("type"))
	require.NoError(t, err)
	job := getStr(getList(tmpl, "config", "config", "scrape_configs")[0], "job_name")
	pid := getStr(tmpl, "resource_attributes", "process.pid")
	require.Regexp(t, "^`.*`$", job)
	require.Regexp(t, "^`.*`$", pid)

	endpoint := func(cmd string, port uint16, tr observer.Transport) observer.EndpointEnv {
		e := observer.Endpoint{
			ID:      observer.EndpointID("(host_observer)127.0.0.1-" + strconv.Itoa(int(port)) + "-" + string(tr) + "-4242"),
			Target:  "127.0.0.1:" + strconv.Itoa(int(port)),
			Details: &observer.HostPort{ProcessName: "python3", Command: cmd, Port: port, Transport: tr},
		}
		env, err := e.Env()
		require.NoError(t, err)
		return env
	}
	for _, c := range []struct {
		cmd  string
		port uint16
		tr   observer.Transport
		want bool
		kind string
	}{
		{"/usr/bin/python3 /usr/local/bin/vllm serve m --port 8001", 8001, observer.ProtocolTCP, true, "vllm"},
		{"/usr/bin/python3 /usr/local/bin/vllm serve m --port=8001", 8001, observer.ProtocolTCP, true, "vllm"},
		{"/usr/bin/python3 /usr/local/bin/vllm serve m --port 8001", 800, observer.ProtocolTCP, false, ""},
		{"/usr/bin/python3 /usr/local/bin/vllm serve m --port 8001", 41527, observer.ProtocolTCP, false, ""},
		{"/usr/bin/python3 /usr/local/bin/vllm serve m --port 8001", 8001, observer.ProtocolUDP, false, ""},
		{"/usr/bin/python3 /usr/local/bin/vllm serve m", 8000, observer.ProtocolTCP, true, "vllm"},
		{"/usr/bin/python3 /usr/local/bin/vllm serve m", 8001, observer.ProtocolTCP, false, ""},
		{"python3 -m vllm.entrypoints.openai.api_server --model m --port 9000", 9000, observer.ProtocolTCP, true, "vllm"},
		{"VLLM::EngineCore", 8000, observer.ProtocolTCP, false, ""},
		{"python3 -m sglang.launch_server --model-path m --enable-metrics", 30000, observer.ProtocolTCP, true, "sglang"},
		{"python3 -m sglang.launch_server --model-path m --enable-metrics --port 30001", 30001, observer.ProtocolTCP, true, "sglang"},
		{"python3 -m sglang.launch_server --model-path m --port 30001", 30001, observer.ProtocolTCP, false, ""},
		{"/usr/bin/otelcol-inferprof --config config/default.yaml --config vllm serve.yaml", 8000, observer.ProtocolTCP, false, ""},
	} {
		env := endpoint(c.cmd, c.port, c.tr)
		got, err := expr.Run(program, env)
		require.NoError(t, err, c.cmd)
		assert.Equal(t, c.want, got, "%s on %s port %d", c.cmd, c.tr, c.port)
		if !c.want {
			continue
		}
		kind, err := expr.Eval(job[1:len(job)-1], env)
		require.NoError(t, err)
		assert.Equal(t, c.kind, kind, c.cmd)
		p, err := expr.Eval(pid[1:len(pid)-1], env)
		require.NoError(t, err)
		assert.Equal(t, "4242", p, c.cmd)
	}
}
