// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/internal/exphist"
	"github.com/inferprof/inferprof/internal/names"
)

// Exponential twins. Beside each latency and step histogram the connector
// keeps a base-2 exponential histogram of the same values (package
// exphist), emitted as its own metric: the semconv buckets are too coarse
// for percentiles (0.1 → 0.25 → 0.5 s), the exponential ones read them
// within 2%.

// expTwin is one exponential metric and the explicit histogram it shadows.
type expTwin struct {
	spec Spec
	req  func(*RequestStats) *Histogram
	step func(*StepStats) *Histogram
}

var twins = func() map[string]*expTwin {
	req := func(n string, f func(*RequestStats) *Histogram) *expTwin {
		return &expTwin{spec: Spec{Name: n}, req: f}
	}
	step := func(n string, f func(*StepStats) *Histogram) *expTwin {
		return &expTwin{spec: Spec{Name: n}, step: f}
	}
	m := map[string]*expTwin{
		names.MetricTimeToFirstToken:   req(names.MetricExpTimeToFirstToken, func(r *RequestStats) *Histogram { return &r.TTFT }),
		names.MetricTimePerOutputToken: req(names.MetricExpTimePerOutputToken, func(r *RequestStats) *Histogram { return &r.TPOT }),
		names.MetricRequestDuration:    req(names.MetricExpRequestDuration, func(r *RequestStats) *Histogram { return &r.Duration }),
		names.MetricQueueDuration:      req(names.MetricExpQueueDuration, func(r *RequestStats) *Histogram { return &r.Queue }),
		names.MetricPrefillDuration:    req(names.MetricExpPrefillDuration, func(r *RequestStats) *Histogram { return &r.Prefill }),
		names.MetricDecodeDuration:     req(names.MetricExpDecodeDuration, func(r *RequestStats) *Histogram { return &r.Decode }),
		names.MetricOtherDuration:      req(names.MetricExpOtherDuration, func(r *RequestStats) *Histogram { return &r.Other }),
		names.MetricInterTokenLatency:  req(names.MetricExpInterTokenLatency, func(r *RequestStats) *Histogram { return &r.ITL }),
		names.MetricStepDuration:       step(names.MetricExpStepDuration, func(p *StepStats) *Histogram { return &p.Duration }),
		names.MetricStepBatchSize:      step(names.MetricExpStepBatchSize, func(p *StepStats) *Histogram { return &p.BatchSize }),
		names.MetricStepTokens:         step(names.MetricExpStepTokens, func(p *StepStats) *Histogram { return &p.Tokens }),
	}
	for explicit, tw := range m {
		for i := range Specs {
			if Specs[i].Name == explicit {
				tw.spec.Description = Specs[i].Description + " Base-2 exponential histogram (max scale 20, 512 buckets) of the same values, for percentiles within 2%."
				tw.spec.Unit = Specs[i].Unit
				tw.spec.kind = Specs[i].kind
				tw.spec.skipErrors = Specs[i].skipErrors
			}
		}
	}
	return m
}()

// ExponentialSpecs lists the exponential metrics: name, unit, description,
// and the explicit metric each shadows.
func ExponentialSpecs() map[string]Spec {
	out := make(map[string]Spec, len(twins))
	for explicit, tw := range twins {
		out[explicit] = tw.spec
	}
	return out
}

// IsExponential reports whether name is an exponential twin's.
func IsExponential(name string) bool {
	for _, tw := range twins {
		if tw.spec.Name == name {
			return true
		}
	}
	return false
}

// withExponential gives r's shadowed histograms their exponential twins,
// unless switched off.
func (st *Store) withExponential(r *RequestStats) *RequestStats {
	for _, tw := range twins {
		if tw.req != nil && !st.set.Disabled[tw.spec.Name] {
			tw.req(r).exp = exphist.New()
		}
	}
	return r
}

// withExponentialSteps does the same for step stats.
func (st *Store) withExponentialSteps(p *StepStats) *StepStats {
	for _, tw := range twins {
		if tw.step != nil && !st.set.Disabled[tw.spec.Name] {
			tw.step(p).exp = exphist.New()
		}
	}
	return p
}

// appendExponential writes the exponential twin of spec, when it has one,
// for every series the explicit one would cover.
func (st *Store) appendExponential(md pmetric.Metrics, ms pmetric.MetricSlice, resAttrs pcommon.Map, spec *Spec, series []*Series, now pcommon.Timestamp) pmetric.MetricSlice {
	tw := twins[spec.Name]
	if tw == nil || st.set.Disabled[tw.spec.Name] {
		return ms
	}
	var m pmetric.Metric
	for _, s := range series {
		if !st.emits(s) || !tw.spec.applies(s) {
			continue
		}
		var h *Histogram
		if tw.req != nil {
			h = tw.req(s.Req)
		} else {
			h = tw.step(s.Step)
		}
		if h.exp == nil || h.exp.Count() == 0 {
			continue
		}
		if m == (pmetric.Metric{}) {
			ms, m = st.newMetric(md, ms, resAttrs, &tw.spec)
			m.SetEmptyExponentialHistogram().SetAggregationTemporality(st.temporality())
		}
		dp := m.ExponentialHistogram().DataPoints().AppendEmpty()
		s.attrs.CopyTo(dp.Attributes())
		dp.SetStartTimestamp(s.start)
		dp.SetTimestamp(now)
		h.exp.AppendTo(dp)
	}
	return ms
}
