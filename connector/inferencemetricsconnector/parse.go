// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector // import "github.com/inferprof/inferprof/connector/inferencemetricsconnector"

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/keyindex"
	"github.com/inferprof/inferprof/internal/names"
)

// counts are what one batch adds to the self-metrics.
type counts struct {
	spans              uint64 // request and step spans aggregated
	bad, overflow      int64
	sanitized          int64 // label values labelValue changed
	earlyConversations int64
}

// Which request figures a span carried.
const (
	hasTTFT uint16 = 1 << iota
	hasE2E
	hasQueue
	hasPrefill
	hasDecode
	hasOther
	hasTPOT
	hasInTok
	hasOutTok
	hasGaps
	hasCPUOverhead
	isRequest // the span has gen_ai.latency.e2e or time_to_first_token, valid or not
)

// What the inference processor writes on agent runs and priced requests;
// parseRequest notes them in its pass, aggregateAgentCost reads the rest.
const (
	hasCost  = isRequest << 1 // inferprof.request.cost
	hasAgent = isRequest << 2 // inferprof.agent.time_in_model
)

// The span attributes parseRequest reads, as indexes of requestKeys: one
// table probe per attribute instead of a switch's string comparisons
// (internal/keyindex).
const (
	keyTTFT = iota
	keyE2E
	keyQueue
	keyPrefill
	keyDecode
	keyOther
	keyTPOT
	keyInTok
	keyOutTok
	keyOp
	keyProvider
	keyModel
	keyErrType
	keyCost
	keyAgent
	keyGaps
	keyGPUCats
	keyGPUTimes
	keyCPUOverhead
)

var requestKeys = keyindex.New(map[string]int{
	names.AttrTimeToFirstToken: keyTTFT,
	names.AttrE2E:              keyE2E,
	names.AttrTimeInQueue:      keyQueue,
	names.AttrTimeInPrefill:    keyPrefill,
	names.AttrTimeInDecode:     keyDecode,
	names.AttrTimeInOther:      keyOther,
	names.AttrTimePerOutputTok: keyTPOT,
	names.AttrInputTokens:      keyInTok,
	names.AttrOutputTokens:     keyOutTok,
	names.AttrOperationName:    keyOp,
	names.AttrProviderName:     keyProvider,
	names.AttrRequestModel:     keyModel,
	names.AttrErrorType:        keyErrType,
	names.AttrRequestCost:      keyCost,
	names.AttrAgentTimeInModel: keyAgent,
	names.AttrITLGaps:          keyGaps,
	names.AttrGPUCategories:    keyGPUCats,
	names.AttrGPUCategoryTimes: keyGPUTimes,
	names.AttrCPUOverhead:      keyCPUOverhead,
})

// request is a request span's canonical figures, read in one pass over its
// attributes. Strings point into the span; nothing is copied.
type request struct {
	has                                            uint16
	ttft, e2e, queue, prefill, decode, other, tpot float64
	inTok, outTok                                  int64
	op, provider, model, errType                   string
	gaps                                           pcommon.Slice
	gpuCats, gpuTimes                              pcommon.Slice // inferprof.gpu.categories and category_times
	cpuOverhead                                    float64
}

func (r *request) is(f uint16) bool { return r.has&f != 0 }

// parseRequest reads the canonical attributes the inference processor writes
// and reports whether span is a request span.
func parseRequest(span ptrace.Span, r *request, n *counts) bool {
	for k, v := range span.Attributes().All() {
		switch requestKeys.Index(k) {
		case keyTTFT:
			r.has |= isRequest | seconds(v, &r.ttft, hasTTFT, n)
		case keyE2E:
			r.has |= isRequest | seconds(v, &r.e2e, hasE2E, n)
		case keyQueue:
			r.has |= seconds(v, &r.queue, hasQueue, n)
		case keyPrefill:
			r.has |= seconds(v, &r.prefill, hasPrefill, n)
		case keyDecode:
			r.has |= seconds(v, &r.decode, hasDecode, n)
		case keyOther:
			r.has |= seconds(v, &r.other, hasOther, n)
		case keyTPOT:
			r.has |= seconds(v, &r.tpot, hasTPOT, n)
		case keyInTok:
			r.has |= count(v, &r.inTok, hasInTok, n)
		case keyOutTok:
			r.has |= count(v, &r.outTok, hasOutTok, n)
		case keyOp:
			r.op = str(v, n)
		case keyProvider:
			r.provider = str(v, n)
		case keyModel:
			r.model = str(v, n)
		case keyErrType:
			r.errType = str(v, n)
		case keyCost:
			r.has |= hasCost
		case keyAgent:
			r.has |= hasAgent
		case keyGaps:
			if v.Type() == pcommon.ValueTypeSlice {
				r.gaps = v.Slice()
				r.has |= hasGaps
			} else {
				n.bad++
			}
		case keyGPUCats:
			r.gpuCats = slice(v, n)
		case keyGPUTimes:
			r.gpuTimes = slice(v, n)
		case keyCPUOverhead:
			r.has |= seconds(v, &r.cpuOverhead, hasCPUOverhead, n)
		}
	}
	if !r.is(isRequest) {
		return false
	}
	if r.errType == "" && span.Status().Code() == ptrace.StatusCodeError {
		r.errType = names.ErrorTypeOther
	}
	return true
}

// seconds reads a non-negative, finite number of seconds into dst and returns
// flag, or counts a bad value and returns 0.
func seconds(v pcommon.Value, dst *float64, flag uint16, n *counts) uint16 {
	var f float64
	switch v.Type() {
	case pcommon.ValueTypeDouble:
		f = v.Double()
	case pcommon.ValueTypeInt:
		f = float64(v.Int())
	default:
		n.bad++
		return 0
	}
	if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		n.bad++
		return 0
	}
	*dst = f
	return flag
}

// count reads a non-negative whole number into dst.
func count(v pcommon.Value, dst *int64, flag uint16, n *counts) uint16 {
	var i int64
	switch v.Type() {
	case pcommon.ValueTypeInt:
		i = v.Int()
	case pcommon.ValueTypeDouble:
		f := v.Double()
		if f != math.Trunc(f) || f > math.MaxInt64 {
			n.bad++
			return 0
		}
		i = int64(f)
	default:
		n.bad++
		return 0
	}
	if i < 0 {
		n.bad++
		return 0
	}
	*dst = i
	return flag
}

func slice(v pcommon.Value, n *counts) pcommon.Slice {
	if v.Type() != pcommon.ValueTypeSlice {
		n.bad++
		return pcommon.Slice{}
	}
	return v.Slice()
}

// str reads a string attribute, fit to be a label (labels.go).
func str(v pcommon.Value, n *counts) string {
	if v.Type() != pcommon.ValueTypeStr {
		n.bad++
		return ""
	}
	s, changed := labelValue(v.Str())
	if changed {
		n.sanitized++
	}
	return s
}

func spanSeconds(span ptrace.Span) float64 {
	start, end := span.StartTimestamp(), span.EndTimestamp()
	if end <= start {
		return 0
	}
	return float64(end-start) / 1e9
}
