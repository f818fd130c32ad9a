// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import "github.com/inferprof/inferprof/internal/unixsock"

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

// options are what the user asked for: the flags (parseArgs), with their
// defaults from the environment, and the command.
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

func or(v, def string) string {
	if v != "" {
		return v
	}
	return def
}
