// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"

import (
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatautil"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// A delta point whose start is not its series' previous point's end is a
// reset in the OpenTelemetry data model: Prometheus' exporter then replaces
// the total instead of adding to it. A series absent from a flush (idle, or
// a kernel that fell to "other" for a while) would otherwise start its next
// point at the previous flush, so each series starts at its own last end.

// seriesHorizon is how long an idle series' last end is kept. Past it the
// next point starts a new series; Prometheus' exporter has long forgotten it
// by then (its metric_expiration is 5m by default).
const seriesHorizon = time.Hour

// continueStarts sets each delta point's start to its series' last end, and
// returns the ends to keep once the interval is committed. The map is reused
// from flush to flush: a Tx is committed or restored before the next one.
func (a *Aggregator) continueStarts(md pmetric.Metrics) map[seriesKey]pcommon.Timestamp {
	if a.pending == nil {
		a.pending = map[seriesKey]pcommon.Timestamp{}
	}
	ends := a.pending
	clear(ends)
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		rm := rms.At(i)
		k := seriesKey{resource: pdatautil.MapHash(rm.Resource().Attributes())}
		sms := rm.ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for m := range ms.Len() {
				metric := ms.At(m)
				if metric.Type() != pmetric.MetricTypeSum {
					continue
				}
				k.metric = metric.Name()
				dps := metric.Sum().DataPoints()
				for d := range dps.Len() {
					dp := dps.At(d)
					k.attrs = pdatautil.MapHash(dp.Attributes())
					// A Kineto trace read out of order may end before the
					// series' last end: it keeps its own start, and the
					// series its later end, which an exporter holds.
					end := dp.Timestamp()
					if last, ok := a.ends[k]; ok {
						if last < end {
							dp.SetStartTimestamp(last)
						} else {
							end = last
						}
					}
					ends[k] = end
				}
			}
		}
	}
	return ends
}

// commitEnds keeps the interval's ends, forgets series idle past the
// horizon, and holds the table at MaxKeys (a new series past it starts at
// the interval's start, as before).
func (a *Aggregator) commitEnds(ends map[seriesKey]pcommon.Timestamp, now pcommon.Timestamp) {
	if a.ends == nil {
		a.ends = map[seriesKey]pcommon.Timestamp{}
	}
	for k, t := range ends {
		if _, ok := a.ends[k]; ok || len(a.ends) < a.limits.MaxKeys {
			a.ends[k] = t
		}
	}
	horizon := uint64(seriesHorizon)
	if uint64(now) <= horizon {
		return
	}
	cut := pcommon.Timestamp(uint64(now) - horizon)
	for k, t := range a.ends {
		if t < cut {
			delete(a.ends, k)
		}
	}
}
