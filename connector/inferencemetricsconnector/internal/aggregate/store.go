// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/internal/names"
)

// The store's two walks: Create makes series (within the limit and the
// group caps), Flush writes them out and resets them.

// Create makes the series of the key built so far. Past the cardinality limit
// it returns the overflow series and false; the caller fills the attributes of
// a new series only when it gets true.
func (st *Store) Create(now pcommon.Timestamp, resKey ResourceKey, resAttrs pcommon.Map, kind Kind) (*Series, bool) {
	return st.CreateModel(now, resKey, resAttrs, kind, "")
}

// CreateModel is Create for a series of one model: past the model's or the
// service's cap (Settings.MaxSeriesPerModel, MaxSeriesPerService) it returns
// the overflow series too.
func (st *Store) CreateModel(now pcommon.Timestamp, resKey ResourceKey, resAttrs pcommon.Map, kind Kind, model string) (*Series, bool) {
	service := serviceOf(resAttrs)
	if len(st.series) >= st.set.Limit || !st.groups.admit(service, model) {
		return st.overflowSeries(now), false
	}
	s := st.create(now, resKey, resAttrs, kind)
	s.service, s.model = service, model
	st.groups.add(s)
	return s, true
}

func (st *Store) create(now pcommon.Timestamp, resKey ResourceKey, resAttrs pcommon.Map, kind Kind) *Series {
	res := st.resources[resKey]
	if res == nil {
		res = &resource{key: resKey, attrs: pcommon.NewMap()}
		resAttrs.CopyTo(res.attrs)
		st.resources[resKey] = res
		st.resList = append(st.resList, res)
	}
	s := st.newSeries(now, kind)
	s.key = string(st.key)
	s.res = res
	st.series[s.key] = s
	res.series = append(res.series, s)
	return s
}

func (st *Store) newSeries(now pcommon.Timestamp, kind Kind) *Series {
	start := now
	if st.set.Delta {
		start = st.lastFlush
	}
	s := &Series{attrs: pcommon.NewMap(), start: start}
	switch kind {
	case KindRequest:
		s.Req = st.newRequestStats()
	case KindStep:
		s.Step = st.newStepStats()
	default:
		st.newFamily(s, kind)
	}
	return s
}

// overflowSeries is the one series, under an empty resource, that collects
// requests and steps past the limit. It holds both kinds of aggregates.
func (st *Store) overflowSeries(now pcommon.Timestamp) *Series {
	if st.overflow == nil {
		s := st.newSeries(now, KindRequest)
		s.Step = st.newStepStats()
		for _, k := range []Kind{KindAgent, KindCost, KindTurns} {
			st.newFamily(s, k)
		}
		s.attrs.PutBool(names.AttrMetricOverflow, true)
		s.res = &resource{attrs: pcommon.NewMap()}
		st.overflow = s
	}
	return st.overflow
}

// Flush returns the metrics of every series to emit at now and resets what
// the temporality says to reset: delta takes each series' interval out into
// the returned Tx and drops series idle for a whole interval; cumulative
// drops series idle longer than the expiration. Exemplars are cleared either
// way: they belong to one interval. The caller must Commit or Restore the Tx
// (under the same lock as the store) once it knows whether the metrics were
// accepted.
func (st *Store) Flush(now pcommon.Timestamp) (pmetric.Metrics, *Tx) {
	md := pmetric.NewMetrics()
	for _, res := range st.resList {
		st.appendResource(md, res.attrs, res.series, now)
	}
	if st.overflow != nil {
		st.appendResource(md, st.overflow.res.attrs, []*Series{st.overflow}, now)
	}
	tx := &Tx{}
	st.sweep(now, tx)
	st.lastFlush = now
	return md, tx
}

func (st *Store) sweep(now pcommon.Timestamp, tx *Tx) {
	expired := func(s *Series) bool {
		if st.set.Delta {
			return !s.updated
		}
		return st.set.Expiration > 0 && now.AsTime().Sub(s.lastSeen.AsTime()) > st.set.Expiration
	}
	kept := st.resList[:0]
	for _, res := range st.resList {
		series := res.series[:0]
		for _, s := range res.series {
			if expired(s) {
				delete(st.series, s.key)
				st.groups.remove(s)
				continue
			}
			st.resetSeries(s, now, tx)
			series = append(series, s)
		}
		clear(res.series[len(series):])
		res.series = series
		if len(series) == 0 {
			delete(st.resources, res.key)
			continue
		}
		kept = append(kept, res)
	}
	clear(st.resList[len(kept):])
	st.resList = kept
	if st.overflow != nil {
		st.resetSeries(st.overflow, now, tx)
	}
}

func (st *Store) resetSeries(s *Series, now pcommon.Timestamp, tx *Tx) {
	updated := s.updated
	s.updated = false
	if st.set.Delta {
		if updated {
			// The interval leaves the series; the Tx keeps it until the
			// metrics built from it are accepted.
			tx.take(st, s)
		}
		s.start = now
		return
	}
	if s.Req != nil {
		r := s.Req
		for _, h := range []*Histogram{&r.TTFT, &r.TPOT, &r.Duration, &r.Queue, &r.Prefill, &r.Decode, &r.Other, &r.ITL} {
			h.exemplars = h.exemplars[:0]
		}
	}
	if s.Step != nil {
		s.Step.Duration.exemplars = s.Step.Duration.exemplars[:0]
	}
	clearFamilyExemplars(s)
}
