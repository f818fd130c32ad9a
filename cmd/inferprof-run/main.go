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
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/inferprof/inferprof/internal/unixsock"
)

// Environment variables read by inferprof-run, the hook and the library.
const (
	envStepEndpoint  = unixsock.EnvStepEndpoint
	envCUPTIEndpoint = unixsock.EnvCUPTIEndpoint
	envCUPTILib      = "INFERPROF_CUPTI_LIB"
	envHookDir       = "INFERPROF_HOOK_DIR"
	envHookDisabled  = "INFERPROF_HOOK_DISABLED"
	envInjection     = "CUDA_INJECTION64_PATH"
	envPythonPath    = "PYTHONPATH"
	envServiceName   = "OTEL_SERVICE_NAME"
	envLogsEndpoint  = "INFERPROF_LOGS_ENDPOINT"
	envUnbuffered    = "PYTHONUNBUFFERED"

	defaultStepEndpoint  = unixsock.DefaultStepEndpoint
	defaultCUPTIEndpoint = unixsock.DefaultCUPTIEndpoint
	cuptiLibName         = "libinferprof_cupti.so"
)

type options struct {
	stepEndpoint    string
	cuptiEndpoint   string
	cuptiLib        string
	hookDir         string
	serviceName     string
	noHook          bool
	noCUPTI         bool
	noEngineMetrics bool
	dryRun          bool
	quiet           bool
	exec            bool
	noLogs          bool
	logsEndpoint    string
	args            []string
}

// change is one variable inferprof-run set in the engine's environment.
type change struct {
	key, value string
	why        string
}

func (c change) String() string { return c.key + "=" + c.value + "  (" + c.why + ")" }

// plan is what inferprof-run will do: the command and its environment.
type plan struct {
	path     string
	args     []string
	env      []string
	changes  []change // in the order they were made
	notes    []string // things the user should know, nothing changed
	warnings []string // a part is missing; the engine runs without it

	vars  map[string]string
	order []string

	scrape *scrapeTarget // the engine's /metrics, for the collector; nil: none
	// onStart, when set, is called with the engine's pid as soon as it
	// started (supervise).
	onStart func(pid int)
}

// set puts key=value in the engine's environment and records why; a value
// already there unchanged is not a change.
func (p *plan) set(key, value, why string) {
	if old, ok := p.vars[key]; ok && old == value {
		return
	}
	if _, ok := p.vars[key]; !ok {
		p.order = append(p.order, key)
	}
	p.vars[key] = value
	p.changes = append(p.changes, change{key: key, value: value, why: why})
}

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

const usageHead = `usage: inferprof-run [flags] [--] COMMAND [ARG...]

Runs COMMAND, for example
  vllm serve MODEL --otlp-traces-endpoint http://127.0.0.1:4317
as its child (or with -exec in its own place), after setting in its
environment what inferprof's in-engine parts need. As the parent it forwards
every signal, reaps orphans (as a container's PID 1 too), exits with the
engine's code or dies of its signal, and passes the engine's output through
unchanged, sending its tracebacks, ERROR/CRITICAL lines, CUDA and argument
errors and a final exit record to the collector as OTLP logs (no INFO line,
no error text: see cmd/inferprof-run/README.md). It prints one line per variable it sets, on stderr:
  PYTHONPATH               the engine step hook's folder first (not with -no-hook)
  OTEL_SERVICE_NAME        -service-name, or when unset, vllm or sglang from COMMAND,
                           so that step spans and request spans match
  CUDA_INJECTION64_PATH    the CUPTI injection library built for the engine's CUDA
                           major (torch.version.cuda); not with -no-cupti; a value
                           already set is kept
  LD_LIBRARY_PATH          the libcupti of the engine's nvidia-cuda-cupti wheel first
  OTEL_EXPORTER_OTLP_TRACES_INSECURE=true
                           when the engine's traces endpoint is on loopback and
                           not https:// (older vLLM and TensorRT-LLM use TLS
                           for gRPC unless the endpoint starts with http://),
                           unless already set
  INFERPROF_STEP_ENDPOINT, INFERPROF_CUPTI_ENDPOINT
                           the collector's sockets
  OTEL_RESOURCE_ATTRIBUTES service.instance.id (one per launch, shared by the
                           engine's processes) and inferprof.model.name (the
                           served model, from --served-model-name, --model,
                           --model-path or vllm serve MODEL), each unless set;
                           the user's attributes are kept
A part it cannot find is named in a warning and left out; COMMAND still runs.
It also warns when this user cannot write to the collector's sockets, where
the hook and the library would otherwise drop every record without a word.

To save the collector's timeline (Chrome trace JSON for Perfetto) instead:
  inferprof-run --timeline FILE [--last 60s] [--local-endpoint HOST:PORT] [--timeout 30s]

Flags (a flag's default is the environment variable named, when set):
`

