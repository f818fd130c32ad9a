// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

func noEnv(string) string { return "" }

// changed lists the plan's changes as KEY=VALUE.
func changed(p *plan) []string {
	var out []string
	for _, c := range p.changes {
		out = append(out, c.key+"="+c.value)
	}
	return out
}

func lookOK(name string) (string, error) { return "/usr/bin/" + name, nil }

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// layout makes an install tree: bin/inferprof-run, lib/libinferprof_cupti.so
// and share/inferprof/python/bootstrap/sitecustomize.py.
func layout(t *testing.T) (exe, lib, hook string) {
	t.Helper()
	d := t.TempDir()
	exe = filepath.Join(d, "bin", "inferprof-run")
	lib = filepath.Join(d, "lib", cuptiLibName)
	hook = filepath.Join(d, "share", "inferprof", "python", "bootstrap")
	for _, f := range []string{exe, lib, filepath.Join(hook, "sitecustomize.py")} {
		require.NoError(t, os.MkdirAll(filepath.Dir(f), 0o755))
		require.NoError(t, os.WriteFile(f, nil, 0o644))
	}
	return exe, lib, hook
}

func TestPlanFindsHookAndLibrary(t *testing.T) {
	exe, lib, hook := layout(t)
	o, err := parseArgs([]string{"vllm", "serve", "m"}, noEnv, &bytes.Buffer{})
	require.NoError(t, err)
	p, err := makePlan(o, []string{"PYTHONPATH=/app:" + hook, "HOME=/root"}, exe, lookOK)
	require.NoError(t, err)
	assert.Equal(t, "/usr/bin/vllm", p.path)
	assert.Equal(t, []string{"vllm", "serve", "m"}, p.args)
	env := envMap(p.env)
	assert.Equal(t, hook+":/app", env["PYTHONPATH"], "hook first, and only once")
	assert.Equal(t, lib, env["CUDA_INJECTION64_PATH"])
	assert.Equal(t, defaultStepEndpoint, env["INFERPROF_STEP_ENDPOINT"])
	assert.Equal(t, defaultCUPTIEndpoint, env["INFERPROF_CUPTI_ENDPOINT"])
	assert.Equal(t, "/root", env["HOME"], "the rest of the environment is kept")
	assert.Equal(t, "vllm", env["OTEL_SERVICE_NAME"], "hook and engine SDK agree on service.name")
	assert.Empty(t, p.warnings)
}

func TestPlanServiceNameDefaults(t *testing.T) {
	exe, _, _ := layout(t)
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{args: []string{"python3", "-m", "sglang.launch_server"}, want: "sglang"},
		{args: []string{"/opt/venv/bin/vllm", "serve", "m"}, want: "vllm"},
		{args: []string{"vllm", "serve"}, env: []string{"OTEL_SERVICE_NAME=mine"}, want: "mine"},
		{args: []string{"python3", "server.py"}, want: ""},
	} {
		o, err := parseArgs(tc.args, noEnv, &bytes.Buffer{})
		require.NoError(t, err)
		p, err := makePlan(o, tc.env, exe, lookOK)
		require.NoError(t, err)
		assert.Equal(t, tc.want, envMap(p.env)["OTEL_SERVICE_NAME"], "%v", tc.args)
	}
}

func TestPlanFlagsAndEnvironment(t *testing.T) {
	exe, _, hook := layout(t)
	custom := filepath.Join(t.TempDir(), "custom.so")
	require.NoError(t, os.WriteFile(custom, nil, 0o644))
	getenv := func(k string) string {
		return map[string]string{envCUPTILib: custom, envStepEndpoint: "/run/s.sock"}[k]
	}
	o, err := parseArgs([]string{"-service-name", "llama", "-hook-dir", hook, "--", "python3", "-m", "sglang.launch_server"}, getenv, &bytes.Buffer{})
	require.NoError(t, err)
	p, err := makePlan(o, nil, exe, lookOK)
	require.NoError(t, err)
	env := envMap(p.env)
	assert.Equal(t, custom, env["CUDA_INJECTION64_PATH"])
	assert.Equal(t, "/run/s.sock", env["INFERPROF_STEP_ENDPOINT"])
	assert.Equal(t, "llama", env["OTEL_SERVICE_NAME"])
	assert.Equal(t, hook, env["PYTHONPATH"])
	assert.Contains(t, changed(p), "OTEL_SERVICE_NAME=llama")
}

