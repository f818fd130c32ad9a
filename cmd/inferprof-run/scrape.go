// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
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

// metricsAddress reads where the engine serves /metrics from its command
// line: vLLM and SGLang serve it on the API port. ok is false with a note
// when the engine serves none (SGLang without --enable-metrics).
func metricsAddress(engine string, args []string) (addr string, note string, ok bool) {
	host, port, enabled := "", "", engine == "vllm"
	switch engine {
	case "vllm":
		port = "8000" // vllm serve's default --port
	case "sglang":
		host, port = "127.0.0.1", "30000" // ServerArgs' defaults
	default:
		return "", "", false
	}
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(args[i], "=")
		if name == "--enable-metrics" {
			enabled = true
			continue
		}
		if name != "--host" && name != "--port" {
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				continue
			}
			i++
			val = args[i]
		}
		if name == "--host" {
			host = val
		} else {
			port = val
		}
	}
	if !enabled {
		return "", "SGLang serves no /metrics without --enable-metrics: the engine's own metrics are not scraped", false
	}
	// A wildcard listen address is reachable on loopback; the collector runs
	// on the same host (elsewhere: set the address, docs/engine-metrics.md).
	switch host {
	case "", "0.0.0.0", "::", "[::]":
		host = "127.0.0.1"
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), port), "", true
}

// planScrape decides the engine's scrape target; it is written just before
// the engine starts (writeScrape).
func planScrape(p *plan, o options, hostname func() (string, error)) {
	if o.noEngineMetrics {
		return
	}
	engine := engineName(o.args)
	addr, note, ok := metricsAddress(engine, o.args)
	if v := p.vars[envMetricsAddress]; v != "" {
		addr, ok = v, engine != "" || ok
	}
	if note != "" && p.vars[envMetricsAddress] == "" {
		p.notes = append(p.notes, note)
	}
	if !ok {
		return
	}
	attrs := p.vars[envResourceAttrs]
	labels := map[string]string{
		"job":      or(p.vars[envServiceName], or(resourceAttribute(attrs, "service.name"), engine)),
		"instance": resourceAttribute(attrs, attrInstanceID),
	}
	if h, err := hostname(); err == nil {
		labels[labelHost] = h
	}
	if m := resourceAttribute(attrs, attrModelName); m != "" {
		labels[labelModel] = m
	}
	// In a pod (deploy/manifests/engine-vllm-example.yaml sets it), the
	// agent's k8s_attributes finds the pod by it, as for the engine's spans.
	if pod := resourceAttribute(attrs, "k8s.pod.name"); pod != "" {
		labels[labelPod] = pod
	}
	p.scrape = &scrapeTarget{dir: or(p.vars[envTargetsDir], defaultTargetsDir), address: addr, labels: labels}
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

// writeScrape writes the target for the engine process pid and says so;
// it returns the file written, "" when it could not (and warns).
func writeScrape(p *plan, pid int, quiet bool) string {
	path, err := p.scrape.write(pid)
	if err != nil {
		fmt.Fprintln(os.Stderr, "inferprof-run: warning: engine metrics target not written, so the collector will not scrape the engine:", err)
		return ""
	}
	if !quiet {
		fmt.Fprintln(os.Stderr, "inferprof-run: wrote", p.scrape.describe(strconv.Itoa(pid)))
	}
	return path
}
