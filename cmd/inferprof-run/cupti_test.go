// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cudaLayout makes a source-tree layout: bin/inferprof-run and the injection
// library built for each CUDA major in majors, plus a fake engine whose #!
// interpreter answers the torch probe as a venv with CUDA cuda would.
func cudaLayout(t *testing.T, cuda string, majors ...string) (exe, engine, cuptiDir string) {
	t.Helper()
	root := t.TempDir()
	exe = filepath.Join(root, "bin", "inferprof-run")
	for _, m := range majors {
		p := filepath.Join(root, "native", "cupti", "build", "cuda"+m, cuptiLibName)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("so"), 0o644))
	}
	cuptiDir = filepath.Join(root, "venv", "lib", "python3.12", "site-packages", "nvidia", "cuda_cupti", "lib")
	require.NoError(t, os.MkdirAll(cuptiDir, 0o755))
	py := filepath.Join(root, "venv", "bin", "python3")
	require.NoError(t, os.MkdirAll(filepath.Dir(py), 0o755))
	// The interpreter runs the probe script: it prints what torch and the
	// nvidia-cuda-cupti wheel would.
	require.NoError(t, os.WriteFile(py, []byte("#!/bin/sh\nprintf '%s\\n%s\\n' '"+cuda+"' '"+cuptiDir+"'\n"), 0o755))
	engine = filepath.Join(root, "venv", "bin", "vllm")
	require.NoError(t, os.WriteFile(engine, []byte("#!"+py+"\nimport sys\n"), 0o755))
	return exe, engine, cuptiDir
}

func TestSelectCUPTIMatchesTorchCUDA(t *testing.T) {
	for _, tc := range []struct{ cuda, want string }{{"12.8", "cuda12"}, {"13.0", "cuda13"}} {
		t.Run(tc.cuda, func(t *testing.T) {
			exe, engine, cuptiDir := cudaLayout(t, tc.cuda, "12", "13")
			vars := map[string]string{"LD_LIBRARY_PATH": "/opt/x"}
			set := func(k, v string) { vars[k] = v }
			var warnings []string
			lib := selectCUPTI(exe, []string{engine, "serve", "m"}, vars, set, &warnings)
			assert.Empty(t, warnings)
			assert.Equal(t, tc.want, filepath.Base(filepath.Dir(lib)))
			assert.Equal(t, cuptiDir+string(os.PathListSeparator)+"/opt/x", vars["LD_LIBRARY_PATH"],
				"the engine's own libcupti comes first")
		})
	}
}

func TestSelectCUPTIRefusesAnotherMajor(t *testing.T) {
	exe, engine, _ := cudaLayout(t, "13.0", "12")
	vars := map[string]string{}
	var warnings []string
	lib := selectCUPTI(exe, []string{engine}, vars, func(k, v string) { vars[k] = v }, &warnings)
	assert.Empty(t, lib, "a CUDA 12 build must not be injected into a CUDA 13 engine")
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0], "CUDA 13")
	assert.NotContains(t, vars, "LD_LIBRARY_PATH")
}

func TestSelectCUPTIOverrideAndUnknown(t *testing.T) {
	exe, _, _ := cudaLayout(t, "", "12")
	var warnings []string
	vars := map[string]string{envCUDAMajor: "12"}
	lib := selectCUPTI(exe, []string{"/no/such/engine"}, vars, func(string, string) {}, &warnings)
	assert.Equal(t, "cuda12", filepath.Base(filepath.Dir(lib)))
	assert.Empty(t, warnings)

	// No torch to ask: the one build there is used, with a warning.
	lib = selectCUPTI(exe, []string{"/no/such/engine"}, map[string]string{}, func(string, string) {}, &warnings)
	assert.Equal(t, "cuda12", filepath.Base(filepath.Dir(lib)))
	require.Len(t, warnings, 1)
	assert.True(t, strings.Contains(warnings[0], envCUDAMajor))
}