func TestPlanWithoutPartsWarnsAndRuns(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "bin", "inferprof-run")
	o, err := parseArgs([]string{"vllm"}, noEnv, &bytes.Buffer{})
	require.NoError(t, err)
	p, err := makePlan(o, []string{"CUDA_INJECTION64_PATH=/theirs.so"}, exe, lookOK)
	require.NoError(t, err)
	env := envMap(p.env)
	assert.Equal(t, "/theirs.so", env["CUDA_INJECTION64_PATH"], "a user's injection library is kept")
	assert.Empty(t, env["PYTHONPATH"])
	require.Len(t, p.warnings, 2)
	assert.Contains(t, p.warnings[0], "hook not found")
	assert.Contains(t, p.warnings[1], "already set")
}

func TestPlanOptOuts(t *testing.T) {
	exe, _, _ := layout(t)
	o, err := parseArgs([]string{"-no-hook", "-no-cupti", "vllm"}, noEnv, &bytes.Buffer{})
	require.NoError(t, err)
	p, err := makePlan(o, nil, exe, lookOK)
	require.NoError(t, err)
	env := envMap(p.env)
	assert.Equal(t, "1", env["INFERPROF_HOOK_DISABLED"])
	assert.Empty(t, env["CUDA_INJECTION64_PATH"])
	assert.Empty(t, env["PYTHONPATH"])
}

func TestPlanErrors(t *testing.T) {
	exe, _, _ := layout(t)
	_, err := parseArgs(nil, noEnv, &bytes.Buffer{})
	require.ErrorContains(t, err, "no command")
	_, err = parseArgs([]string{"-step-endpoint", "rel.sock", "vllm"}, noEnv, &bytes.Buffer{})
	require.ErrorContains(t, err, "absolute")
	o, _ := parseArgs([]string{"-cupti-lib", "/nope.so", "vllm"}, noEnv, &bytes.Buffer{})
	_, err = makePlan(o, nil, exe, lookOK)
	require.ErrorContains(t, err, "no such file")
	o, _ = parseArgs([]string{"-hook-dir", t.TempDir(), "vllm"}, noEnv, &bytes.Buffer{})
	_, err = makePlan(o, nil, exe, lookOK)
	require.ErrorContains(t, err, "no sitecustomize.py")
	o, _ = parseArgs([]string{"vllm"}, noEnv, &bytes.Buffer{})
	_, err = makePlan(o, nil, exe, func(string) (string, error) { return "", exec.ErrNotFound })
	require.ErrorIs(t, err, exec.ErrNotFound)
}

// TestLaunchesPythonWithTheHook builds inferprof-run, runs python3 through
// it from the source tree, and checks that the child has the hook installed,
// sees the environment, and that the exit status is the child's own.
func TestLaunchesPythonWithTheHook(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	root := repoRoot()
	bin := filepath.Join(t.TempDir(), "inferprof-run")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join(root, "cmd", "inferprof-run")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	fake := filepath.Join(t.TempDir(), cuptiLibName)
	require.NoError(t, os.WriteFile(fake, nil, 0o644))
	script := `import json, os, sys, inferprof_hook
print(json.dumps({"patched_finder": any(type(f).__name__ == "_Finder" for f in sys.meta_path),
  "pythonpath": os.environ["PYTHONPATH"], "inj": os.environ.get("CUDA_INJECTION64_PATH"),
  "step": os.environ["INFERPROF_STEP_ENDPOINT"], "svc": os.environ.get("OTEL_SERVICE_NAME")}))
sys.exit(3)`
	cmd := exec.Command(bin, "-hook-dir", filepath.Join(root, "integrations", "python", "bootstrap"),
		"-cupti-lib", fake, "-service-name", "svc-x", "-step-endpoint", "/tmp/inferprof-x/s.sock",
		"python3", "-c", script)
	cmd.Env = append(os.Environ(), "PYTHONPATH=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "%v %s", err, stderr.String())
	assert.Equal(t, 3, ee.ExitCode(), stderr.String())
	var got map[string]any
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &got), stdout.String())
	assert.Equal(t, true, got["patched_finder"], "sitecustomize installed the hook")
	assert.Equal(t, filepath.Join(root, "integrations", "python", "bootstrap"), got["pythonpath"])
	assert.Equal(t, fake, got["inj"])
	assert.Equal(t, "/tmp/inferprof-x/s.sock", got["step"])
	assert.Equal(t, "svc-x", got["svc"])
}

