// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package request // import "github.com/inferprof/inferprof/internal/request"

import (
	"math"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// figure is one number read from a span; v is valid when ok.
type figure struct {
	v  float64
	ok bool
}

// AnomalyReasons are the reasons an anomaly can have: the problem part of
// "<key>:<problem>" and the computed checks.
var AnomalyReasons = []string{
	"missing", "wrong_type", "unparsable", "negative", "not_integer", "nan", "infinite",
	"queue_exceeds_prefill", "phases_exceed_e2e",
}

// reader reads figures from a span's snapshot, removes bad ones from the
// span (a canonical key is also the source key) and records anomalies.
type reader struct {
	attrs     pcommon.Map
	snap      snapshot
	anomalies []string
}

func (n *reader) anomaly(s string) { n.anomalies = append(n.anomalies, s) }

func (n *reader) bad(key, problem string) figure {
	n.anomaly(key + ":" + problem)
	return figure{}
}

func (n *reader) has(i int) bool { return n.snap.has[i] }

// drop removes source figures that are an engine's placeholder for "not
// measured" rather than a measurement; they are neither kept nor anomalies.
func (n *reader) drop(keys ...int) {
	for _, i := range keys {
		if n.snap.has[i] {
			n.attrs.Remove(keyNames[i])
			n.snap.has[i] = false
		}
	}
}

// number reads a float-seconds figure without judging its sign.
func (n *reader) number(i int, required bool) (float64, bool) {
	key := keyNames[i]
	v, ok := n.snap.get(i)
	if !ok {
		if required {
			n.bad(key, "missing")
		}
		return 0, false
	}
	switch v.typ {
	case pcommon.ValueTypeDouble:
		return v.d, true
	case pcommon.ValueTypeInt:
		return float64(v.i), true
	}
	n.attrs.Remove(key)
	n.bad(key, "wrong_type")
	return 0, false
}

// seconds reads a float-seconds latency; a bad value is removed from the
// span and reported.
func (n *reader) seconds(i int, required bool) figure {
	// The common case, inlined: a finite, non-negative double (NaN fails
	// the comparison).
	if v := &n.snap.vals[i]; n.snap.has[i] && v.typ == pcommon.ValueTypeDouble && v.d >= 0 && v.d <= math.MaxFloat64 {
		return figure{v.d, true}
	}
	return n.secondsSlow(i, required)
}

func (n *reader) secondsSlow(i int, required bool) figure {
	f, ok := n.number(i, required)
	if !ok {
		return figure{}
	}
	if p := checkNumber(f); p != "" {
		n.attrs.Remove(keyNames[i])
		return n.bad(keyNames[i], p)
	}
	return figure{f, true}
}

// secondsOr reads a latency whose engine writes sentinel when it has no
// measurement: the sentinel is dropped silently, other bad values are
// anomalies.
func (n *reader) secondsOr(i int, required bool, sentinel float64) figure {
	f, ok := n.number(i, required)
	if !ok {
		return figure{}
	}
	if f == sentinel {
		n.drop(i)
		return figure{}
	}
	if p := checkNumber(f); p != "" {
		n.attrs.Remove(keyNames[i])
		return n.bad(keyNames[i], p)
	}
	return figure{f, true}
}

// nonNegative reads a latency that an engine computes as a difference of
// timestamps one of which may still be 0 (vLLM's "0 − monotonic"): a
// negative value then means "not measured" and is dropped silently.
func (n *reader) nonNegative(i int) figure {
	f, ok := n.number(i, false)
	if !ok {
		return figure{}
	}
	if f < 0 {
		n.drop(i)
		return figure{}
	}
	if p := checkNumber(f); p != "" {
		n.attrs.Remove(keyNames[i])
		return n.bad(keyNames[i], p)
	}
	return figure{f, true}
}

// duration reads a TGI duration, which TGI records as Rust's Debug format
// of a Duration, e.g. "1.2345s", "12.5ms", "830µs".
func (n *reader) duration(i int, required bool) figure {
	key := keyNames[i]
	v, ok := n.snap.get(i)
	if !ok {
		if required {
			return n.bad(key, "missing")
		}
		return figure{}
	}
	var f float64
	switch v.typ {
	case pcommon.ValueTypeStr:
		d, err := time.ParseDuration(strings.TrimSpace(v.s))
		if err != nil {
			return n.bad(key, "unparsable")
		}
		f = d.Seconds()
	case pcommon.ValueTypeDouble:
		f = v.d
	case pcommon.ValueTypeInt:
		f = float64(v.i)
	default:
		return n.bad(key, "wrong_type")
	}
	if p := checkNumber(f); p != "" {
		return n.bad(key, p)
	}
	return figure{f, true}
}

// count reads a token count from src, or from dst when an engine already
// writes the semconv name.
func (n *reader) count(srcI, dstI int, required bool) figure {
	// The common case, inlined: a non-negative int under the source key.
	if v := &n.snap.vals[srcI]; n.snap.has[srcI] && v.typ == pcommon.ValueTypeInt && v.i >= 0 {
		return figure{float64(v.i), true}
	}
	if !required && !n.snap.has[srcI] && !n.snap.has[dstI] {
		return figure{}
	}
	return n.countSlow(srcI, dstI, required)
}

func (n *reader) countSlow(srcI, dstI int, required bool) figure {
	src, dst := keyNames[srcI], keyNames[dstI]
	key := src
	v, ok := n.snap.get(srcI)
	if !ok {
		key = dst
		v, ok = n.snap.get(dstI)
	}
	if !ok {
		if required {
			return n.bad(src, "missing")
		}
		return figure{}
	}
	switch v.typ {
	case pcommon.ValueTypeInt:
		if v.i < 0 {
			n.attrs.Remove(dst)
			return n.bad(key, "negative")
		}
		return figure{float64(v.i), true}
	case pcommon.ValueTypeDouble:
		f := v.d
		if p := checkNumber(f); p != "" {
			n.attrs.Remove(dst)
			return n.bad(key, p)
		}
		if f != math.Trunc(f) || f > math.MaxInt64/2 {
			n.attrs.Remove(dst)
			return n.bad(key, "not_integer")
		}
		return figure{f, true}
	}
	n.attrs.Remove(dst)
	return n.bad(key, "wrong_type")
}

func checkNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 0):
		return "infinite"
	case f < 0:
		return "negative"
	}
	return ""
}

