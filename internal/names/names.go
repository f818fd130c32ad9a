// Package names holds the span, metric and attribute names that more than one
// inferprof component reads or writes, so producer and consumer cannot drift.
//
// OpenTelemetry semantic-convention names are used where one exists
// (gen_ai.*, hw.*, process.*); the rest live under inferprof.* and are
// documented in docs/names.md.
package names // import "github.com/inferprof/inferprof/internal/names"

// Request span attributes written by the inference processor.
const (
	AttrTimeToFirstToken  = "gen_ai.latency.time_to_first_token"
	AttrE2E               = "gen_ai.latency.e2e"
	AttrTimeInQueue       = "gen_ai.latency.time_in_queue"
	AttrTimeInPrefill     = "gen_ai.latency.time_in_model_prefill"
	AttrTimeInDecode      = "gen_ai.latency.time_in_model_decode"
	AttrTimePerOutputTok  = "gen_ai.latency.time_per_output_token"
	AttrTimeInOther       = "inferprof.latency.time_in_other"
	AttrBottleneck        = "inferprof.latency.bottleneck"
	AttrInputTokens       = "gen_ai.usage.input_tokens"
	AttrOutputTokens      = "gen_ai.usage.output_tokens"
	AttrProviderName      = "gen_ai.provider.name"
	AttrRequestModel      = "gen_ai.request.model"
	AttrOperationName     = "gen_ai.operation.name"
	AttrRequestID         = "gen_ai.request.id"
	AttrLoRAAdapter       = "inferprof.lora.adapter"
	AttrAnomaly           = "inferprof.anomaly"
	AttrErrorType         = "error.type"
	AttrITLP50            = "inferprof.latency.itl.p50"
	AttrITLP99            = "inferprof.latency.itl.p99"
	AttrITLMax            = "inferprof.latency.itl.max"
	AttrITLGaps           = "inferprof.latency.itl.gaps" // every inter-token gap in seconds, for the connector's histogram
	AttrDecodeSteps       = "inferprof.decode.steps"
	AttrDecodeStalls      = "inferprof.decode.stalls"
	AttrStepsMissing      = "inferprof.steps.missing" // the request's steps left the window before it arrived
	AttrEngineInstanceKey = "inferprof.engine.instance"
)

// Provider names for gen_ai.provider.name.
const (
	ProviderVLLM        = "vllm"
	ProviderSGLang      = "sglang"
	ProviderTensorRTLLM = "tensorrt_llm"
	ProviderTGI         = "tgi"
)

// Engine step spans, one per scheduler iteration, produced by the engine_step
// receiver and read by the inference processor and connector.
const (
	SpanEngineStep = "engine.step"

	AttrStepIndex           = "inferprof.step.index"
	AttrStepPrefillReqs     = "inferprof.step.prefill_requests"
	AttrStepDecodeReqs      = "inferprof.step.decode_requests"
	AttrStepScheduledToks   = "inferprof.step.scheduled_tokens"
	AttrStepRequestIDs      = "inferprof.step.request_ids"    // []string: requests that got tokens this step
	AttrStepRequestTokens   = "inferprof.step.request_tokens" // []int: tokens each got, aligned with request_ids
	AttrStepPreempted       = "inferprof.step.preempted_request_ids"
	AttrStepKVCacheUsage    = "inferprof.step.kv_cache_usage" // fraction 0..1
	AttrStepRunningReqs     = "inferprof.step.running_requests"
	AttrStepWaitingReqs     = "inferprof.step.waiting_requests"
	ResourceEngineName      = "inferprof.engine.name" // vllm, sglang
	ResourceEngineVersion   = "inferprof.engine.version"
	ResourceProcessPID      = "process.pid"
	ResourceHostName        = "host.name"
	ResourceServiceName     = "service.name"
	ResourceServiceInstance = "service.instance.id"
)

// GPU kernel metrics, produced by the cupti receiver and mapped to
// Graphsignal PROFILE signals by the graphsignal exporter.
const (
	MetricKernelDuration = "inferprof.gpu.kernel.duration"
	MetricKernelCount    = "inferprof.gpu.kernel.count"
	AttrKernelName       = "gpu.kernel.name"
	AttrKernelCategory   = "gpu.kernel.category"
	AttrDeviceID         = "hw.id"
)
