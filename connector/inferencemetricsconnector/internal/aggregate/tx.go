// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate

import "go.opentelemetry.io/collector/pdata/pcommon"

// Tx holds the delta intervals one Flush took out of the store, until the
// caller knows whether the metrics built from them were accepted: Commit
// forgets them, Restore puts them back so the next flush carries them (the
// pattern of the graphsignal exporter's delta converter). Observations made
// between Flush and Restore are kept: Restore merges, it does not overwrite.
// Cumulative stores never reset, so their Tx is empty.
type Tx struct {
	entries []txEntry
}

type txEntry struct {
	s     *Series
	start pcommon.Timestamp
	req   *RequestStats
	step  *StepStats
	agent *AgentStats
	cost  *CostStats
	turn  *TurnStats
}

// Len returns the number of series intervals the Tx holds.
func (tx *Tx) Len() int { return len(tx.entries) }

// take moves s's interval into the Tx and gives s empty stats, from the
// store's spares when it has some.
func (tx *Tx) take(st *Store, s *Series) {
	e := txEntry{s: s, start: s.start, req: s.Req, step: s.Step}
	if s.Req != nil {
		s.Req = st.spareRequestStats()
	}
	if s.Step != nil {
		s.Step = st.spareStepStats()
	}
	st.takeFamily(s, &e)
	tx.entries = append(tx.entries, e)
}

// Commit forgets the intervals: they were delivered.
func (st *Store) Commit(tx *Tx) {
	for _, e := range tx.entries {
		st.recycle(e.req, e.step)
	}
	tx.entries = nil
}

// Restore merges the intervals back into their series, which then start at
// the interval's original start: the next flush reports both intervals as
// one. A series the Tx holds is never swept before its Tx is resolved:
// flushes do not overlap, and only a flush sweeps.
func (st *Store) Restore(tx *Tx) {
	for _, e := range tx.entries {
		s := e.s
		if e.req != nil {
			s.Req.merge(e.req)
		}
		if e.step != nil {
			s.Step.merge(e.step)
		}
		restoreFamily(s, e)
		s.start = e.start
		s.updated = true
		st.recycle(e.req, e.step)
	}
	tx.entries = nil
}

func (st *Store) spareRequestStats() *RequestStats {
	if n := len(st.spareReq); n > 0 {
		r := st.spareReq[n-1]
		st.spareReq = st.spareReq[:n-1]
		return r
	}
	return st.newRequestStats()
}

func (st *Store) spareStepStats() *StepStats {
	if n := len(st.spareStep); n > 0 {
		p := st.spareStep[n-1]
		st.spareStep = st.spareStep[:n-1]
		return p
	}
	return st.newStepStats()
}

// recycle resets stats and keeps them for the next flush's series; there
// are never more spares than series, so this is bounded by the limit.
func (st *Store) recycle(r *RequestStats, p *StepStats) {
	if r != nil {
		r.reset()
		st.spareReq = append(st.spareReq, r)
	}
	if p != nil {
		p.reset()
		st.spareStep = append(st.spareStep, p)
	}
}

func (r *RequestStats) hists() []*Histogram {
	return []*Histogram{&r.TTFT, &r.TPOT, &r.Duration, &r.Queue, &r.Prefill, &r.Decode, &r.Other, &r.ITL, &r.InputTokens, &r.OutputTokens, &r.CPUOverheadShare}
}

func (r *RequestStats) reset() {
	for _, h := range r.hists() {
		h.reset()
	}
	r.Requests, r.Goodput, r.InputTokenSum, r.OutputTokenSum = 0, 0, 0, 0
	r.GPUTime = r.GPUTime[:0]
}

func (r *RequestStats) merge(o *RequestStats) {
	for i, h := range r.hists() {
		h.merge(o.hists()[i])
	}
	r.Requests += o.Requests
	r.Goodput += o.Goodput
	r.InputTokenSum += o.InputTokenSum
	r.OutputTokenSum += o.OutputTokenSum
	for _, c := range o.GPUTime {
		r.AddGPUTime(c.Category, c.Seconds)
	}
}

func (p *StepStats) reset() {
	p.Duration.reset()
	p.BatchSize.reset()
	p.Tokens.reset()
	p.Steps, p.Preemptions = 0, 0
}

func (p *StepStats) merge(o *StepStats) {
	p.Duration.merge(&o.Duration)
	p.BatchSize.merge(&o.BatchSize)
	p.Tokens.merge(&o.Tokens)
	p.Steps += o.Steps
	p.Preemptions += o.Preemptions
}

// merge adds o's observations to h; both have the same bounds.
func (h *Histogram) merge(o *Histogram) {
	if o.count == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.count == 0 || o.min < h.min {
		h.min = o.min
	}
	if h.count == 0 || o.max > h.max {
		h.max = o.max
	}
	h.count += o.count
	h.sum += o.sum
	if h.exp != nil && o.exp != nil {
		h.exp.Merge(o.exp)
	}
	for _, e := range o.exemplars {
		h.offer(e)
	}
}