func TestPlanTracesInsecure(t *testing.T) {
	exe, _, _ := layout(t)
	for _, tc := range []struct {
		name     string
		args     []string
		env      []string
		insecure string // "" when it must not be set by us
		note     string // a note that must be given, if any
	}{
		{name: "grpc scheme, loopback", args: []string{"vllm", "serve", "m", "--otlp-traces-endpoint", "grpc://127.0.0.1:4317"}, insecure: "true"},
		{name: "bare host:port", args: []string{"vllm", "serve", "m", "--otlp-traces-endpoint=localhost:4317"}, insecure: "true"},
		{name: "http scheme", args: []string{"vllm", "serve", "m", "--otlp-traces-endpoint", "http://127.0.0.1:4317"}, insecure: "true"},
		{name: "ipv6 loopback", args: []string{"vllm", "serve", "--otlp-traces-endpoint", "[::1]:4317"}, insecure: "true"},
		{name: "trtllm flag", args: []string{"trtllm-serve", "m", "--otlp_traces_endpoint", "127.0.0.1:4317"}, insecure: "true"},
		{name: "from the environment", args: []string{"python3", "app.py"}, env: []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:4317"}, insecure: "true"},
		{name: "sglang default endpoint", args: []string{"python3", "-m", "sglang.launch_server", "--enable-trace"}, insecure: "true"},
		{name: "https is left alone", args: []string{"vllm", "serve", "--otlp-traces-endpoint", "https://127.0.0.1:4317"}},
		{
			name: "remote endpoint: a note, no change", args: []string{"vllm", "serve", "--otlp-traces-endpoint", "collector.example:4317"},
			note: "write the endpoint as http://collector.example:4317",
		},
		{
			name: "user's false is kept, with a note", args: []string{"vllm", "serve", "--otlp-traces-endpoint", "127.0.0.1:4317"},
			env: []string{"OTEL_EXPORTER_OTLP_TRACES_INSECURE=false"}, note: "OTEL_EXPORTER_OTLP_TRACES_INSECURE=false is kept",
		},
		{name: "vllm without tracing", args: []string{"vllm", "serve", "m"}, note: "vllm sends no request spans"},
		{name: "sglang without --enable-trace", args: []string{"python3", "-m", "sglang.launch_server"}, note: "sglang sends no request spans"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Only the traces endpoint is under test: no socket checks.
			o, err := parseArgs(append([]string{"-no-hook", "-no-cupti", "-no-engine-metrics"}, tc.args...), noEnv, &bytes.Buffer{})
			require.NoError(t, err)
			p, err := makePlan(o, tc.env, exe, lookOK)
			require.NoError(t, err)
			if tc.insecure != "" {
				assert.Contains(t, changed(p), "OTEL_EXPORTER_OTLP_TRACES_INSECURE="+tc.insecure)
			} else {
				for _, c := range p.changes {
					assert.NotEqual(t, envTracesInsecure, c.key)
				}
			}
			if tc.note != "" {
				assert.Contains(t, strings.Join(p.notes, "\n"), tc.note)
			} else {
				assert.Empty(t, p.notes)
			}
		})
	}
}

