// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
)

// TestBudgetMatchesHeap fills a store well past its budget with a busy
// engine's mix and checks the estimate against the heap the store really
// holds (runtime.MemStats after a GC): the held heap stays under the budget,
// and the estimate is an upper bound, not a wild one. Not parallel: the heap
// is the process's.
func TestBudgetMatchesHeap(t *testing.T) {
	t.Run("mix=busy_engine", func(t *testing.T) { checkHeap(t, func(ptrace.Traces, int) {}) })
	// Every request names its own model: interned strings held once each,
	// the worst case for counting them once.
	t.Run("mix=distinct_models", func(t *testing.T) {
		checkHeap(t, func(td ptrace.Traces, batch int) {
			for i, sp := range td.ResourceSpans().At(1).ScopeSpans().At(0).Spans().All() {
				if sp.Name() == "llm_request" {
					sp.Attributes().PutStr(names.AttrRequestModel, "model-"+strconv.Itoa(batch)+"-"+strconv.Itoa(i))
				}
			}
		})
	})
}

func checkHeap(t *testing.T, mutate func(td ptrace.Traces, batch int)) {
	const budget = 16 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := New(budget, time.Hour, func() time.Time { return base })
	records := 0
	for batch := 0; s.Stats().Evicted < 2*int64(records-int(s.Stats().Evicted)) || records == 0; batch++ {
		// A fresh batch each time, as from the wire: every request id is
		// its own string.
		td := benchBatch(2000, 100)
		mutate(td, batch)
		s.ConsumeTraces(td)
		records += td.SpanCount()
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	used := s.Used()
	live := int64(records) - s.Stats().Evicted
	runtime.KeepAlive(s)
	t.Logf("budget %d B, estimate %d B, held %d B (%.1f B/record over %d records, estimate/held %.2f)",
		budget, used, held, float64(held)/float64(live), live, float64(used)/float64(held))

	require.Positive(t, live)
	assert.LessOrEqual(t, used, int64(budget))
	assert.LessOrEqual(t, held, int64(budget), "the heap the store holds stays under its budget")
	assert.GreaterOrEqual(t, float64(used), 0.98*float64(held), "the estimate counts what is held")
	assert.LessOrEqual(t, float64(used), 1.15*float64(held), "the estimate is not pessimistic")
}
