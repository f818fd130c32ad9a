// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package encode // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
)

// Metrics encodes md, which must hold deltas (see package delta): gauges,
// monotonic delta sums and delta histograms.
func (e *Encoder) Metrics(md pmetric.Metrics) (*signalsv1.UploadRequest, Stats) {
	now := e.now().UnixNano()
	b := &metricsBuilder{
		e:        e,
		req:      &signalsv1.UploadRequest{UploadTs: now},
		metrics:  map[metricKey]*signalsv1.Metric{},
		profiles: map[profileKey]*profileAcc{},
		res:      e.newResourceBuilder(now),
	}
	b.tags.cache = map[kv]*signalsv1.Tag{}
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		res := rm.Resource().Attributes()
		b.res.add(res)
		b.setResource(res)
		if mode, ok := res.Get(attrGraphMode); ok && e.graphsignal() && rm.ScopeMetrics().Len() > 0 {
			b.graphMode(mode.AsString())
		}
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			scope := sms.At(j).Scope().Name()
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				b.metric(res, scope, ms.At(k))
			}
		}
	}
	b.flushProfiles()
	b.req.Resources = b.res.finish()
	b.st.Truncated += b.tags.truncated
	return b.req, b.st
}

func (b *metricsBuilder) metric(res pcommon.Map, scope string, m pmetric.Metric) {
	if rules := b.e.rules[m.Name()]; rules != nil {
		b.mapped(res, m, rules)
		return
	}
	b.unmapped(res, scope, m)
}
