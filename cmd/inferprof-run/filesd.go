// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The engine's own Prometheus metrics (vllm:*, sglang:*) are scraped by the
// collector's prometheus/engines receiver from Prometheus file service
// discovery targets that the launcher writes: it knows the engine's port from
// the command line and the identity it gave the engine, and no port is
// probed (docs/engine-metrics.md: this path, and the observer overlay for
// engines the launcher did not start).
const (
	envTargetsDir     = "INFERPROF_ENGINE_TARGETS_DIR"
	envMetricsAddress = "INFERPROF_ENGINE_METRICS_ADDRESS"

	defaultTargetsDir = "/tmp/inferprof/engines"
)

// Target labels the collector's transform/engine_identity turns back into
// resource attributes. job and instance are Prometheus' own: the
// prometheus receiver makes them service.name and service.instance.id.
const (
	labelHost  = "host_name"
	labelPID   = "process_pid"
	labelModel = "inferprof_model_name"
	labelPod   = "k8s_pod_name"
)

// scrapeTarget is one engine's file_sd entry.
type scrapeTarget struct {
	dir     string
	address string // host:port of the engine's /metrics
	labels  map[string]string
}

// fileSDGroup is Prometheus' file_sd format: a list of these.
type fileSDGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// file is the target's path: one file per engine process, named by its pid.
func (t *scrapeTarget) file(pid int) string {
	return filepath.Join(t.dir, strconv.Itoa(pid)+".json")
}

// write puts the target for the engine process pid in its folder, whole
// (renamed into place, so the collector never reads half a file), after
// removing the files of engine processes that have ended: an exec'd engine
// cannot remove its own.
func (t *scrapeTarget) write(pid int) (string, error) {
	if err := os.MkdirAll(t.dir, 0o700); err != nil {
		return "", err
	}
	pruneTargets(t.dir)
	labels := make(map[string]string, len(t.labels)+1)
	for k, v := range t.labels {
		labels[k] = v
	}
	labels[labelPID] = strconv.Itoa(pid)
	b, err := json.Marshal([]fileSDGroup{{Targets: []string{t.address}, Labels: labels}})
	if err != nil {
		return "", err
	}
	path := t.file(pid)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// pruneTargets removes the targets of processes that no longer exist.
func pruneTargets(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		pid, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(f), ".json"))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.Remove(f)
		}
	}
}

// describe is the plan's line for the target.
func (t *scrapeTarget) describe(pid string) string {
	return fmt.Sprintf("engine metrics: http://%s/metrics, scraped by the collector's prometheus/engines receiver from %s",
		t.address, filepath.Join(t.dir, pid+".json"))
}
