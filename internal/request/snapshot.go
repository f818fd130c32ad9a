// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package request // import "github.com/inferprof/inferprof/internal/request"

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/inferprof/inferprof/internal/keyindex"
	"github.com/inferprof/inferprof/internal/names"
)

// Source attribute keys the engines write (see testdata/spans/README.md for
// the engine file each one comes from).
const (
	srcPromptTokens     = "gen_ai.usage.prompt_tokens"
	srcCompletionTokens = "gen_ai.usage.completion_tokens"
	srcCachedTokens     = "gen_ai.usage.cached_tokens" // SGLang; vLLM's token-tracing branch
	srcInference        = "gen_ai.latency.time_in_model_inference"
	srcResponseModel    = "gen_ai.response.model"
	srcFinishReasons    = "gen_ai.response.finish_reasons"
	srcSystem           = "gen_ai.system"
	srcKVTransfer       = "gen_ai.latency.kv_cache_transfer_time" // TensorRT-LLM, disaggregated
	srcTopK             = "gen_ai.request.top_k"                  // TensorRT-LLM writes it, vLLM does not
	srcScheduler        = "gen_ai.latency.time_in_scheduler"      // vLLM V0 only
	srcNumSequences     = "gen_ai.usage.num_sequences"            // vLLM V0 only

	tgiTotal      = "total_time"
	tgiQueue      = "queue_time"
	tgiInference  = "inference_time"
	tgiValidation = "validation_time"
	tgiPerToken   = "time_per_token"
	tgiParameters = "parameters"
	// codeNamespace is tracing-opentelemetry's location attribute; TGI's
	// router handlers live in this module.
	codeNamespace = "code.namespace"
	tgiRouterMod  = "text_generation_router::server"
)

// Keys this processor writes that have no semconv name elsewhere in
// internal/names: only this processor uses them.
const (
	// AttrCacheRead is GenAI semconv's name for prompt tokens served from
	// the engine's prefix cache.
	AttrCacheRead = "gen_ai.usage.cache_read.input_tokens"
	// AttrDecodeQueue is the time an SGLang request waited in the decode
	// server's queue under prefill/decode disaggregation (its decode_waiting
	// stage), seconds.
	AttrDecodeQueue = "inferprof.latency.time_in_decode_queue"
)

// scalar is one attribute value copied out of the span, so reads stay valid
// while the map is edited (Remove shifts entries under a pcommon.Value).
type scalar struct {
	typ pcommon.ValueType
	d   float64
	i   int64
	s   string
}

// Indexes of the span attributes Normalize reads; one pass over the map
// fills them instead of a linear Get per key.
const (
	kTTFT = iota
	kE2E
	kQueue
	kPrefill
	kDecode
	kInference
	kPromptTokens
	kCompletionTokens
	kInputTokens
	kOutputTokens
	kCachedTokens
	kCacheRead
	kProvider
	kSystem
	kRequestModel
	kResponseModel
	kLoRA
	kOperation
	kRequestID
	kErrorType
	kTGITotal
	kTGIQueue
	kTGIInference
	kTGIValidation
	kTGIParameters
	// Keys only this processor writes; read to know whether a Put adds one.
	kTPOT
	kOther
	kBottleneck
	kDecodeQueue
	kAnomaly
	numKeys
)

// kFinishReasons is keyIndex's answer for gen_ai.response.finish_reasons,
// which the snapshot reads (failureOf) rather than keeps.
const kFinishReasons = numKeys

