// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate

// The Tx between a delta Flush and the caller's verdict. The Tx type is in
// state.go: the agent families (agents.go) fill its entries too.

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
