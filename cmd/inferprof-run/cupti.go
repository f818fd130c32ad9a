// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// envCUDAMajor overrides the CUDA major probed from the engine's torch.
const envCUDAMajor = "INFERPROF_CUDA_MAJOR"

// probeTimeout bounds the one Python run that imports torch.
const probeTimeout = 60 * time.Second

// probeScript prints torch.version.cuda and the folder of the CUPTI that
// the engine's wheels ship (nvidia-cuda-cupti), each on its own line.
const probeScript = `import os
try:
    import torch
    print(torch.version.cuda or "")
except Exception:
    print("")
try:
    import nvidia.cuda_cupti as c
    print(os.path.join(os.path.dirname(c.__file__), "lib"))
except Exception:
    print("")
`

// cudaProbe is what the engine's Python says about its CUDA.
type cudaProbe struct {
	major    string // "12", "13"; "" unknown
	cuptiDir string // folder holding the libcupti.so the engine's wheels ship; "" none
}

// probeCUDA runs the engine's Python once. A variable set for it wins:
// INFERPROF_CUDA_MAJOR skips the probe (and the slow torch import).
var probeCUDA = func(args []string, vars map[string]string) cudaProbe {
	if m := vars[envCUDAMajor]; m != "" {
		return cudaProbe{major: m}
	}
	py := enginePython(args)
	if py == "" {
		return cudaProbe{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-c", probeScript)
	cmd.Env = envList(vars)
	out, err := cmd.Output()
	if err != nil {
		return cudaProbe{}
	}
	lines := strings.Split(strings.TrimSpace(string(out))+"\n", "\n")
	p := cudaProbe{}
	if v := strings.TrimSpace(lines[0]); v != "" {
		p.major, _, _ = strings.Cut(v, ".")
	}
	if len(lines) > 1 {
		if d := strings.TrimSpace(lines[1]); d != "" && exists(d) {
			p.cuptiDir = d
		}
	}
	return p
}

// enginePython finds the interpreter that runs the engine: the command
// itself when it is a Python, else the #! line of a console script such as
// vllm; "" when neither.
func enginePython(args []string) string {
	if len(args) == 0 {
		return ""
	}
	if strings.HasPrefix(filepath.Base(args[0]), "python") {
		p, err := exec.LookPath(args[0])
		if err != nil {
			return ""
		}
		return p
	}
	script, err := exec.LookPath(args[0])
	if err != nil {
		return ""
	}
	f, err := os.Open(script)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	if !strings.HasPrefix(line, "#!") {
		return ""
	}
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if len(fields) == 0 {
		return ""
	}
	if filepath.Base(fields[0]) == "env" && len(fields) > 1 {
		p, err := exec.LookPath(fields[1])
		if err != nil {
			return ""
		}
		return p
	}
	if !strings.HasPrefix(filepath.Base(fields[0]), "python") {
		return ""
	}
	return fields[0]
}

func envList(vars map[string]string) []string {
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	return out
}

// selectCUPTI picks the injection library built for the engine's CUDA major
// (native/cupti builds it to build/cuda<major>/) and puts the libcupti of
// the engine's wheels on LD_LIBRARY_PATH, so the library loads the CUPTI
// that matches the engine's CUDA. It returns "" with a warning when no build
// fits.
func selectCUPTI(exe string, args []string, vars map[string]string, set func(k, v string), warnings *[]string) string {
	probe := probeCUDA(args, vars)
	var flat, other string
	for _, c := range cuptiCandidates(exe) {
		if probe.major != "" {
			if p := filepath.Join(filepath.Dir(c), "cuda"+probe.major, cuptiLibName); exists(p) {
				if probe.cuptiDir != "" {
					set("LD_LIBRARY_PATH", prependPath(probe.cuptiDir, vars["LD_LIBRARY_PATH"]))
				}
				return filepath.Clean(p)
			}
		}
		if flat == "" && exists(c) {
			flat = filepath.Clean(c)
		}
		if other == "" {
			if m, _ := filepath.Glob(filepath.Join(filepath.Dir(c), "cuda*", cuptiLibName)); len(m) > 0 {
				other = m[0]
			}
		}
	}
	switch {
	case probe.major != "" && other != "":
		*warnings = append(*warnings, "no "+cuptiLibName+" built for the engine's CUDA "+probe.major+" (found "+other+
			"); build it with make -C native/cupti lib CUPTI_HOME=<CUDA "+probe.major+" CUPTI>; running without GPU kernel activity")
		return ""
	case flat != "":
		return flat // a build of one major, placed by hand: the user chose it
	case other != "":
		*warnings = append(*warnings, "could not read torch.version.cuda from the engine's Python (set "+envCUDAMajor+"); using "+other)
		return other
	}
	return ""
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

// cuptiCandidates are the paths searched for the injection library.
func cuptiCandidates(exe string) []string {
	d := filepath.Dir(exe)
	return []string{
		filepath.Join(d, cuptiLibName),
		filepath.Join(d, "..", "lib", cuptiLibName),
		filepath.Join(d, "..", "native", "cupti", "build", cuptiLibName),
	}
}