func parseArgs(argv []string, getenv func(string) string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("inferprof-run", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprint(out, usageHead)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.stepEndpoint, "step-endpoint", or(getenv(envStepEndpoint), defaultStepEndpoint),
		"Unix datagram socket of the collector's engine_step receiver ("+envStepEndpoint+")")
	fs.StringVar(&o.cuptiEndpoint, "cupti-endpoint", or(getenv(envCUPTIEndpoint), defaultCUPTIEndpoint),
		"Unix socket of the collector's cupti receiver ("+envCUPTIEndpoint+")")
	fs.StringVar(&o.cuptiLib, "cupti-lib", getenv(envCUPTILib),
		"path of "+cuptiLibName+" ("+envCUPTILib+"); unset: looked for in the folder of inferprof-run, then\n"+
			"../lib and ../native/cupti/build from it")
	fs.StringVar(&o.hookDir, "hook-dir", getenv(envHookDir),
		"folder holding the hook's sitecustomize.py ("+envHookDir+"); unset: looked for in\n"+
			"../share/inferprof/python/bootstrap and ../integrations/python/bootstrap from the folder of inferprof-run")
	fs.StringVar(&o.serviceName, "service-name", "",
		"service.name for the engine's spans, set as "+envServiceName+"; unset: keep "+envServiceName+",\n"+
			"or when that is unset too, the engine's name (vllm, sglang)")
	fs.BoolVar(&o.noHook, "no-hook", false, "do not load the engine step hook (sets "+envHookDisabled+"=1)")
	fs.BoolVar(&o.noCUPTI, "no-cupti", false, "do not load the CUPTI injection library")
	fs.BoolVar(&o.noEngineMetrics, "no-engine-metrics", false,
		"do not write the engine's /metrics as a scrape target for the collector (into "+envTargetsDir+",\n"+
			"default "+defaultTargetsDir+"; "+envMetricsAddress+" overrides the address read from --host/--port)")
	fs.BoolVar(&o.quiet, "quiet", false, "print warnings only, not the variables set")
	fs.BoolVar(&o.exec, "exec", false, "replace inferprof-run with the command (exec) instead of supervising it: no error records,\n"+
		"and signals, exit status and pid are the engine's own")
	fs.BoolVar(&o.noLogs, "no-logs", false, "supervise, but send no error records: the engine writes to inferprof-run's stdout and stderr itself")
	fs.StringVar(&o.logsEndpoint, "logs-endpoint", getenv(envLogsEndpoint),
		"OTLP gRPC endpoint for the engine's error records ("+envLogsEndpoint+"); unset: OTEL_EXPORTER_OTLP_LOGS_ENDPOINT,\n"+
			"else the engine's traces endpoint, else 127.0.0.1:4317")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print the variables it would set and the command, on stdout, instead of running it")
	if err := fs.Parse(argv); err != nil {
		return o, err
	}
	o.args = fs.Args()
	if len(o.args) == 0 {
		fs.Usage()
		return o, errors.New("no command given")
	}
	if !filepath.IsAbs(o.stepEndpoint) {
		return o, fmt.Errorf("-step-endpoint %q: must be an absolute socket path", o.stepEndpoint)
	}
	return o, nil
}