// TestRunPrintsEveryChange drives the built inferprof-run with a fake
// engine: a `vllm` on PATH that prints the environment it was given. It
// checks the lines inferprof-run prints, one per change, against the
// environment the engine really got.
func TestRunPrintsEveryChange(t *testing.T) {
	root := repoRoot()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "inferprof-run")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join(root, "cmd", "inferprof-run")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	pathDir := filepath.Join(tmp, "path")
	require.NoError(t, os.MkdirAll(pathDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(pathDir, "vllm"), []byte("#!/bin/sh\nexec env\n"), 0o755))
	lib := filepath.Join(tmp, cuptiLibName)
	require.NoError(t, os.WriteFile(lib, nil, 0o644))
	hook := filepath.Join(root, "integrations", "python", "bootstrap")
	// A collector's sockets, so that the launcher has nothing to warn about.
	stepSock, cuptiSock := listenSockets(t)

	cmd := exec.Command(bin, "-hook-dir", hook, "-cupti-lib", lib,
		"-step-endpoint", stepSock, "-cupti-endpoint", cuptiSock,
		"vllm", "serve", "m", "--otlp-traces-endpoint", "grpc://127.0.0.1:4317")
	targets := filepath.Join(tmp, "engines")
	cmd.Env = []string{"PATH=" + pathDir + ":/usr/bin:/bin", "PYTHONPATH=/app", "HOME=/home/u", envTargetsDir + "=" + targets}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), stderr.String())

	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	want := map[string]string{
		"PYTHONPATH":                         hook + ":/app",
		"INFERPROF_STEP_ENDPOINT":            stepSock,
		"OTEL_SERVICE_NAME":                  "vllm",
		"CUDA_INJECTION64_PATH":              lib,
		"INFERPROF_CUPTI_ENDPOINT":           cuptiSock,
		"OTEL_EXPORTER_OTLP_TRACES_INSECURE": "true",
		// Supervised, the engine writes to a pipe (supervise.go).
		envUnbuffered: "1",
		// A random id per launch (identity.go).
		// and the served model from the command line (model.go).
		envResourceAttrs: attrInstanceID + "=" + resourceAttribute(got[envResourceAttrs], attrInstanceID) + "," + attrModelName + "=m",
	}
	for k, v := range want {
		assert.Equalf(t, v, got[k], "%s in the engine's environment", k)
	}
	assert.Equal(t, "/home/u", got["HOME"], "the rest of the environment is passed on")

	// One "set" line per variable changed, naming the value the engine got,
	// and nothing else.
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	require.Len(t, lines, len(want)+1, stderr.String())
	// The last line names the scrape target it wrote for the engine
	// (scrape.go), named by the engine's pid; the launcher removed it when
	// the engine ended.
	last := lines[len(lines)-1]
	prefix := "inferprof-run: wrote engine metrics: http://127.0.0.1:8000/metrics, " +
		"scraped by the collector's prometheus/engines receiver from " + targets + "/"
	require.True(t, strings.HasPrefix(last, prefix), last)
	pid, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(last, prefix), ".json"))
	require.NoError(t, err, last)
	assert.NotEqual(t, cmd.Process.Pid, pid, "supervised: the engine is the launcher's child")
	assert.NoFileExists(t, filepath.Join(targets, strconv.Itoa(pid)+".json"), "removed once the engine ended")
	lines = lines[:len(lines)-1]
	for _, line := range lines {
		kv, ok := strings.CutPrefix(line, "inferprof-run: set ")
		require.Truef(t, ok, "unexpected line %q", line)
		kv, why, ok := strings.Cut(kv, "  (")
		require.Truef(t, ok && why != ")", "line %q gives no reason", line)
		k, v, _ := strings.Cut(kv, "=")
		assert.Equalf(t, want[k], v, "printed %s", k)
		assert.Equalf(t, got[k], v, "printed %s differs from what the engine got", k)
	}
	assert.Contains(t, stderr.String(), "grpc://127.0.0.1:4317", "the insecure line names the endpoint")

	// -quiet prints nothing when nothing is missing.
	cmd = exec.Command(bin, "-quiet", "-hook-dir", hook, "-cupti-lib", lib,
		"-step-endpoint", stepSock, "-cupti-endpoint", cuptiSock, "vllm", "serve", "m")
	cmd.Env = []string{"PATH=" + pathDir + ":/usr/bin:/bin", envTargetsDir + "=" + targets}
	stderr.Reset()
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	require.NoError(t, cmd.Run())
	assert.Empty(t, stderr.String())
}

func TestHelpDescribesWhatItDoes(t *testing.T) {
	var out bytes.Buffer
	_, err := parseArgs([]string{"-h"}, noEnv, &out)
	require.ErrorIs(t, err, flag.ErrHelp)
	help := out.String()
	// Every variable the plan can set is explained in the help.
	for _, k := range []string{envPythonPath, envServiceName, envInjection, "LD_LIBRARY_PATH", envTracesInsecure, envStepEndpoint, envCUPTIEndpoint, envResourceAttrs, attrModelName, "--timeline"} {
		assert.Contains(t, help, k)
	}
	for _, f := range []string{"-quiet", "-dry-run", "-no-hook", "-no-cupti", "-hook-dir", "-cupti-lib"} {
		assert.Contains(t, help, f)
	}
	assert.Contains(t, help, "../share/inferprof/python/bootstrap", "the install layout searched")
}

