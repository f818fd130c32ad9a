// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package delta // import "github.com/inferprof/inferprof/internal/delta"

import (
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/internal/exphist"
)

// exponential turns exponential histograms into deltas as histogram does
// explicit ones: the increment since the previous cumulative point (at the
// coarser scale of the two), the whole point after a reset, nothing for a
// baseline; min and max are lifetime extremes. A point exphist cannot read
// (a scale outside [-4, 20], impossible buckets) is counted unsupported.
func (c *Converter) exponential(tx *Tx, st *Stats, res [16]byte, name string, temp pmetric.AggregationTemporality, in, out pmetric.ExponentialHistogramDataPointSlice) {
	for i := 0; i < in.Len(); i++ {
		dp := in.At(i)
		cur, ok := exphist.FromPoint(dp)
		if !ok {
			st.Unsupported++
			continue
		}
		s, existed := c.lookup(tx, st, c.key(res, 'e', name, dp.Attributes()))
		if s == nil {
			continue
		}
		s.seen = tx.now
		d := cur
		if temp == pmetric.AggregationTemporalityCumulative {
			// The state keeps its own copy: d is changed by Sub, and the
			// state is shared with the committed series until replaced.
			keep, _ := exphist.FromPoint(dp)
			switch {
			case !existed && c.firstIsBaseline(dp.StartTimestamp()):
				d = nil
			case existed && s.exp != nil && !d.Sub(s.exp):
				// A reset: the whole point is the increment (Sub left d
				// unchanged, or only downscaled).
				d, _ = exphist.FromPoint(dp)
			}
			s.exp = keep
		}
		if dp.HasMin() && finite(dp.Min()) && (!s.hasMin || dp.Min() < s.min) {
			s.min, s.hasMin = dp.Min(), true
		}
		if dp.HasMax() && finite(dp.Max()) && (!s.hasMax || dp.Max() > s.max) {
			s.max, s.hasMax = dp.Max(), true
		}
		if d == nil || d.Count() == 0 {
			continue
		}
		o := out.AppendEmpty()
		dp.Attributes().CopyTo(o.Attributes())
		o.SetStartTimestamp(dp.StartTimestamp())
		o.SetTimestamp(dp.Timestamp())
		d.AppendTo(o)
		o.RemoveMin()
		o.RemoveMax()
		if s.hasMin {
			o.SetMin(s.min)
		}
		if s.hasMax {
			o.SetMax(s.max)
		}
	}
}
