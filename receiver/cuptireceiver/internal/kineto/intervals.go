// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package kineto // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto"

import (
	"slices"

	"github.com/inferprof/inferprof/internal/cuptiwire"
)

// intervals is a sorted list of disjoint [lo, hi) busy intervals.
type intervals struct {
	iv, spare  [][2]uint64
	max        int
	overstated uint64
	gaps       []uint64
}

// merge adds records sorted by start.
func (s *intervals) merge(recs []cuptiwire.Record) {
	out := s.spare[:0]
	i := 0
	push := func(lo, hi uint64) {
		if n := len(out); n > 0 && lo <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], hi)
			return
		}
		out = append(out, [2]uint64{lo, hi})
	}
	for _, r := range recs {
		for i < len(s.iv) && s.iv[i][0] <= r.Start {
			push(s.iv[i][0], s.iv[i][1])
			i++
		}
		push(r.Start, r.End)
	}
	for ; i < len(s.iv); i++ {
		push(s.iv[i][0], s.iv[i][1])
	}
	s.iv, s.spare = out, s.iv
	if len(s.iv) > s.max {
		s.shrink()
	}
}

// shrink merges the smallest idle gaps until half the limit is used.
func (s *intervals) shrink() {
	s.gaps = s.gaps[:0]
	for i := 1; i < len(s.iv); i++ {
		s.gaps = append(s.gaps, s.iv[i][0]-s.iv[i-1][1])
	}
	slices.Sort(s.gaps)
	cut := s.gaps[len(s.iv)-s.max/2-1] // merging gaps up to this size leaves about max/2 intervals
	out := s.iv[:1]
	merged := len(s.iv) - s.max/2
	for i := 1; i < len(s.iv); i++ {
		gap := s.iv[i][0] - out[len(out)-1][1]
		if gap <= cut && merged > 0 {
			s.overstated += gap
			out[len(out)-1][1] = s.iv[i][1]
			merged--
			continue
		}
		out = append(out, s.iv[i])
	}
	s.iv = out
}

func (s *intervals) total() uint64 {
	var t uint64
	for _, v := range s.iv {
		t += v[1] - v[0]
	}
	return t
}