// TestInstallLayout copies the parts as `make install` lays them out
// (docs/deployment.md) and checks that inferprof-run finds the hook there by
// itself and that the hook loads in the engine's interpreter.
func TestInstallLayout(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	root := repoRoot()
	prefix := t.TempDir()
	bin := filepath.Join(prefix, "bin", "inferprof-run")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join(root, "cmd", "inferprof-run")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))
	share := filepath.Join(prefix, "share", "inferprof", "python")
	for _, dir := range []string{"bootstrap", "inferprof_hook"} {
		cp := exec.Command("cp", "-r", filepath.Join(root, "integrations", "python", dir), share+"/")
		require.NoError(t, os.MkdirAll(share, 0o755))
		out, err := cp.CombinedOutput()
		require.NoError(t, err, string(out))
	}

	stepSock, _ := listenSockets(t)
	cmd := exec.Command(bin, "-no-cupti", "-step-endpoint", stepSock, "python3", "-c",
		"import sys, inferprof_hook; print(any(type(f).__name__ == '_Finder' for f in sys.meta_path))")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	assert.Equal(t, "True", strings.TrimSpace(stdout.String()), "the hook is installed in the engine's interpreter")
	assert.Contains(t, stderr.String(), "inferprof-run: set PYTHONPATH="+filepath.Join(share, "bootstrap"))
	assert.NotContains(t, stderr.String(), "warning")
}

// listenSockets serves a step socket (datagram) and a CUPTI socket (stream)
// in a temporary folder, as the collector's receivers do.
func listenSockets(t *testing.T) (step, cupti string) {
	t.Helper()
	dir := t.TempDir()
	step, cupti = filepath.Join(dir, "step.sock"), filepath.Join(dir, "cupti.sock")
	pc, err := net.ListenPacket("unixgram", step)
	require.NoError(t, err)
	t.Cleanup(func() { pc.Close() })
	l, err := net.Listen("unix", cupti)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return step, cupti
}

func TestCheckSocket(t *testing.T) {
	step, _ := listenSockets(t)
	p := &plan{}
	checkSocket(p, "engine_step", step)
	assert.Empty(t, p.notes, "a served socket gets no note")
	assert.Empty(t, p.warnings)

	missing := filepath.Join(t.TempDir(), "none.sock")
	checkSocket(p, "engine_step", missing)
	require.Len(t, p.notes, 1)
	assert.Contains(t, p.notes[0], "no engine_step socket at "+missing)

}

// TestSocketPermissionWarnings: an engine user who cannot write to the
// collector's owner-only sockets is warned, not left with silent drops.
// Root may write anywhere, so as root the launcher runs as nobody.
func TestSocketPermissionWarnings(t *testing.T) {
	step, _ := listenSockets(t)
	require.NoError(t, os.Chmod(step, 0o600))
	closedDir := filepath.Join(t.TempDir(), "closed")
	require.NoError(t, os.Mkdir(closedDir, 0o700))
	hidden := filepath.Join(closedDir, "cupti.sock")

	if os.Geteuid() != 0 {
		require.NoError(t, os.Chmod(step, 0o400))
		require.NoError(t, os.Chmod(closedDir, 0o000))
		t.Cleanup(func() { _ = os.Chmod(closedDir, 0o700) })
		p := &plan{}
		checkSocket(p, "engine_step", step)
		checkSocket(p, "cupti", hidden)
		require.Len(t, p.warnings, 2)
		assert.Contains(t, p.warnings[0], "cannot write to the engine_step socket")
		assert.Contains(t, p.warnings[1], "its folder is not open to this user")
		return
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("running as root without setpriv (util-linux) to drop to another user")
	}
	// The socket stays root's, 0600, as the collector leaves it; its folder
	// is opened so that only the socket's own mode is in the way.
	require.NoError(t, os.Chmod(filepath.Dir(step), 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(filepath.Dir(step)), 0o755)) // t.TempDir's own root
	binDir, err := os.MkdirTemp("", "inferprof-run-bin")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(binDir) })
	require.NoError(t, os.Chmod(binDir, 0o755))
	bin := filepath.Join(binDir, "inferprof-run")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join(repoRoot(), "cmd", "inferprof-run")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))
	lib := filepath.Join(binDir, cuptiLibName)
	require.NoError(t, os.WriteFile(lib, nil, 0o644))

	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin,
		"-dry-run", "-no-hook", "-cupti-lib", lib, "-cupti-endpoint", hidden, "true")
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "its folder is not open to this user", "cupti socket in a closed folder")

	// The hook folder as nobody can read it: the checkout may sit under a
	// folder only its owner may enter (mktemp -d).
	hookDir := filepath.Join(binDir, "bootstrap")
	require.NoError(t, os.Mkdir(hookDir, 0o755))
	site, err := os.ReadFile(filepath.Join(repoRoot(), "integrations", "python", "bootstrap", "sitecustomize.py"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(hookDir, "sitecustomize.py"), site, 0o644))
	cmd = exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin,
		"-dry-run", "-no-cupti", "-hook-dir", hookDir,
		"-step-endpoint", step, "true")
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "cannot write to the engine_step socket "+step)
}
