// Command inferprof-run starts an inference server with inferprof's in-engine
// parts loaded: the Python engine step hook (through a sitecustomize on
// PYTHONPATH) and the CUPTI injection library (through CUDA_INJECTION64_PATH).
//
//	inferprof-run [flags] [--] vllm serve MODEL ...
//
// It replaces itself with the command (exec), so signals, the exit status and
// the pid are the server's own.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Environment variables read by inferprof-run, the hook and the library.
const (
	envStepEndpoint  = "INFERPROF_STEP_ENDPOINT"
	envCUPTIEndpoint = "INFERPROF_CUPTI_ENDPOINT"
	envCUPTILib      = "INFERPROF_CUPTI_LIB"
	envHookDir       = "INFERPROF_HOOK_DIR"
	envHookDisabled  = "INFERPROF_HOOK_DISABLED"
	envInjection     = "CUDA_INJECTION64_PATH"
	envPythonPath    = "PYTHONPATH"
	envServiceName   = "OTEL_SERVICE_NAME"

	defaultStepEndpoint  = "/tmp/inferprof/engine-step.sock"
	defaultCUPTIEndpoint = "/tmp/inferprof/cupti.sock"
	cuptiLibName         = "libinferprof_cupti.so"
)

type options struct {
	stepEndpoint  string
	cuptiEndpoint string
	cuptiLib      string
	hookDir       string
	serviceName   string
	noHook        bool
	noCUPTI       bool
	dryRun        bool
	args          []string
}

// plan is what inferprof-run will do: the command and its environment.
type plan struct {
	path     string
	args     []string
	env      []string
	changes  []string // KEY=VALUE set or changed, for --dry-run and logs
	warnings []string
}

func main() {
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
	for _, w := range p.warnings {
		fmt.Fprintln(os.Stderr, "inferprof-run: warning:", w)
	}
	if opts.dryRun {
		for _, c := range p.changes {
			fmt.Println(c)
		}
		fmt.Println(strings.Join(append([]string{p.path}, p.args[1:]...), " "))
		return
	}
	err = syscall.Exec(p.path, p.args, p.env)
	fmt.Fprintf(os.Stderr, "inferprof-run: exec %s: %v\n", p.path, err)
	os.Exit(126)
}

func parseArgs(argv []string, getenv func(string) string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("inferprof-run", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "usage: inferprof-run [flags] [--] COMMAND [ARG...]\n\n"+
			"Runs COMMAND (for example `vllm serve MODEL`) with the inferprof engine step hook\n"+
			"and CUPTI injection library loaded. Flags default to the environment variables named.\n\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.stepEndpoint, "step-endpoint", or(getenv(envStepEndpoint), defaultStepEndpoint),
		"Unix datagram socket of the collector's engine_step receiver ("+envStepEndpoint+")")
	fs.StringVar(&o.cuptiEndpoint, "cupti-endpoint", or(getenv(envCUPTIEndpoint), defaultCUPTIEndpoint),
		"Unix socket of the collector's cupti receiver ("+envCUPTIEndpoint+")")
	fs.StringVar(&o.cuptiLib, "cupti-lib", getenv(envCUPTILib),
		"path of "+cuptiLibName+" ("+envCUPTILib+"); default: searched next to inferprof-run and in native/cupti/build")
	fs.StringVar(&o.hookDir, "hook-dir", getenv(envHookDir),
		"folder holding the hook's sitecustomize.py ("+envHookDir+"); default: searched next to inferprof-run and in integrations/python/bootstrap")
	fs.StringVar(&o.serviceName, "service-name", "",
		"service.name for the engine's spans ("+envServiceName+" if unset); default: keep "+envServiceName)
	fs.BoolVar(&o.noHook, "no-hook", false, "do not load the engine step hook")
	fs.BoolVar(&o.noCUPTI, "no-cupti", false, "do not load the CUPTI injection library")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print the environment changes and the command instead of running it")
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
	p := &plan{path: path, args: o.args}
	vars := map[string]string{}
	var order []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := vars[k]; !dup {
			order = append(order, k)
		}
		vars[k] = v
	}
	set := func(k, v string) {
		if old, ok := vars[k]; ok && old == v {
			return
		}
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
		p.changes = append(p.changes, k+"="+v)
	}

	set(envStepEndpoint, o.stepEndpoint)
	setInstanceID(vars, set)
	switch {
	case o.serviceName != "":
		set(envServiceName, o.serviceName)
	case vars[envServiceName] == "":
		// The step hook and the engine's OpenTelemetry SDK must name the
		// same service.name, or the processor cannot match steps to
		// requests; unset, the SDK says unknown_service and the hook the
		// engine name.
		if name := engineName(o.args); name != "" {
			set(envServiceName, name)
		}
	}
	if o.noHook {
		set(envHookDisabled, "1")
	} else {
		dir := o.hookDir
		if dir == "" {
			dir = findFirst(hookCandidates(exe), "sitecustomize.py")
		}
		switch {
		case dir == "":
			p.warnings = append(p.warnings, "engine step hook not found (set -hook-dir or "+envHookDir+"); running without it")
		case !exists(filepath.Join(dir, "sitecustomize.py")):
			return nil, fmt.Errorf("hook dir %s has no sitecustomize.py", dir)
		default:
			abs, _ := filepath.Abs(dir)
			set(envPythonPath, prependPath(abs, vars[envPythonPath]))
		}
	}

	if !o.noCUPTI {
		set(envCUPTIEndpoint, o.cuptiEndpoint)
		lib := o.cuptiLib
		if lib == "" {
			lib = selectCUPTI(exe, o.args, vars, set, &p.warnings)
		}
		switch {
		case vars[envInjection] != "" && o.cuptiLib == "":
			p.warnings = append(p.warnings, envInjection+" is already set; keeping it")
		case lib == "":
			p.warnings = append(p.warnings, cuptiLibName+" not found (set -cupti-lib or "+envCUPTILib+"); running without GPU kernel activity")
		case !exists(lib):
			return nil, fmt.Errorf("cupti lib %s: no such file", lib)
		default:
			abs, _ := filepath.Abs(lib)
			set(envInjection, abs)
		}
	}

	p.env = make([]string, 0, len(order))
	for _, k := range order {
		p.env = append(p.env, k+"="+vars[k])
	}
	sort.Strings(p.changes)
	return p, nil
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
