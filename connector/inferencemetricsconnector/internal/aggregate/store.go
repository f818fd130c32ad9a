// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate

import (
	"encoding/binary"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/internal/names"
)

const attrTokenType = names.AttrTokenType

// Kind says which family of metrics a series holds.
type Kind uint8

const (
	// KindRequest series aggregate request spans.
	KindRequest Kind = iota + 1
	// KindStep series aggregate engine.step spans.
	KindStep
	// KindAgent series aggregate agent-run spans.
	KindAgent
	// KindCost series aggregate the cost of priced request spans.
	KindCost
	// KindTurns series aggregate finished conversations.
	KindTurns
)

// ResourceKey identifies a resource by a hash of its attributes.
type ResourceKey [16]byte

// RequestStats are the aggregates of one request series.
type RequestStats struct {
	TTFT, TPOT, Duration, Queue, Prefill, Decode, Other, ITL Histogram
	InputTokens, OutputTokens                                Histogram
	Requests, Goodput, InputTokenSum, OutputTokenSum         uint64
	// GPUTime sums the requests' share of GPU kernel time, by kernel
	// category (inferprof.gpu.categories / category_times).
	GPUTime []CategorySeconds
	// CPUOverheadShare observes each request's CPU overhead over its
	// duration (inferprof.latency.cpu_overhead / e2e).
	CPUOverheadShare Histogram
}

// CategorySeconds is GPU time of one kernel category.
type CategorySeconds struct {
	Category string
	Seconds  float64
}

// AddGPUTime adds seconds of GPU time of category.
func (r *RequestStats) AddGPUTime(category string, seconds float64) {
	for i := range r.GPUTime {
		if r.GPUTime[i].Category == category {
			r.GPUTime[i].Seconds += seconds
			return
		}
	}
	if len(r.GPUTime) >= maxGPUCategories {
		return
	}
	r.GPUTime = append(r.GPUTime, CategorySeconds{Category: category, Seconds: seconds})
}

// maxGPUCategories bounds the categories a series keeps (the built-in table
// has 15; the rest are user rules).
const maxGPUCategories = 64

// StepStats are the aggregates of one engine step series.
type StepStats struct {
	Duration, BatchSize, Tokens Histogram
	Steps, Preemptions          uint64
}

// Series is one set of aggregates under one resource and one set of
// dimension values.
type Series struct {
	key      string
	res      *resource
	attrs    pcommon.Map
	start    pcommon.Timestamp
	lastSeen pcommon.Timestamp
	updated  bool // since the last flush
	// IsError marks request series of failed requests; they carry error.type
	// and no goodput.
	IsError bool
	Req     *RequestStats
	Step    *StepStats
	Agent   *AgentStats
	Cost    *CostStats
	Turn    *TurnStats
	// service and model count the series against its groups' caps.
	service, model string
}

// Attributes returns the series' dimensions, to fill once after Create.
func (s *Series) Attributes() pcommon.Map { return s.attrs }

// Touch records that the series was updated at now.
func (s *Series) Touch(now pcommon.Timestamp) {
	s.lastSeen = now
	s.updated = true
}

type resource struct {
	key    ResourceKey
	attrs  pcommon.Map
	series []*Series
}

// Settings configure a Store.
type Settings struct {
	// Limit is the most series held, not counting the overflow series.
	Limit int
	// MaxSeriesPerModel and MaxSeriesPerService cap the series of one
	// gen_ai.request.model and of one service.name; 0: no cap.
	MaxSeriesPerModel, MaxSeriesPerService int
	// MaxExemplars is the number of exemplars kept per data point; 0 keeps none.
	MaxExemplars int
	// Delta selects delta temporality; otherwise cumulative.
	Delta bool
	// Expiration drops cumulative series not updated for this long; 0 never.
	Expiration time.Duration
	// Disabled holds the names of metrics not to emit.
	Disabled map[string]bool
	// ScopeName and ScopeVersion name the instrumentation scope of the output.
	ScopeName, ScopeVersion string
	// GoodputTargets are emitted as inferprof.server.goodput.target; only
	// the targets set (non-zero).
	GoodputTargets []GoodputTarget
}

