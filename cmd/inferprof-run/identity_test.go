// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestInstanceIDIsGeneratedOrKept(t *testing.T) {
	id := func() string { return "new-id" }
	for _, tc := range []struct{ in, want string }{
		{"", "service.instance.id=new-id"},
		{"deployment.environment=prod", "deployment.environment=prod,service.instance.id=new-id"},
		{"service.instance.id=mine", "service.instance.id=mine"},
		{"a=b, service.instance.id = mine ,c=d", "a=b, service.instance.id = mine ,c=d"},
		{"service.instance.id=", "service.instance.id=,service.instance.id=new-id"},
		{"service.instance.id=old,service.instance.id=", "service.instance.id=old,service.instance.id=,service.instance.id=new-id"},
	} {
		got, changed := withInstanceID(tc.in, id)
		assert.Equal(t, tc.want, got, tc.in)
		assert.Equal(t, tc.in != tc.want, changed, tc.in)
		assert.NotEmpty(t, resourceAttribute(got, attrInstanceID), "the result names an instance: %q", got)
	}
	assert.Equal(t, "x,y", resourceAttribute("service.instance.id=x%2Cy", attrInstanceID), "percent-decoded")
	assert.Equal(t, "last", resourceAttribute("service.instance.id=first,service.instance.id=last", attrInstanceID))
}

func TestNewInstanceIDsAreRandomUUIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := newInstanceID()
		assert.Regexp(t, uuidV4, id)
		assert.False(t, seen[id])
		seen[id] = true
	}
}

func TestPlanSetsTheInstanceID(t *testing.T) {
	exe, _, _ := layout(t)
	o, err := parseArgs([]string{"vllm", "serve", "m"}, noEnv, &bytes.Buffer{})
	require.NoError(t, err)
	p1, err := makePlan(o, []string{"OTEL_RESOURCE_ATTRIBUTES=k8s.pod.name=p"}, exe, lookOK)
	require.NoError(t, err)
	p2, err := makePlan(o, nil, exe, lookOK)
	require.NoError(t, err)
	a1, a2 := envMap(p1.env)[envResourceAttrs], envMap(p2.env)[envResourceAttrs]
	assert.Regexp(t, `^k8s\.pod\.name=p,service\.instance\.id=`, a1, "the user's attributes are kept")
	assert.Regexp(t, uuidV4, resourceAttribute(a1, attrInstanceID))
	assert.NotEqual(t, resourceAttribute(a1, attrInstanceID), resourceAttribute(a2, attrInstanceID),
		"two launches, two instances")
	assert.Contains(t, changed(p1), envResourceAttrs+"="+a1, "shown by -dry-run")

	p3, err := makePlan(o, []string{"OTEL_RESOURCE_ATTRIBUTES=service.instance.id=replica-7,inferprof.model.name=m"}, exe, lookOK)
	require.NoError(t, err)
	assert.Equal(t, "service.instance.id=replica-7,inferprof.model.name=m", envMap(p3.env)[envResourceAttrs])
	for _, c := range changed(p3) {
		assert.NotContains(t, c, envResourceAttrs+"=", "nothing changed")
	}
}

// TestEngineProcessesShareTheLaunchersInstanceID runs python3 through the
// built inferprof-run with the hook loaded; the process and a child it
// spawns (as vLLM spawns its EngineCore) read the same instance id, through
// the hook's own reader, as the launcher put in the environment.
func TestEngineProcessesShareTheLaunchersInstanceID(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	root := repoRoot()
	bin := filepath.Join(t.TempDir(), "inferprof-run")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join(root, "cmd", "inferprof-run")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	script := `import json, os, subprocess, sys
from inferprof_hook import _state
child = subprocess.run([sys.executable, "-c", "from inferprof_hook import _state; print(_state.instance_id())"],
                       capture_output=True, text=True, check=True).stdout.strip()
print(json.dumps({"env": os.environ["OTEL_RESOURCE_ATTRIBUTES"], "hook": _state.instance_id(), "child": child}))`
	for _, preset := range []string{"", "service.name=x,service.instance.id=my-replica"} {
		cmd := exec.Command(bin, "-no-cupti", "-hook-dir", filepath.Join(root, "integrations", "python", "bootstrap"),
			"python3", "-c", script)
		cmd.Env = append(os.Environ(), "PYTHONPATH=", envResourceAttrs+"="+preset)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), stderr.String())
		var got map[string]string
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &got), stdout.String())
		want := resourceAttribute(got["env"], attrInstanceID)
		if preset != "" {
			assert.Equal(t, "my-replica", want, "the user's id is kept")
		} else {
			assert.Regexp(t, uuidV4, want)
		}
		assert.Equal(t, want, got["hook"], "the hook reads what the launcher set")
		assert.Equal(t, want, got["child"], "and so do the engine's child processes")
	}
}