func or(v, def string) string {
	if v != "" {
		return v
	}
	return def
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

func planHook(p *plan, o options, exe string) error {
	if o.noHook {
		p.set(envHookDisabled, "1", "-no-hook: the engine step hook stays off")
		return nil
	}
	// Set even when the folder is not found: a hook installed another way
	// reads it too.
	p.set(envStepEndpoint, o.stepEndpoint, "where the hook sends steps: the engine_step receiver's socket")
	checkSocket(p, "engine_step", o.stepEndpoint)
	dir := o.hookDir
	if dir == "" {
		dir = findFirst(hookCandidates(exe), "sitecustomize.py")
	}
	switch {
	case dir == "":
		p.warnings = append(p.warnings, "engine step hook not found (set -hook-dir or "+envHookDir+"); running without it")
		return nil
	case !exists(filepath.Join(dir, "sitecustomize.py")):
		return fmt.Errorf("hook dir %s has no sitecustomize.py", dir)
	}
	abs, _ := filepath.Abs(dir)
	p.set(envPythonPath, prependPath(abs, p.vars[envPythonPath]), "loads the engine step hook in the server and its engine processes")
	return nil
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

func planCUPTI(p *plan, o options, exe string) error {
	if o.noCUPTI {
		return nil
	}
	p.set(envCUPTIEndpoint, o.cuptiEndpoint, "where the CUPTI library sends kernel activity: the cupti receiver's socket")
	if p.vars[envInjection] != "" && o.cuptiLib == "" {
		p.warnings = append(p.warnings, envInjection+" is already set to "+p.vars[envInjection]+"; keeping it, so no GPU kernel activity from inferprof")
		return nil
	}
	lib := o.cuptiLib
	if lib == "" {
		lib = selectCUPTI(exe, o.args, p.vars, func(k, v string) {
			p.set(k, v, "the engine's own libcupti first, matching its CUDA")
		}, &p.warnings)
	}
	switch {
	case lib == "":
		p.warnings = append(p.warnings, cuptiLibName+" not found (build it with `make native`, or set -cupti-lib or "+envCUPTILib+"); running without GPU kernel activity")
		return nil
	case !exists(lib):
		return fmt.Errorf("cupti lib %s: no such file", lib)
	}
	abs, _ := filepath.Abs(lib)
	p.set(envInjection, abs, "loads the CUPTI injection library into the engine")
	checkSocket(p, "cupti", o.cuptiEndpoint)
	return nil
}

// prependPath puts dir first on a PATH-style list, once.
func prependPath(dir, list string) string {
	parts := []string{dir}
	for _, e := range filepath.SplitList(list) {
		if e != "" && e != dir {
			parts = append(parts, e)
		}
	}
	return strings.Join(parts, string(os.PathListSeparator))
}

// hookCandidates are the folders searched for sitecustomize.py: an install
// layout (bin/ next to share/inferprof/python/bootstrap) and the source tree
// (bin/inferprof-run in the repository).
func hookCandidates(exe string) []string {
	d := filepath.Dir(exe)
	return []string{
		filepath.Join(d, "..", "share", "inferprof", "python", "bootstrap"),
		filepath.Join(d, "..", "integrations", "python", "bootstrap"),
	}
}

// cuptiCandidates are the paths searched for the injection library.
func cuptiCandidates(exe string) []string {
	d := filepath.Dir(exe)
	return []string{
		filepath.Join(d, cuptiLibName),
		filepath.Join(d, "..", "lib", cuptiLibName),
		filepath.Join(d, "..", "native", "cupti", "build", cuptiLibName),
	}
}

// findFirst returns the first candidate that exists (holding file, if set).
func findFirst(candidates []string, file string) string {
	for _, c := range candidates {
		if exists(filepath.Join(c, file)) {
			return filepath.Clean(c)
		}
	}
	return ""
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// engineName guesses vllm or sglang from the command line ("vllm serve",
// "python3 -m sglang.launch_server"); "" when neither appears.
func engineName(args []string) string {
	for _, a := range args {
		base := filepath.Base(a)
		for _, e := range []string{"vllm", "sglang"} {
			if strings.HasPrefix(base, e) {
				return e
			}
		}
	}
	return ""
}
