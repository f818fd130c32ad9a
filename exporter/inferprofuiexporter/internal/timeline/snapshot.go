// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/timeline"

// Snapshot is a copy of the records that overlap a window.
type Snapshot struct {
	From, To int64
	Requests []Request
	Phases   []Phase
	Steps    []Step
	Kernels  []Kernel
	Samples  []Sample
	MemLimit map[string]float64
}

func overlaps(start, end, from, to int64) bool { return end >= from && start <= to }

// Snapshot copies the records overlapping [from, to] (unix ns).
func (s *Store) Snapshot(from, to int64) Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := Snapshot{From: from, To: to, MemLimit: make(map[string]float64, len(s.memLimit))}
	for k, v := range s.memLimit {
		sn.MemLimit[k] = v
	}
	for r := range s.requests.all {
		if overlaps(r.Start, r.End, from, to) {
			sn.Requests = append(sn.Requests, *r)
		}
	}
	for p := range s.phases.all {
		if overlaps(p.Start, p.End, from, to) {
			sn.Phases = append(sn.Phases, *p)
		}
	}
	for st := range s.steps.all {
		if overlaps(st.Start, st.End, from, to) {
			sn.Steps = append(sn.Steps, *st)
		}
	}
	for k := range s.kernels.all {
		if overlaps(k.Start, k.End, from, to) {
			sn.Kernels = append(sn.Kernels, *k)
		}
	}
	for sm := range s.samples.all {
		if sm.TS >= from && sm.TS <= to {
			sn.Samples = append(sn.Samples, *sm)
		}
	}
	return sn
}

// Requests returns every request held, newest last.
func (s *Store) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, 0, s.requests.len())
	for r := range s.requests.all {
		out = append(out, *r)
	}
	return out
}
