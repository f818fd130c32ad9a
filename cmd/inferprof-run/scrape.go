// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

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
