// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package request // import "github.com/inferprof/inferprof/internal/request"

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// scalar is one attribute value copied out of the span, so reads stay valid
// while the map is edited (Remove shifts entries under a pcommon.Value).
type scalar struct {
	typ pcommon.ValueType
	d   float64
	i   int64
	s   string
}

type snapshot struct {
	vals [numKeys]scalar
	has  [numKeys]bool
	// failure is the first failing finish reason in
	// gen_ai.response.finish_reasons ("" when none): see failureOf.
	failure string

	// lora[j] is the string value of Settings.LoRAAttributes[j] on the span
	// (its first occurrence, as Map.Get sees it), for the first len(lora)
	// keys that are not also keys above.
	lora     [maxLoRA]string
	loraSeen uint8
	// loras is what the settings' LoRA keys are (loraKeys); loraLive is
	// set when one of them is a key this processor writes, so it must be
	// read from the span after the writes.
	loras    *loraKeys
	loraLive bool
}

func (sn *snapshot) fill(attrs pcommon.Map, set *Settings, lk *loraKeys) {
	loras := set.LoRAAttributes
	sn.loras = lk
	sn.loraLive = lk.any
	attrs.Range(func(k string, v pcommon.Value) bool {
		i := keyIndex(k)
		switch {
		case i < 0:
			if lk.maybeLoRA(k) {
				for j := 0; j < len(loras) && j < maxLoRA; j++ {
					if loras[j] == k && sn.loraSeen&(1<<j) == 0 {
						sn.loraSeen |= 1 << j
						if v.Type() == pcommon.ValueTypeStr {
							sn.lora[j] = v.Str()
						}
					}
				}
			}
			return true
		case i == kFinishReasons:
			sn.failure = failureOf(v)
			return true
		}
		sc := scalar{typ: v.Type()}
		switch sc.typ {
		case pcommon.ValueTypeDouble:
			sc.d = v.Double()
		case pcommon.ValueTypeInt:
			sc.i = v.Int()
		case pcommon.ValueTypeStr:
			sc.s = v.Str()
		}
		sn.vals[i], sn.has[i] = sc, true
		return true
	})
}

// get returns the value at index i, by pointer: a scalar is 40 bytes, and
// the snapshot does not change after fill.
func (sn *snapshot) get(i int) (*scalar, bool) {
	return &sn.vals[i], sn.has[i]
}

// lacks is 1 when a value is to be written under key i and the span has
// none there yet: one more entry for the attribute slice.
func (sn *snapshot) lacks(i int, write bool) int {
	if write && !sn.has[i] {
		return 1
	}
	return 0
}

// str returns a string attribute the snapshot holds, or "".
func (sn *snapshot) str(i int) string {
	if v, ok := sn.get(i); ok && v.typ == pcommon.ValueTypeStr {
		return v.s
	}
	return ""
}

// Finish reasons that mean the request did not complete, most serious
// first. vLLM writes stop/length/abort/error/repetition, SGLang
// stop/length/abort, TensorRT-LLM stop/length/timeout/cancelled/not_finished;
// the rest are successes (or, for not_finished, the context half of a
// disaggregated request).
func failureRank(reason string) int {
	switch reason {
	case "error":
		return 4
	case "timeout":
		return 3
	case "abort":
		return 2
	case "cancelled":
		return 1
	}
	return 0
}

var failureNames = [...]string{1: "cancelled", 2: "abort", 3: "timeout", 4: "error"}

// failureOf returns the most serious failing reason in a finish_reasons
// value: a JSON string as vLLM, SGLang and TensorRT-LLM write it
// ('["abort"]'), a bare string, or a string array (semconv's type). One pass
// over the quoted words, as this runs on every request span.
func failureOf(v pcommon.Value) string {
	best := 0
	switch v.Type() {
	case pcommon.ValueTypeStr:
		s := v.Str()
		switch s {
		case `["stop"]`, `["length"]`:
			// Most requests, at the cost of one comparison.
			return ""
		}
		if strings.IndexByte(s, '"') < 0 {
			best = failureRank(s)
			break
		}
		for {
			i := strings.IndexByte(s, '"')
			if i < 0 {
				break
			}
			s = s[i+1:]
			j := strings.IndexByte(s, '"')
			if j < 0 {
				break
			}
			best = max(best, failureRank(s[:j]))
			s = s[j+1:]
		}
	case pcommon.ValueTypeSlice:
		sl := v.Slice()
		for i := 0; i < sl.Len(); i++ {
			if e := sl.At(i); e.Type() == pcommon.ValueTypeStr {
				best = max(best, failureRank(e.Str()))
			}
		}
	}
	return failureNames[best]
}
