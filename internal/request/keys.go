// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package request // import "github.com/inferprof/inferprof/internal/request"

import (
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
