// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetricsAddressFromTheCommandLine(t *testing.T) {
	for _, tc := range []struct {
		name, engine string
		args         []string
		want         string
		ok           bool
	}{
		{"vllm default", "vllm", []string{"vllm", "serve", "m"}, "127.0.0.1:8000", true},
		{"vllm port", "vllm", []string{"vllm", "serve", "m", "--port", "9100"}, "127.0.0.1:9100", true},
		{"vllm port=", "vllm", []string{"vllm", "serve", "m", "--port=9101", "--host=10.0.0.5"}, "10.0.0.5:9101", true},
		{"vllm wildcard", "vllm", []string{"vllm", "serve", "m", "--host", "0.0.0.0"}, "127.0.0.1:8000", true},
		{"vllm ipv6", "vllm", []string{"vllm", "serve", "m", "--host", "::1", "--port", "8001"}, "[::1]:8001", true},
		{"sglang without metrics", "sglang", []string{"python3", "-m", "sglang.launch_server", "--port", "30001"}, "", false},
		{"sglang", "sglang", []string{"python3", "-m", "sglang.launch_server", "--enable-metrics"}, "127.0.0.1:30000", true},
		{"other", "", []string{"python3", "app.py", "--port", "1"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, note, ok := metricsAddress(tc.engine, tc.args)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
			if tc.engine == "sglang" && !ok {
				assert.Contains(t, note, "--enable-metrics")
			}
		})
	}
}

// TestScrapeTargetCarriesTheEngineIdentity: the target's labels are the
// identity the launcher gave the engine's spans and steps, so the scraped
// series join them.
func TestScrapeTargetCarriesTheEngineIdentity(t *testing.T) {
	dir := t.TempDir()
	o := options{args: []string{"vllm", "serve", "/models/tiny", "--served-model-name", "tiny", "--port", "8123"}}
	p := &plan{vars: map[string]string{envTargetsDir: dir}}
	planResource(p, o.args)
	planServiceName(p, o)
	planScrape(p, o, func() (string, error) { return "gpu-host-1", nil })
	require.NotNil(t, p.scrape)
	path, err := p.scrape.write(4242)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "4242.json"), path)

	var groups []fileSDGroup
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &groups))
	require.Len(t, groups, 1)
	assert.Equal(t, []string{"127.0.0.1:8123"}, groups[0].Targets)
	id := resourceAttribute(p.vars[envResourceAttrs], attrInstanceID)
	require.NotEmpty(t, id)
	assert.Equal(t, map[string]string{
		"job": "vllm", "instance": id, labelHost: "gpu-host-1", labelPID: "4242", labelModel: "tiny",
	}, groups[0].Labels)
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

func TestScrapeTargetOptions(t *testing.T) {
	args := []string{"vllm", "serve", "m"}
	p := &plan{vars: map[string]string{envMetricsAddress: "10.1.2.3:8000", envServiceName: "chat",
		envResourceAttrs: "k8s.pod.name=vllm-0,service.instance.id=i-1"}}
	planScrape(p, options{args: args}, os.Hostname)
	require.NotNil(t, p.scrape)
	assert.Equal(t, "10.1.2.3:8000", p.scrape.address)
	assert.Equal(t, "vllm-0", p.scrape.labels[labelPod])
	assert.Equal(t, "i-1", p.scrape.labels["instance"])
	assert.Equal(t, "chat", p.scrape.labels["job"])
	assert.Equal(t, defaultTargetsDir, p.scrape.dir)

	p = &plan{vars: map[string]string{}}
	planScrape(p, options{args: args, noEngineMetrics: true}, os.Hostname)
	assert.Nil(t, p.scrape, "-no-engine-metrics")

	p = &plan{vars: map[string]string{}}
	planScrape(p, options{args: []string{"python3", "-m", "sglang.launch_server"}}, os.Hostname)
	assert.Nil(t, p.scrape)
	require.Len(t, p.notes, 1)
	assert.Contains(t, p.notes[0], "--enable-metrics")
}

// TestStaleTargetsAreRemoved: an exec'd engine cannot remove its own
// target, so the next launch removes those of ended processes, and only
// those.
func TestStaleTargetsAreRemoved(t *testing.T) {
	dir := t.TempDir()
	ended := exec.Command("true")
	require.NoError(t, ended.Run())
	stale := filepath.Join(dir, strconv.Itoa(ended.Process.Pid)+".json")
	live := filepath.Join(dir, strconv.Itoa(os.Getppid())+".json")
	other := filepath.Join(dir, "notes.json")
	for _, f := range []string{stale, live, other} {
		require.NoError(t, os.WriteFile(f, []byte("[]"), 0o600))
	}
	tgt := &scrapeTarget{dir: dir, address: "127.0.0.1:8000", labels: map[string]string{"job": "vllm"}}
	_, err := tgt.write(os.Getpid())
	require.NoError(t, err)
	assert.NoFileExists(t, stale)
	assert.FileExists(t, live)
	assert.FileExists(t, other)
	assert.FileExists(t, tgt.file(os.Getpid()))
}
