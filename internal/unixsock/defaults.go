// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package unixsock // import "github.com/inferprof/inferprof/internal/unixsock"

// The sockets' defaults, the one home of each: the receivers and
// inferprof-run use these; the step hook (integrations/python/
// inferprof_hook/_state.py) and the CUPTI library (native/cupti/
// cupti_inject.c) cannot import Go, so defaults_test.go reads their
// sources and fails when they drift.
const (
	// DefaultStepEndpoint is where the step hook sends and the engine_step
	// receiver listens unless EnvStepEndpoint says otherwise.
	DefaultStepEndpoint = "/tmp/inferprof/engine-step.sock"
	// EnvStepEndpoint moves the step socket, for the hook and the shipped
	// configs alike.
	EnvStepEndpoint = "INFERPROF_STEP_ENDPOINT"
	// DefaultCUPTIEndpoint is where the CUPTI library connects and the
	// cupti receiver listens unless EnvCUPTIEndpoint says otherwise.
	DefaultCUPTIEndpoint = "/tmp/inferprof/cupti.sock"
	// EnvCUPTIEndpoint moves the CUPTI socket.
	EnvCUPTIEndpoint = "INFERPROF_CUPTI_ENDPOINT"
)
