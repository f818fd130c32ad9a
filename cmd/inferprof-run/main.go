// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Command inferprof-run starts an inference server with inferprof's in-engine
// parts loaded: the Python engine step hook (through a sitecustomize on
// PYTHONPATH) and the CUPTI injection library (through CUDA_INJECTION64_PATH).
//
//	inferprof-run [flags] [--] vllm serve MODEL --otlp-traces-endpoint http://127.0.0.1:4317
//
// It prints one line per change it makes to the engine's environment, then
// runs the command as its child and supervises it (supervise.go): it forwards
// signals, reaps orphans, ends with the engine's exit code or signal, and
// reads the engine's output as it passes to send its errors to the collector
// as OTLP log records (capture.go, recognise.go). With -exec it replaces
// itself with the command instead, as it did before.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	if code, ok := runTimeline(os.Args[1:], os.Getenv, os.Stdout, os.Stderr); ok {
		os.Exit(code)
	}
	opts, err := parseArgs(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "inferprof-run:", err)
		os.Exit(2)
	}
	exe, _ := os.Executable()
	p, err := makePlan(opts, os.Environ(), exe, exec.LookPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "inferprof-run:", err)
		os.Exit(127)
	}
	if opts.dryRun {
		report(os.Stdout, p, false)
		if p.scrape != nil {
			fmt.Println("inferprof-run: would write", p.scrape.describe(strconv.Itoa(os.Getpid())))
		}
		fmt.Println(shellJoin(append([]string{p.path}, p.args[1:]...)))
		return
	}
	report(os.Stderr, p, opts.quiet)
	if p.scrape != nil {
		warnDiscovery(os.Stderr, "/proc", p.scrape.dir)
	}
	if opts.exec {
		if p.scrape != nil {
			// exec keeps the pid: the target names the process that serves /metrics.
			writeScrape(p, os.Getpid(), opts.quiet)
		}
		err = syscall.Exec(p.path, p.args, p.env)
		fmt.Fprintf(os.Stderr, "inferprof-run: exec %s: %v\n", p.path, err)
		os.Exit(126)
	}
	var target string
	if p.scrape != nil {
		// The engine's pid is known once it started; its target goes when
		// it ends, so the collector stops scraping it at once.
		p.onStart = func(pid int) { target = writeScrape(p, pid, opts.quiet) }
	}
	var newSink func(int) *logSink
	if !opts.noLogs {
		ep, insecure := logsTarget(opts, opts.args, p.vars)
		newSink = func(pid int) *logSink {
			s, err := newLogSink(ep, insecure, engineResource(p.vars, pid))
			if err != nil {
				fmt.Fprintln(os.Stderr, "inferprof-run: warning: engine errors not sent:", err)
				return nil
			}
			return s
		}
	}
	o, err := supervise(p, os.Stdout, os.Stderr, newSink)
	if err != nil {
		fmt.Fprintf(os.Stderr, "inferprof-run: start %s: %v\n", p.path, err)
		os.Exit(126)
	}
	if target != "" {
		_ = os.Remove(target)
	}
	exitLike(o)
}

// report prints one line per change, then notes and warnings; quiet keeps
// only the warnings.
func report(w io.Writer, p *plan, quiet bool) {
	if !quiet {
		for _, c := range p.changes {
			fmt.Fprintln(w, "inferprof-run: set", c)
		}
		for _, n := range p.notes {
			fmt.Fprintln(w, "inferprof-run: note:", n)
		}
	}
	for _, m := range p.warnings {
		fmt.Fprintln(w, "inferprof-run: warning:", m)
	}
}

// makePlan resolves the command and builds its environment from env.
func makePlan(o options, env []string, exe string, lookPath func(string) (string, error)) (*plan, error) {
	path, err := lookPath(o.args[0])
	if err != nil {
		return nil, fmt.Errorf("command %q: %w", o.args[0], err)
	}
	p := &plan{path: path, args: o.args, vars: map[string]string{}}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := p.vars[k]; !dup {
			p.order = append(p.order, k)
		}
		p.vars[k] = v
	}

	if err := planHook(p, o, exe); err != nil {
		return nil, err
	}
	planResource(p, o.args)
	planServiceName(p, o)
	planScrape(p, o, os.Hostname)
	if err := planCUPTI(p, o, exe); err != nil {
		return nil, err
	}
	planTraces(p, o.args)
	if !o.exec && !o.noLogs && p.vars[envUnbuffered] == "" {
		// Through a pipe, Python buffers print() output in 8 KiB blocks
		// (logging flushes each record); unbuffered, the engine's output
		// passes as soon as it is written, as on a terminal.
		p.set(envUnbuffered, "1", "the engine's output goes through inferprof-run's pipe: unbuffered, so none is held back")
	}

	p.env = make([]string, 0, len(p.order))
	for _, k := range p.order {
		p.env = append(p.env, k+"="+p.vars[k])
	}
	return p, nil
}

func planServiceName(p *plan, o options) {
	switch {
	case o.serviceName != "":
		p.set(envServiceName, o.serviceName, "-service-name")
	case p.vars[envServiceName] == "":
		// The step hook and the engine's OpenTelemetry SDK must name the
		// same service.name, or the processor cannot match steps to
		// requests; unset, the SDK says unknown_service and the hook the
		// engine name.
		if name := engineName(o.args); name != "" {
			p.set(envServiceName, name, "was unset; the hook and the engine's request spans must share one service.name")
		}
	}
}
