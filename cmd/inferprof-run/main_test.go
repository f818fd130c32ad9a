package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
	assert.Contains(t, p.changes, "OTEL_SERVICE_NAME=llama")
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
