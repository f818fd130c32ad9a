// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/internal/names"
)

// Flush's output: a resource's series written as pdata, metric by metric in
// the order of Specs.

func (st *Store) appendResource(md pmetric.Metrics, resAttrs pcommon.Map, series []*Series, now pcommon.Timestamp) {
	var ms pmetric.MetricSlice
	for i := range Specs {
		spec := &Specs[i]
		if st.set.Disabled[spec.Name] {
			continue
		}
		if spec.perModel {
			ms = st.appendPerModel(md, ms, resAttrs, spec, series, now)
			continue
		}
		if spec.targets {
			ms = st.appendTargets(md, ms, resAttrs, spec, series, now)
			continue
		}
		var m pmetric.Metric
		for _, s := range series {
			if !st.emits(s) || !spec.applies(s) {
				continue
			}
			for _, p := range spec.hists {
				h := p.get(s)
				if h.count == 0 {
					continue
				}
				if m == (pmetric.Metric{}) {
					ms, m = st.newMetric(md, ms, resAttrs, spec)
					m.SetEmptyHistogram().SetAggregationTemporality(st.temporality())
				}
				h.appendTo(m.Histogram().DataPoints(), s.attrs, p.attrKey(), p.tokenType, s.start, now)
			}
			for _, p := range spec.sums {
				var dp pmetric.NumberDataPoint
				ms, m, dp = st.sumPoint(md, ms, m, resAttrs, spec, s, now)
				if p.tokenType != "" {
					dp.Attributes().PutStr(attrTokenType, p.tokenType)
				}
				if p.dget != nil {
					dp.SetDoubleValue(p.dget(s))
				} else {
					dp.SetIntValue(int64(p.get(s)))
				}
			}
			if spec.categories == nil {
				continue
			}
			for _, c := range spec.categories(s) {
				var dp pmetric.NumberDataPoint
				ms, m, dp = st.sumPoint(md, ms, m, resAttrs, spec, s, now)
				dp.Attributes().PutStr(names.AttrKernelCategory, c.Category)
				dp.SetDoubleValue(c.Seconds)
			}
		}
	}
	// The exponential twins after every explicit metric (exponential.go).
	for i := range Specs {
		ms = st.appendExponential(md, ms, resAttrs, &Specs[i], series, now)
	}
}

// sumPoint appends a data point of series s to the sum m, creating the
// metric (monotonic, in the store's temporality) the first time.
func (st *Store) sumPoint(md pmetric.Metrics, ms pmetric.MetricSlice, m pmetric.Metric, resAttrs pcommon.Map, spec *Spec, s *Series, now pcommon.Timestamp) (pmetric.MetricSlice, pmetric.Metric, pmetric.NumberDataPoint) {
	if m == (pmetric.Metric{}) {
		ms, m = st.newMetric(md, ms, resAttrs, spec)
		sum := m.SetEmptySum()
		sum.SetIsMonotonic(true)
		sum.SetAggregationTemporality(st.temporality())
	}
	dp := m.Sum().DataPoints().AppendEmpty()
	s.attrs.CopyTo(dp.Attributes())
	dp.SetStartTimestamp(s.start)
	dp.SetTimestamp(now)
	return ms, m, dp
}

// appendPerModel writes cost per 1k output tokens, one gauge point per model
// and currency of the resource, from its cost series.
func (st *Store) appendPerModel(md pmetric.Metrics, ms pmetric.MetricSlice, resAttrs pcommon.Map, spec *Spec, series []*Series, now pcommon.Timestamp) pmetric.MetricSlice {
	type key struct{ model, currency string }
	type acc struct {
		cost   float64
		tokens uint64
		start  pcommon.Timestamp
	}
	var order []key
	groups := map[key]*acc{}
	for _, s := range series {
		if !st.emits(s) || !spec.applies(s) || s.Cost.OutputTokens == 0 {
			continue
		}
		k := key{strAttr(s.attrs, names.AttrRequestModel), strAttr(s.attrs, names.AttrCostCurrency)}
		g := groups[k]
		if g == nil {
			g = &acc{start: s.start}
			groups[k] = g
			order = append(order, k)
		}
		g.cost += s.Cost.OutputCost
		g.tokens += s.Cost.OutputTokens
		g.start = min(g.start, s.start)
	}
	if len(order) == 0 {
		return ms
	}
	ms, m := st.newMetric(md, ms, resAttrs, spec)
	dps := m.SetEmptyGauge().DataPoints()
	for _, k := range order {
		g := groups[k]
		dp := dps.AppendEmpty()
		if k.model != "" {
			dp.Attributes().PutStr(names.AttrRequestModel, k.model)
		}
		dp.Attributes().PutStr(names.AttrCostCurrency, k.currency)
		dp.SetStartTimestamp(g.start)
		dp.SetTimestamp(now)
		dp.SetDoubleValue(1000 * g.cost / float64(g.tokens))
	}
	return ms
}

// appendTargets writes the goodput targets once for a resource that has a
// successful request in this flush, so they sit beside the counts they judge.
func (st *Store) appendTargets(md pmetric.Metrics, ms pmetric.MetricSlice, resAttrs pcommon.Map, spec *Spec, series []*Series, now pcommon.Timestamp) pmetric.MetricSlice {
	if len(st.set.GoodputTargets) == 0 {
		return ms
	}
	start := pcommon.Timestamp(0)
	for _, s := range series {
		if st.emits(s) && spec.applies(s) && (start == 0 || s.start < start) {
			start = s.start
		}
	}
	if start == 0 {
		return ms
	}
	ms, m := st.newMetric(md, ms, resAttrs, spec)
	dps := m.SetEmptyGauge().DataPoints()
	for _, t := range st.set.GoodputTargets {
		dp := dps.AppendEmpty()
		dp.Attributes().PutStr(names.AttrGoodputCriterion, t.Criterion)
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(now)
		dp.SetDoubleValue(t.Seconds)
	}
	return ms
}

func strAttr(m pcommon.Map, k string) string {
	if v, ok := m.Get(k); ok {
		return v.Str()
	}
	return ""
}