// GoodputTarget is one goodput target: a criterion
// (names.GoodputTTFT, ...) and its bound in seconds.
type GoodputTarget struct {
	Criterion string
	Seconds   float64
}

// Store holds every series. It is not safe for concurrent use; the connector
// guards it with its one mutex.
type Store struct {
	set       Settings
	resources map[ResourceKey]*resource
	resList   []*resource // creation order, for stable output
	series    map[string]*Series
	overflow  *Series
	groups    groupLimits
	key       []byte
	lastFlush pcommon.Timestamp
	// stats taken out by a Tx and given back, reused for the next one
	spareReq  []*RequestStats
	spareStep []*StepStats
}

// NewStore returns an empty store whose first delta interval starts at start.
func NewStore(set Settings, start pcommon.Timestamp) *Store {
	return &Store{
		set:       set,
		resources: map[ResourceKey]*resource{},
		series:    map[string]*Series{},
		groups:    newGroupLimits(set.MaxSeriesPerModel, set.MaxSeriesPerService),
		key:       make([]byte, 0, 256),
		lastFlush: start,
	}
}

// Len returns the number of series held, the overflow series included.
func (st *Store) Len() int {
	n := len(st.series)
	if st.overflow != nil {
		n++
	}
	return n
}

// BeginKey starts the key of a series under resource res.
func (st *Store) BeginKey(res ResourceKey, kind Kind) {
	st.key = append(st.key[:0], res[:]...)
	st.key = append(st.key, byte(kind))
}

// AddKeyPart appends one dimension value to the key. Values are length
// prefixed so that no two value lists share a key.
func (st *Store) AddKeyPart(v string) {
	st.key = binary.AppendUvarint(st.key, uint64(len(v)))
	st.key = append(st.key, v...)
}

// Lookup returns the series of the key built so far, or nil.
func (st *Store) Lookup() *Series {
	return st.series[string(st.key)] // no allocation for the lookup
}

// Create makes the series of the key built so far. Past the cardinality limit
// it returns the overflow series and false; the caller fills the attributes of
// a new series only when it gets true.
func (st *Store) Create(now pcommon.Timestamp, resKey ResourceKey, resAttrs pcommon.Map, kind Kind) (*Series, bool) {
	return st.CreateModel(now, resKey, resAttrs, kind, "")
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

func (st *Store) newRequestStats() *RequestStats {
	ex := st.set.MaxExemplars
	return st.withExponential(&RequestStats{
		TTFT:         newHistogram(BoundsTTFT, ex),
		TPOT:         newHistogram(BoundsTPOT, ex),
		Duration:     newHistogram(BoundsRequestDuration, ex),
		Queue:        newHistogram(BoundsPhase, ex),
		Prefill:      newHistogram(BoundsPhase, ex),
		Decode:       newHistogram(BoundsPhase, ex),
		Other:        newHistogram(BoundsPhase, ex),
		ITL:          newHistogram(BoundsITL, ex),
		InputTokens:  newHistogram(BoundsTokens, 0),
		OutputTokens: newHistogram(BoundsTokens, 0),
		// A share: 0 (the GPU never waited) to 1.
		CPUOverheadShare: newHistogram(BoundsShare, ex),
	})
}

func (st *Store) newStepStats() *StepStats {
	return st.withExponentialSteps(&StepStats{
		Duration:  newHistogram(BoundsStepDuration, st.set.MaxExemplars),
		BatchSize: newHistogram(BoundsBatchSize, 0),
		Tokens:    newHistogram(BoundsStepTokens, 0),
	})
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

func (st *Store) emits(s *Series) bool {
	if st.set.Delta {
		return s.updated
	}
	return s.lastSeen != 0
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
