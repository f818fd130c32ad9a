// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package encode // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"

// One Metrics call's state and the small steps that the mapped and unmapped
// encodings and Exponential all take: below them, so that each reference
// runs down.

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
)

type metricKey struct {
	name string
	typ  signalsv1.Metric_MetricType
	tags uint64
}

type profileKey struct {
	name string
	tags uint64
}

type profileFrame struct {
	value, samples float64
}

type profileAcc struct {
	key    profileKey
	tags   []*signalsv1.Tag
	ts     int64
	order  []string
	frames map[string]*profileFrame
	mode   bool // also send cuda_graph_trace_mode
}

type metricsBuilder struct {
	e        *Encoder
	req      *signalsv1.UploadRequest
	metrics  map[metricKey]*signalsv1.Metric
	profiles map[profileKey]*profileAcc
	profOrd  []profileKey
	res      *resourceBuilder
	tags     tagSet
	base     []kv // global and resource tags of the current resource
	st       Stats
}

// ts is a point's time, or the upload's when the point has none.
func (b *metricsBuilder) ts(t pcommon.Timestamp) int64 {
	if t == 0 {
		return b.req.UploadTs
	}
	return int64(t)
}

// startTags builds a datapoint's tag set: the resource's (computed once per
// resource) and the datapoint's attributes.
func (b *metricsBuilder) startTags(attrs pcommon.Map, skip func(string) bool) uint64 {
	b.tags.kvs = append(b.tags.kvs[:0], b.base...)
	b.tags.putMap(attrs, skip)
	if b.e.graphsignal() {
		b.tags.rename(false)
	}
	return b.tags.finish()
}

// setResource computes the tags every datapoint of a resource shares.
func (b *metricsBuilder) setResource(res pcommon.Map) {
	b.tags.reset(b.e.global)
	b.tags.putMap(res, notResourceTag)
	if b.e.graphsignal() {
		b.tags.rename(true)
	}
	b.base = append(b.base[:0], b.tags.kvs...)
}

func (b *metricsBuilder) get(name string, typ signalsv1.Metric_MetricType, tagKey uint64) *signalsv1.Metric {
	k := metricKey{name, typ, tagKey}
	m, ok := b.metrics[k]
	if !ok {
		m = &signalsv1.Metric{Name: clean(name), Type: typ, Tags: b.tags.v1Tags()}
		b.metrics[k] = m
		b.req.Metrics = append(b.req.Metrics, m)
	}
	return m
}

// point adds one gauge or counter value. Counter values that land on the
// same series and time within one upload (codes or kinds the name map
// folds together) are summed, as Graphsignal's own recorders sum them.
func (b *metricsBuilder) point(name string, typ signalsv1.Metric_MetricType, tagKey uint64, ts int64, v float64) {
	mm := b.get(name, typ, tagKey)
	if typ == signalsv1.Metric_COUNTER_METRIC {
		if n := len(mm.Datapoints); n > 0 && mm.Datapoints[n-1].MeasurementTs == ts {
			last := mm.Datapoints[n-1]
			last.Value = &signalsv1.DataPoint_Total{Total: last.GetTotal() + v}
			return
		}
		mm.Datapoints = append(mm.Datapoints, &signalsv1.DataPoint{Value: &signalsv1.DataPoint_Total{Total: v}, MeasurementTs: ts})
		return
	}
	mm.Datapoints = append(mm.Datapoints, &signalsv1.DataPoint{Value: &signalsv1.DataPoint_Gauge{Gauge: v}, MeasurementTs: ts})
}

func number(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}
