// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sample is a throwaway module whose tests pass, skip (top level and
// subtest) and fail, so goMode reads a real `go test -json` stream.
const sampleTest = `package sample

import "testing"

func TestPass(t *testing.T) {}

func TestSkipGPU(t *testing.T) { t.Skip("no GPU: NVML not loaded") }

func TestSub(t *testing.T) {
	t.Run("a", func(t *testing.T) {})
	t.Run("b", func(t *testing.T) { t.Skipf("python3 not installed") })
}

func TestFail(t *testing.T) {
	t.Log("the detail a reader needs")
	if len(t.Name()) > 0 {
		t.Fatal("boom")
	}
}
`

func runGoTestJSON(t *testing.T, withFail bool) []byte {
	t.Helper()
	dir := t.TempDir()
	src := sampleTest
	if !withFail {
		src = src[:strings.Index(src, "func TestFail")]
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module sample\n\ngo 1.22\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sample_test.go"), []byte(src), 0o644))
	// A package with no test files reports a package-level skip.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "notests"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notests", "x.go"), []byte("package notests\n"), 0o644))
	cmd := exec.Command("go", "test", "-json", "-count=1", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	out, _ := cmd.Output() // a failing test exits non-zero; the stream is what matters
	require.NotEmpty(t, out)
	return out
}

func TestGoModeRecordsPassSkipFail(t *testing.T) {
	stream := runGoTestJSON(t, true)
	dir := t.TempDir()
	var echo bytes.Buffer
	ok, err := goMode(bytes.NewReader(stream), &echo, dir)
	require.NoError(t, err)
	assert.False(t, ok, "a failing test makes the run fail")

	// Like plain go test: the failure's output is shown, passing tests are not.
	assert.Contains(t, echo.String(), "the detail a reader needs")
	assert.Contains(t, echo.String(), "boom")
	assert.NotContains(t, echo.String(), "=== RUN   TestPass")
	assert.Contains(t, echo.String(), "FAIL\tsample")
	assert.Contains(t, echo.String(), "sample/notests\t[no test files]")

	var r goResult
	b, err := os.ReadFile(filepath.Join(dir, "go.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &r))
	assert.Equal(t, 2, r.Passed, "TestPass and TestSub")
	assert.ElementsMatch(t, []string{"sample.TestFail", "sample"}, r.Failed)
	assert.ElementsMatch(t, []skip{
		{Package: "sample", Test: "TestSkipGPU", Reason: "no GPU: NVML not loaded"},
		{Package: "sample", Test: "TestSub/b", Reason: "python3 not installed"},
	}, r.Skipped)
}

func TestReportListsStagesAndReasons(t *testing.T) {
	dir := t.TempDir()
	ok, err := goMode(bytes.NewReader(runGoTestJSON(t, false)), &bytes.Buffer{}, dir)
	require.NoError(t, err)
	require.True(t, ok)

	if _, err := exec.LookPath("python3"); err == nil {
		py := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(py, "test_x.py"), []byte(
			"import unittest\nclass T(unittest.TestCase):\n"+
				"    def test_a(self): pass\n"+
				"    @unittest.skip('needs vllm installed')\n    def test_b(self): pass\n"), 0o644))
		cmd := exec.Command("python3", "-m", "unittest", "discover", "-v")
		cmd.Dir = py
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "python.log"), out, 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c.log"), []byte(
		"ipc_client tests: ok\nnative/cupti: SKIPPED the CUPTI layer test: no CUPTI headers. Install them with:\n"+
			"  apt-get install -y libcupti-dev\n(or set CUDA_HOME)\nlimits: ok\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "lint.log"), nil, 0o644))

	var out bytes.Buffer
	require.NoError(t, report(dir, &out))
	s := out.String()
	lines := strings.Split(strings.TrimSpace(s), "\n")
	last := lines[len(lines)-1]
	assert.True(t, strings.HasPrefix(last, "make test: PASS: ran lint, 2 Go tests"), last)
	assert.Contains(t, s, "no GPU: NVML not loaded")
	assert.Contains(t, s, "sample.TestSkipGPU")
	assert.Contains(t, s, "SKIPPED the CUPTI layer test: no CUPTI headers")
	assert.Contains(t, s, "apt-get install -y libcupti-dev", "the install commands are part of the reason")
	assert.Contains(t, s, "(or set CUDA_HOME)")
	assert.NotContains(t, s, "limits: ok", "the reason ends with its indented lines")
	if _, err := exec.LookPath("python3"); err == nil {
		assert.Contains(t, last, "1 Python tests")
		assert.Contains(t, s, "needs vllm installed")
		assert.Contains(t, last, "skipped 4")
	}
}

// TestSoakStageRunsWhatGoSkipped: the soak test the go stage skips is not
// reported as skipped once its own stage ran it; other skips stay.
func TestSoakStageRunsWhatGoSkipped(t *testing.T) {
	stages := []stage{{name: "go", skips: []skipGroup{
		{Reason: "set SOAK_DURATION", Tests: []string{soakTest}},
		{Reason: "no GPU", Tests: []string{"a.TestGPU", soakTest}},
	}}}
	got := dropSkipped(stages, soakTest)
	require.Len(t, got[0].skips, 1)
	assert.Equal(t, []string{"a.TestGPU"}, got[0].skips[0].Tests)
}
