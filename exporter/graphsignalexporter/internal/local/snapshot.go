// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package local // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/local"

import (
	"slices"
	"strings"

	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
	"github.com/inferprof/inferprof/internal/bucketquantile"
)

// Snapshot returns the current document.
func (s *Store) Snapshot() Signals {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now().UnixNano()
	s.expire(now)
	out := Signals{
		Profiler:  Profiler{Name: "inferprof", Version: s.version},
		PayloadNs: now,
		StartNs:   s.start,
		Context:   s.context,
		Metrics:   make([]Metric, 0, len(s.series)),
		Errors:    slices.Clone(s.errors),
		Resources: make([]Resource, 0, len(s.resources)),
	}
	if out.Errors == nil {
		out.Errors = []Error{}
	}
	for _, se := range s.series {
		out.Metrics = append(out.Metrics, se.metric())
	}
	slices.SortFunc(out.Metrics, func(a, b Metric) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(tagString(a.Tags), tagString(b.Tags))
	})
	for _, r := range s.resources {
		out.Resources = append(out.Resources, Resource{
			Kind: r.kind, Tags: r.tags, Attributes: r.attrs,
			FirstSeenTs: r.first / 1e9, LastSeenTs: r.last / 1e9,
		})
	}
	slices.SortFunc(out.Resources, func(a, b Resource) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return strings.Compare(tagString(a.Tags), tagString(b.Tags))
	})
	return out
}

func tagString(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + m[k] + ";")
	}
	return b.String()
}

func (se *series) metric() Metric {
	m := Metric{Name: se.name, Tags: se.tags, UpdatedNs: se.updated}
	switch se.typ {
	case signalsv1.Metric_GAUGE_METRIC:
		m.Type, m.Stats = "gauge", GaugeStats{Value: se.gauge}
	case signalsv1.Metric_COUNTER_METRIC:
		m.Type, m.Stats = "counter", CounterStats{Total: se.total}
	case signalsv1.Metric_HISTOGRAM_METRIC:
		m.Type, m.Stats = "histogram", se.hist.stats()
	case signalsv1.Metric_PROFILE_METRIC:
		ps := ProfileStats{Frames: make([]Frame, 0, len(se.frames))}
		for _, f := range se.frames {
			ps.Frames = append(ps.Frames, Frame{Name: f.name, Value: f.value, Samples: f.samples})
		}
		slices.SortFunc(ps.Frames, func(a, b Frame) int {
			if a.Value != b.Value {
				if a.Value > b.Value {
					return -1
				}
				return 1
			}
			return strings.Compare(a.Name, b.Name)
		})
		m.Type, m.Stats = "profile", ps
	default:
		m.Type = "undefined"
	}
	return m
}

func (h *histogram) stats() HistogramStats {
	st := HistogramStats{QuantileMethod: QuantileMethod}
	if h == nil {
		return st
	}
	if h.hasCount {
		c := h.count
		st.Count = &c
	}
	if h.hasSum {
		s := h.sum
		st.Sum = &s
		if h.hasCount && h.count > 0 {
			mean := h.sum / float64(h.count)
			st.Mean = &mean
		}
	}
	st.Min, st.Max = h.min, h.max
	if len(h.bins) > 0 {
		st.Bins = make([]float64, 0, len(h.bins))
		for b := range h.bins {
			st.Bins = append(st.Bins, b)
		}
		slices.Sort(st.Bins)
		st.Counts = make([]int64, len(st.Bins))
		for i, b := range st.Bins {
			st.Counts[i] = h.bins[b]
		}
	}
	st.P50, st.P50Bucket = h.quantile(0.50)
	st.P90, _ = h.quantile(0.90)
	st.P95, st.P95Bucket = h.quantile(0.95)
	st.P99, _ = h.quantile(0.99)
	if h.exp != nil && h.exp.Count() > 0 {
		h.expStats(&st)
	}
	return st
}

func (h *histogram) quantile(q float64) (*float64, [2]*float64) {
	return bucketquantile.Quantile(h.bins, h.min, h.max, q)
}
