// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate

import (
	"encoding/binary"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// The store's shared state: its settings, the Store and the Tx it hands
// out, and the small methods that the files above all call. It stands
// below the files that drive the store, so their references run down.

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

func (st *Store) emits(s *Series) bool {
	if st.set.Delta {
		return s.updated
	}
	return s.lastSeen != 0
}

func (st *Store) temporality() pmetric.AggregationTemporality {
	if st.set.Delta {
		return pmetric.AggregationTemporalityDelta
	}
	return pmetric.AggregationTemporalityCumulative
}

// Tx holds the delta intervals one Flush took out of the store, until the
// caller knows whether the metrics built from them were accepted: Commit
// forgets them, Restore puts them back so the next flush carries them (the
// pattern of the graphsignal exporter's delta converter). Observations made
// between Flush and Restore are kept: Restore merges, it does not overwrite.
// Cumulative stores never reset, so their Tx is empty.
type Tx struct {
	entries []txEntry
}

type txEntry struct {
	s     *Series
	start pcommon.Timestamp
	req   *RequestStats
	step  *StepStats
	agent *AgentStats
	cost  *CostStats
	turn  *TurnStats
}

// Len returns the number of series intervals the Tx holds.
func (tx *Tx) Len() int { return len(tx.entries) }