// keyNames are the keys by index.
var keyNames = [numKeys]string{
	kTTFT:             names.AttrTimeToFirstToken,
	kE2E:              names.AttrE2E,
	kQueue:            names.AttrTimeInQueue,
	kPrefill:          names.AttrTimeInPrefill,
	kDecode:           names.AttrTimeInDecode,
	kInference:        srcInference,
	kPromptTokens:     srcPromptTokens,
	kCompletionTokens: srcCompletionTokens,
	kInputTokens:      names.AttrInputTokens,
	kOutputTokens:     names.AttrOutputTokens,
	kCachedTokens:     srcCachedTokens,
	kCacheRead:        AttrCacheRead,
	kProvider:         names.AttrProviderName,
	kSystem:           srcSystem,
	kRequestModel:     names.AttrRequestModel,
	kResponseModel:    srcResponseModel,
	kLoRA:             names.AttrLoRAAdapter,
	kOperation:        names.AttrOperationName,
	kRequestID:        names.AttrRequestID,
	kErrorType:        names.AttrErrorType,
	kTGITotal:         tgiTotal,
	kTGIQueue:         tgiQueue,
	kTGIInference:     tgiInference,
	kTGIValidation:    tgiValidation,
	kTGIParameters:    tgiParameters,
	kTPOT:             names.AttrTimePerOutputTok,
	kOther:            names.AttrTimeInOther,
	kBottleneck:       names.AttrBottleneck,
	kDecodeQueue:      AttrDecodeQueue,
	kAnomaly:          names.AttrAnomaly,
}

// keyTable maps every key the snapshot reads to its index; see
// internal/keyindex for why a table rather than a switch.
var keyTable = keyindex.New(map[string]int{
	names.AttrTimeToFirstToken: kTTFT,
	names.AttrE2E:              kE2E,
	names.AttrTimeInQueue:      kQueue,
	names.AttrTimeInPrefill:    kPrefill,
	names.AttrTimeInDecode:     kDecode,
	srcInference:               kInference,
	srcPromptTokens:            kPromptTokens,
	srcCompletionTokens:        kCompletionTokens,
	names.AttrInputTokens:      kInputTokens,
	names.AttrOutputTokens:     kOutputTokens,
	srcCachedTokens:            kCachedTokens,
	AttrCacheRead:              kCacheRead,
	names.AttrProviderName:     kProvider,
	srcSystem:                  kSystem,
	names.AttrRequestModel:     kRequestModel,
	srcResponseModel:           kResponseModel,
	names.AttrLoRAAdapter:      kLoRA,
	names.AttrOperationName:    kOperation,
	names.AttrRequestID:        kRequestID,
	names.AttrErrorType:        kErrorType,
	tgiTotal:                   kTGITotal,
	tgiQueue:                   kTGIQueue,
	tgiInference:               kTGIInference,
	tgiValidation:              kTGIValidation,
	tgiParameters:              kTGIParameters,
	names.AttrTimePerOutputTok: kTPOT,
	names.AttrTimeInOther:      kOther,
	names.AttrBottleneck:       kBottleneck,
	AttrDecodeQueue:            kDecodeQueue,
	names.AttrAnomaly:          kAnomaly,
	srcFinishReasons:           kFinishReasons,
})

// keyIndex maps a key to its index, or -1.
func keyIndex(k string) int {
	return keyTable.Index(k)
}

// liveKey reports whether a LoRA key is one the snapshot does not copy for
// LoRA, so it is read from the span itself.
func liveKey(k string) bool {
	return keyIndex(k) >= 0
}

// loraKeys is what fill and loraOf need to know of Settings.LoRAAttributes,
// worked out once (Settings.Prepare) rather than for every span.
type loraKeys struct {
	// live has bit j set when LoRA key j is live (liveKey); any is set
	// when one is.
	live uint8
	any  bool
	// lens has bit n set when a LoRA key the snapshot copies has length n
	// (n < 64); long is set when one is longer. A key of any other length
	// is no LoRA key, which spares the comparisons for most keys.
	lens uint64
	long bool
}

func loraKeysOf(keys []string) loraKeys {
	var lk loraKeys
	for j, k := range keys {
		if liveKey(k) {
			lk.any = true
			if j < maxLoRA {
				lk.live |= 1 << j
			}
			continue
		}
		if j >= maxLoRA {
			continue
		}
		if len(k) < 64 {
			lk.lens |= 1 << len(k)
		} else {
			lk.long = true
		}
	}
	return lk
}

// maybeLoRA reports whether a key of this length may be a LoRA key the
// snapshot copies.
func (lk *loraKeys) maybeLoRA(k string) bool {
	if len(k) < 64 {
		return lk.lens&(1<<len(k)) != 0
	}
	return lk.long
}

// maxLoRA is how many LoRA keys the snapshot copies; the rest are read from
// the span.
const maxLoRA = 8

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
