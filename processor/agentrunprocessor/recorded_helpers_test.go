// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/inferprof/inferprof/internal/agentrecording"
	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/metadata"
)

// loadRecordings reads the real SDKs' recordings where make agents-real
// writes them and TestAgentsRecorded replays them through the binary
// (e2e/agents/testdata/README.md says why there), or
// $INFERPROF_AGENTS_RECORDINGS.
func loadRecordings(tb testing.TB) []agentrecording.Recording {
	tb.Helper()
	recs, err := agentrecording.Load(agentrecording.Dir(filepath.Join("..", "..")))
	require.NoError(tb, err)
	return recs
}

// splitByScope cuts every batch into one batch per resource and scope, in
// their order: spans of one request arriving in separate requests.
func splitByScope(tds []ptrace.Traces) []ptrace.Traces {
	var out []ptrace.Traces
	for _, td := range tds {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				one := ptrace.NewTraces()
				ors := one.ResourceSpans().AppendEmpty()
				rs.Resource().CopyTo(ors.Resource())
				ors.SetSchemaUrl(rs.SchemaUrl())
				ss.CopyTo(ors.ScopeSpans().AppendEmpty())
				out = append(out, one)
			}
		}
	}
	return out
}

// splitByResource cuts every batch into one batch per resource.
func splitByResource(tds []ptrace.Traces) []ptrace.Traces {
	var out []ptrace.Traces
	for _, td := range tds {
		for _, rs := range td.ResourceSpans().All() {
			one := ptrace.NewTraces()
			rs.CopyTo(one.ResourceSpans().AppendEmpty())
			out = append(out, one)
		}
	}
	return out
}

// permuteTraces is every order of tds.
func permuteTraces(tds []ptrace.Traces) [][]ptrace.Traces {
	idx := make([]string, len(tds))
	for i := range tds {
		idx[i] = string(rune('a' + i))
	}
	var out [][]ptrace.Traces
	for _, p := range permutations(idx) {
		order := make([]ptrace.Traces, len(p))
		for i, k := range p {
			order[i] = tds[k[0]-'a']
		}
		out = append(out, order)
	}
	return out
}

// replay feeds batches through privacy, inference and agent_run in the
// order given, each one ConsumeTraces, then lets the wait pass.
func replay(t *testing.T, cfg *Config, batches []ptrace.Traces, phaseSpans bool) []ptrace.Traces {
	t.Helper()
	h := newHarnessPhases(t, cfg, processortest.NewNopSettings(metadata.Type), phaseSpans)
	for _, b := range batches {
		td := ptrace.NewTraces()
		b.CopyTo(td) // the privacy processor edits in place
		h.consume(t, td)
	}
	h.now = h.now.Add(cfg.Agents.Wait + cfg.Agents.EngineWait)
	h.p.expire(t.Context(), h.now)
	return h.finishTraces(t)
}

// engineRequests is vLLM's own llm_request figures in the recording, by
// trace.
func engineRequests(tb testing.TB, rec agentrecording.Recording) map[string][]agentrecording.EngineRequest {
	tb.Helper()
	reqs, err := agentrecording.EngineRequests(rec.Batches)
	require.NoError(tb, err)
	return reqs
}

// spanTimes fails the test where the span's times do not parse.
func spanTimes(tb testing.TB, s agentrecording.Span) (start, end time.Time) {
	tb.Helper()
	start, end, err := s.Times()
	require.NoError(tb, err)
	return start, end
}

func spanSeconds(tb testing.TB, s agentrecording.Span) float64 {
	tb.Helper()
	start, end := spanTimes(tb, s)
	return end.Sub(start).Seconds()
}
