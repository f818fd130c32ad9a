// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package spanbatch

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func TestTakeAndRemove(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "vllm")
	rs.SetSchemaUrl("https://opentelemetry.io/schemas/1.38.0")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("vllm.llm_engine")
	for _, n := range []string{"a", "b", "c", "d"} {
		ss.Spans().AppendEmpty().SetName(n)
	}
	b := Take(rs, ss, ss.Spans().At(1))()
	d := Take(rs, ss, ss.Spans().At(3))()
	RemoveIndexes(ss.Spans(), []int{1, 3})
	require.Equal(t, 2, ss.Spans().Len())
	assert.Equal(t, "a", ss.Spans().At(0).Name())
	assert.Equal(t, "c", ss.Spans().At(1).Name())
	assert.Equal(t, "b", Only(b).Name())
	assert.Equal(t, "d", Only(d).Name())
	v, _ := b.ResourceSpans().At(0).Resource().Attributes().Get("service.name")
	assert.Equal(t, "vllm", v.Str(), "the resource travels with the span")
	assert.Equal(t, "https://opentelemetry.io/schemas/1.38.0", b.ResourceSpans().At(0).SchemaUrl())
	assert.Equal(t, "vllm.llm_engine", b.ResourceSpans().At(0).ScopeSpans().At(0).Scope().Name())

	RemoveEmpty(td)
	assert.Equal(t, 1, td.ResourceSpans().Len(), "a scope with spans stays")
	RemoveIndexes(ss.Spans(), []int{0, 1})
	RemoveEmpty(td)
	assert.Zero(t, td.ResourceSpans().Len(), "an emptied resource goes")
}
