// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package delta // import "github.com/inferprof/inferprof/internal/delta"

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatautil"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/inferprof/inferprof/internal/exphist"
)

const (
	// DefaultMaxSeries bounds the state kept per series.
	DefaultMaxSeries = 100_000
	// DefaultExpiry forgets a series not seen for this long.
	DefaultExpiry = 10 * time.Minute
	sweepEvery    = time.Minute
)

// Stats counts what a conversion could not carry over.
type Stats struct {
	Unsupported int // unreadable exponential histograms, non-finite values
	Overflow    int // new series refused because MaxSeries were tracked
}

type series struct {
	seen    int64  // wall clock ns, for expiry
	ts      uint64 // last point timestamp
	value   float64
	count   uint64
	sum     float64
	buckets []uint64
	bounds  []float64
	min     float64
	max     float64
	hasMin  bool
	hasMax  bool
	exp     *exphist.Histogram // an exponential histogram's last cumulative point; never changed once set
}

// Converter holds the last cumulative state of every series. Convert, then
// Commit once the result is safely queued, so that a refused batch can be
// offered again without losing its increments.
type Converter struct {
	mu        sync.Mutex
	series    map[uint64]*series
	startNs   uint64
	maxSeries int
	expiry    time.Duration
	now       func() time.Time
	lastSweep time.Time
	// key's scratch, used under mu
	digest *xxhash.Digest
	keyBuf [33]byte
}

// New returns a converter. Cumulative series that began before start are
// first used as a baseline only: their earlier increments were uploaded by a
// previous run or are unknown, and sending the whole total again would count
// it twice.
func New(start time.Time, now func() time.Time) *Converter {
	return &Converter{
		series:    map[uint64]*series{},
		startNs:   uint64(start.UnixNano()),
		maxSeries: DefaultMaxSeries,
		expiry:    DefaultExpiry,
		now:       now,
		lastSweep: now(),
		digest:    xxhash.New(),
	}
}

// Tx holds the state a Convert would leave behind.
type Tx struct {
	pending map[uint64]*series
	now     int64
}

// lookup returns the series state (a copy held in tx) and whether it existed.
func (c *Converter) lookup(tx *Tx, st *Stats, key uint64) (*series, bool) {
	if s, ok := tx.pending[key]; ok {
		return s, true
	}
	if s, ok := c.series[key]; ok {
		cp := *s
		cp.buckets = slices.Clone(s.buckets)
		tx.pending[key] = &cp
		return &cp, true
	}
	if len(c.series)+len(tx.pending) >= c.maxSeries {
		st.Overflow++
		return nil, false
	}
	s := &series{}
	tx.pending[key] = s
	return s, false
}

// key identifies a series: its resource's and its point's attribute sets
// (pdatautil.MapHash: independent of order, and typed, as contrib keys
// them), the kind of metric and its name, folded into 64 bits so the maps
// keep small keys.
func (c *Converter) key(res [16]byte, kind byte, name string, attrs pcommon.Map) uint64 {
	a := pdatautil.MapHash(attrs)
	copy(c.keyBuf[:16], res[:])
	copy(c.keyBuf[16:32], a[:])
	c.keyBuf[32] = kind
	c.digest.Reset()
	_, _ = c.digest.Write(c.keyBuf[:])
	_, _ = c.digest.WriteString(name)
	return c.digest.Sum64()
}

// firstIsBaseline says whether the first cumulative point of a series only
// sets the baseline (it began before this converter did).
func (c *Converter) firstIsBaseline(start pcommon.Timestamp) bool {
	return start != 0 && uint64(start) < c.startNs
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