// tolerance is how far apart two clocks' figures may be before it is an
// anomaly rather than skew: 1 ms or 1 %, whichever is larger.
func tolerance(total float64) float64 {
	return math.Max(0.001, 0.01*total)
}

// spanSeconds is the span's own duration, for engines that write no e2e
// figure in some cases; not ok when the span's clock is broken.
func spanSeconds(span ptrace.Span) figure {
	start, end := span.StartTimestamp(), span.EndTimestamp()
	if start == 0 || end <= start {
		return figure{}
	}
	return figure{float64(end-start) / 1e9, true}
}

// eventTime returns the timestamp of the first event called name.
func eventTime(span ptrace.Span, name string) (pcommon.Timestamp, bool) {
	evs := span.Events()
	for i := 0; i < evs.Len(); i++ {
		if e := evs.At(i); e.Name() == name && e.Timestamp() != 0 {
			return e.Timestamp(), true
		}
	}
	return 0, false
}

// between is the seconds from a to b, when both are known and b ≥ a.
func between(a, b pcommon.Timestamp, aOK, bOK bool) figure {
	if !aOK || !bOK || b < a {
		return figure{}
	}
	return figure{float64(b-a) / 1e9, true}
}

func strAttr(m pcommon.Map, key string) string {
	if v, ok := m.Get(key); ok && v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
}
