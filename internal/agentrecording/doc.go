// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package agentrecording reads the real agent SDKs' recordings that
// make agents-real writes to e2e/agents/testdata (each SDK's OTLP requests
// and agent.py's own clock) and computes the figures the tests hold the
// collector to from them, independently of the collector's own reading: the
// clock's sums, the engine's own llm_request latencies, which span is a
// model call or a tool by what the instrumentation wrote.
//
// It is shared by the agent_run processor's recorded-input tests and the
// e2e replay (TestAgentsRecorded), which cannot import each other's tests.
// The collector never imports it.
package agentrecording // import "github.com/inferprof/inferprof/internal/agentrecording"
