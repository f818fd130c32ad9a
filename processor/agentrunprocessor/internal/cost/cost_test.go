// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cost

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sec = int64(time.Second)

func TestPriceTable(t *testing.T) {
	p := New(Settings{Prices: map[string]Price{
		"m":  {Input: 2, CachedInput: 0.5, HasCached: true, Output: 8, Currency: "USD"},
		"m2": {Input: 3, Output: 15, Currency: "EUR"},
	}})
	c, ok := p.Model("m", Tokens{In: 1000, Cached: 400, Out: 100, HasIn: true, HasOut: true, HasCch: true})
	require.True(t, ok)
	assert.InDelta(t, (600*2+400*0.5+100*8)/1e6, c.Value, 1e-15)
	assert.Equal(t, MethodPriceTable, c.Method)
	c, ok = p.Model("m2", Tokens{In: 1000, Cached: 400, Out: 100, HasIn: true, HasOut: true, HasCch: true})
	require.True(t, ok)
	assert.InDelta(t, (1000*3+100*15)/1e6, c.Value, 1e-15, "no cached price: cached tokens cost input")
	assert.Equal(t, "EUR", c.Currency)
	_, ok = p.Model("unknown", Tokens{In: 1, HasIn: true})
	assert.False(t, ok, "no price is invented")
	_, ok = p.Model("m", Tokens{})
	assert.False(t, ok, "no tokens, no cost")
	assert.Nil(t, New(Settings{}), "nothing configured: no pricer")
}

func gpuPricer() *Pricer {
	return New(Settings{
		GPUs:       map[string]GPUPrice{"NVIDIA H200": {Hour: 3.6, Currency: "USD"}, "NVIDIA L4": {Hour: 0.72, Currency: "USD"}},
		DefaultGPU: "NVIDIA H200", DefaultGPUCount: 1, ShareWindow: time.Minute, MaxInstances: 2, MaxRecordsPerInstance: 100,
		Prices: map[string]Price{"self": {Input: 1, Output: 1, Currency: "USD"}},
	})
}

func TestEngineGPUTime(t *testing.T) {
	c, ok := gpuPricer().Engine(EngineRequest{GPU: "NVIDIA L4", GPUTime: 10, HasGPUTime: true, End: 1})
	require.True(t, ok)
	assert.InDelta(t, 10*0.72/3600, c.Value, 1e-15)
	assert.Equal(t, MethodGPUTime, c.Method)
}

// TestEngineTokenShare: one request alone pays its own wall time; the next
// shares the wall time since the first began by tokens; an idle window
// starts over.
func TestEngineTokenShare(t *testing.T) {
	p := gpuPricer()
	perSec := 3.6 / 3600
	tok := func(in, out int64) Tokens { return Tokens{In: in, Out: out, HasIn: true, HasOut: true} }
	c, ok := p.Engine(EngineRequest{Instance: "a", GPUCount: 2, Tokens: tok(90, 10), Start: 0, End: 4 * sec})
	require.True(t, ok)
	assert.InDelta(t, 4*2*perSec, c.Value, 1e-12)
	assert.Equal(t, MethodTokenShare, c.Method)
	c, _ = p.Engine(EngineRequest{Instance: "a", GPUCount: 2, Tokens: tok(250, 50), Start: 5 * sec, End: 10 * sec})
	assert.InDelta(t, 10*2*perSec*300/400, c.Value, 1e-12)
	// 70 s later: the window is empty again.
	c, _ = p.Engine(EngineRequest{Instance: "a", GPUCount: 2, Tokens: tok(1, 1), Start: 80 * sec, End: 81 * sec})
	assert.InDelta(t, 1*2*perSec, c.Value, 1e-12)
	// Another instance has its own ledger; the default GPU count is 1.
	c, _ = p.Engine(EngineRequest{Instance: "b", Tokens: tok(1, 1), Start: 0, End: 2 * sec})
	assert.InDelta(t, 2*perSec, c.Value, 1e-12)
	// A GPU without a price falls back to the price table.
	c, ok = p.Engine(EngineRequest{GPU: "NVIDIA A10", Model: "self", Tokens: tok(1e6, 0), End: 1})
	require.True(t, ok)
	assert.Equal(t, MethodPriceTable, c.Method)
	assert.InDelta(t, 1.0, c.Value, 1e-12)
}

// TestLedgerBounded: instances and records stay within their caps.
func TestLedgerBounded(t *testing.T) {
	p := gpuPricer()
	for i := range 10 {
		for j := range 300 {
			p.Engine(EngineRequest{Instance: fmt.Sprint(i), Tokens: Tokens{In: 1, HasIn: true}, Start: int64(j) * sec / 100, End: int64(j+1) * sec / 100})
		}
	}
	l := p.ledger
	assert.LessOrEqual(t, len(l.inst), 2)
	for _, in := range l.inst {
		assert.LessOrEqual(t, len(in.recs)-in.head, 100)
		var sum int64
		for _, r := range in.recs[in.head:] {
			sum += r.tokens
		}
		assert.Equal(t, sum, in.sum)
	}
}
