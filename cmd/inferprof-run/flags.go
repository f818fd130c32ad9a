// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
)

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
