// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package encode // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"

import (
	"go.opentelemetry.io/collector/pdata/pmetric"

	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
	"github.com/inferprof/inferprof/internal/exphist"
	"github.com/inferprof/inferprof/internal/names"
)

// ExpPoint is one data point of an exponential twin (an
// inferprof.exponential.* metric), under the name and tags its explicit
// twin is encoded with, so the local store and /signals read the explicit
// series' percentiles from it. Graphsignal's upload has no exponential
// type: the twins are not uploaded (the explicit histograms are).
type ExpPoint struct {
	Name string
	Tags []*signalsv1.Tag
	Hist *exphist.Histogram
}

// Exponential returns the exponential twins' points of md, which must hold
// deltas; it reports how many it could not read.
func (e *Encoder) Exponential(md pmetric.Metrics) (pts []ExpPoint, bad int) {
	b := &metricsBuilder{e: e}
	for _, rm := range md.ResourceMetrics().All() {
		res := rm.Resource().Attributes()
		resSet := false
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				explicit, ok := names.ExplicitTwin(m.Name())
				if !ok || m.Type() != pmetric.MetricTypeExponentialHistogram {
					continue
				}
				if !resSet {
					b.setResource(res)
					resSet = true
				}
				for _, dp := range m.ExponentialHistogram().DataPoints().All() {
					h, ok := exphist.FromPoint(dp)
					if !ok {
						bad++
						continue
					}
					b.startTags(dp.Attributes(), func(string) bool { return false })
					pts = append(pts, ExpPoint{Name: clean(explicit), Tags: b.tags.v1Tags(), Hist: h})
				}
			}
		}
	}
	return pts, bad
}

// isTwin says whether m is an exponential twin, left out of uploads without
// being counted as unsupported.
func isTwin(m pmetric.Metric) bool {
	_, ok := names.ExplicitTwin(m.Name())
	return ok && m.Type() == pmetric.MetricTypeExponentialHistogram
}
