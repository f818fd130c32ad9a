// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"bytes"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/metadata"
)

// FuzzAgentRecorded feeds OTLP/JSON requests, one a line, through privacy,
// inference and agent_run, each line one ConsumeTraces (a line that does
// not decode is what the receiver would refuse: skipped). The seeds are the
// real SDKs' recordings, read from their one home (not copied into
// testdata/fuzz): each recording whole, and each of its requests alone.
// Every span sent comes out once and every run's figures add up
// (checkAgentOutput). Run it with -fuzzminimizetime 1x: minimizing a
// whole recording (120 kB) takes the default minute per new input.
func FuzzAgentRecorded(f *testing.F) {
	for _, rec := range loadRecordings(f) {
		f.Add(joinLines(rec.Lines))
		for _, l := range rec.Lines {
			f.Add(l)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var in []ptrace.Traces
		for _, l := range bytes.Split(data, []byte{'\n'}) {
			td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(l)
			if err != nil || td.SpanCount() == 0 {
				continue
			}
			in = append(in, td)
		}
		cfg := agentGoldenConfig()
		cfg.Agents.MaxSpansPerTrace = 200
		h := newHarness(t, cfg, processortest.NewNopSettings(metadata.Type))
		sent := make([]ptrace.Traces, len(in))
		for i, td := range in {
			sent[i] = ptrace.NewTraces()
			td.CopyTo(sent[i])
			h.consume(t, td)
		}
		h.now = h.now.Add(cfg.Agents.Wait + cfg.Agents.EngineWait)
		h.p.expire(t.Context(), h.now)
		checkAgentOutput(t, sent, h.finishTraces(t))
	})
}
