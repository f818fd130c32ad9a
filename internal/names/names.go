// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package names holds the span, metric and attribute names that more than one
// inferprof component reads or writes, so producer and consumer cannot drift.
//
// OpenTelemetry semantic-convention names are used where one exists
// (gen_ai.*, hw.*, process.*); the rest live under inferprof.* and are
// documented in docs/names.md.
package names // import "github.com/inferprof/inferprof/internal/names"

// Request span attributes written by the inference processor.
const (
	AttrTimeToFirstToken = "gen_ai.latency.time_to_first_token"
	AttrE2E              = "gen_ai.latency.e2e"
	AttrTimeInQueue      = "gen_ai.latency.time_in_queue"
	AttrTimeInPrefill    = "gen_ai.latency.time_in_model_prefill"
	AttrTimeInDecode     = "gen_ai.latency.time_in_model_decode"
	AttrTimePerOutputTok = "gen_ai.latency.time_per_output_token"
	AttrTimeInOther      = "inferprof.latency.time_in_other"
	AttrBottleneck       = "inferprof.latency.bottleneck"
	AttrInputTokens      = "gen_ai.usage.input_tokens"
	AttrOutputTokens     = "gen_ai.usage.output_tokens"
	AttrProviderName     = "gen_ai.provider.name"
	AttrRequestModel     = "gen_ai.request.model"
	AttrOperationName    = "gen_ai.operation.name"
	AttrRequestID        = "gen_ai.request.id"
	AttrLoRAAdapter      = "inferprof.lora.adapter"
	AttrAnomaly          = "inferprof.anomaly"
	AttrErrorType        = "error.type"
	AttrITLP50           = "inferprof.latency.itl.p50"
	AttrITLP99           = "inferprof.latency.itl.p99"
	AttrITLMax           = "inferprof.latency.itl.max"
	AttrITLGaps          = "inferprof.latency.itl.gaps" // every inter-token gap in seconds, for the connector's histogram
	AttrDecodeSteps      = "inferprof.decode.steps"
	AttrDecodeStalls     = "inferprof.decode.stalls"
	AttrStepsMissing     = "inferprof.steps.missing" // why inter-token figures are absent or partial: evicted, no_steps, incomplete
)

// Phase spans the inference processor adds under each request span (the
// waterfall). They carry AttrSynthetic=true and no canonical attributes, so
// the connector does not count them as requests.
const (
	SpanPhaseQueue   = "queue"
	SpanPhasePrefill = "prefill"
	SpanPhaseDecode  = "decode"
	AttrSynthetic    = "inferprof.synthetic" // bool: made by inferprof, not by the engine
	// ResourceModelName names the served model on the resource when the
	// engine's spans do not (vLLM); the inference processor reads it.
	ResourceModelName = "inferprof.model.name"
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

	// bool, set only when true: the hook left request ids out of this step.
	AttrStepIDsTruncated = "inferprof.step.request_ids_truncated"
	// []string: requests that came back from preemption in this step.
	AttrStepResumed = "inferprof.step.resumed_request_ids"
	// bool, set only when true: the engine lacked something the hook reads,
	// so some of the step's figures are estimated or absent.
	AttrStepDegraded = "inferprof.step.degraded"
	// int: the step's batch number among those its engine handed the model
	// executor, from 1 (vLLM: execute_model calls; SGLang: run_batch calls).
	AttrStepBatch = "inferprof.step.batch"
	// []int (Unix ns), aligned: the intervals in which the engine process
	// launched the step's batch, and the launching thread of each.
	AttrStepLaunchStarts  = "inferprof.step.launch.start_times"
	AttrStepLaunchEnds    = "inferprof.step.launch.end_times"
	AttrStepLaunchThreads = "inferprof.step.launch.thread_ids"
	// int: data-parallel rank of the engine in its server.
	ResourceEngineIndex = "inferprof.engine.index"
)

// Metrics emitted by the inference_metrics connector (GenAI semantic
// conventions where one exists, inferprof.* otherwise).
const (
	MetricTimeToFirstToken   = "gen_ai.server.time_to_first_token"
	MetricTimePerOutputToken = "gen_ai.server.time_per_output_token"
	MetricRequestDuration    = "gen_ai.server.request.duration"
	MetricQueueDuration      = "inferprof.server.queue.duration"
	MetricPrefillDuration    = "inferprof.server.prefill.duration"
	MetricDecodeDuration     = "inferprof.server.decode.duration"
	MetricOtherDuration      = "inferprof.server.other.duration"
	MetricTokenUsage         = "inferprof.server.token.usage"
	MetricTokens             = "inferprof.server.tokens"
	MetricRequests           = "inferprof.server.requests"
	MetricGoodput            = "inferprof.server.goodput"
	// MetricGoodputTarget is a gauge, one point per configured target,
	// with AttrGoodputCriterion: the connector's targets, for the
	// dashboard and Grafana to draw.
	MetricGoodputTarget     = "inferprof.server.goodput.target"
	MetricInterTokenLatency = "inferprof.server.inter_token_latency"
	MetricGPUTime           = "inferprof.server.gpu.time"
	MetricCPUOverheadShare  = "inferprof.server.cpu_overhead.share"
	MetricStepDuration      = "inferprof.engine.step.duration"
	MetricStepBatchSize     = "inferprof.engine.step.batch_size"
	MetricStepTokens        = "inferprof.engine.step.tokens"
	MetricPreemptions       = "inferprof.engine.preemptions"

	// Base-2 exponential twins of the latency and step histograms above,
	// for percentiles within 2%: "inferprof.exponential." and the name
	// without its namespace, so no gen_ai.* name is made up and Prometheus
	// names do not collide with the explicit ones.
	MetricExpTimeToFirstToken   = "inferprof.exponential.server.time_to_first_token"
	MetricExpTimePerOutputToken = "inferprof.exponential.server.time_per_output_token"
	MetricExpRequestDuration    = "inferprof.exponential.server.request.duration"
	MetricExpQueueDuration      = "inferprof.exponential.server.queue.duration"
	MetricExpPrefillDuration    = "inferprof.exponential.server.prefill.duration"
	MetricExpDecodeDuration     = "inferprof.exponential.server.decode.duration"
	MetricExpOtherDuration      = "inferprof.exponential.server.other.duration"
	MetricExpInterTokenLatency  = "inferprof.exponential.server.inter_token_latency"
	MetricExpStepDuration       = "inferprof.exponential.engine.step.duration"
	MetricExpStepBatchSize      = "inferprof.exponential.engine.step.batch_size"
	MetricExpStepTokens         = "inferprof.exponential.engine.step.tokens"

	AttrTokenType      = "gen_ai.token.type" // input | output
	AttrMetricOverflow = "otel.metric.overflow"
	ErrorTypeOther     = "_OTHER" // semconv fallback for error.type
)

// GPU kernel metrics, produced by the cupti receiver and mapped to
// Graphsignal PROFILE signals by the graphsignal exporter.
const (
	MetricKernelDuration = "inferprof.gpu.kernel.duration"
	MetricKernelCount    = "inferprof.gpu.kernel.count"
	AttrKernelName       = "gpu.kernel.name"
	AttrKernelCategory   = "gpu.kernel.category"
	AttrDeviceID         = "hw.id"
	// AttrCUDADeviceOrdinal is the CUDA device ordinal as the engine
	// process numbers its devices (after CUDA_VISIBLE_DEVICES); the GPU
	// itself is AttrDeviceID, its UUID.
	AttrCUDADeviceOrdinal = "inferprof.cuda.device.ordinal"
	AttrMIGUUID           = "inferprof.gpu.mig.uuid"
	// On sampled kernel spans.
	AttrGPUStream         = "inferprof.gpu.stream"
	AttrCUDACorrelationID = "inferprof.cuda.correlation_id"
	AttrCUDAGraphID       = "inferprof.cuda.graph_id"
)

// GPU figures of an engine step (issue 13): the kernels the step launched,
// tied to it by the launch's correlation id. Times in seconds. Categories
// and top kernels are aligned arrays, as request ids and tokens are.
const (
	AttrStepGPUKernelTime    = "inferprof.step.gpu.kernel_time"
	AttrStepGPUKernelCount   = "inferprof.step.gpu.kernel_count"
	AttrStepGPUGraphCount    = "inferprof.step.gpu.graph_count"
	AttrStepGPUBusyTime      = "inferprof.step.gpu.busy_time"
	AttrStepGPUIdleBefore    = "inferprof.step.gpu.idle_before"
	AttrStepGPUIdleTime      = "inferprof.step.gpu.idle_time"
	AttrStepGPUCategories    = "inferprof.step.gpu.categories"     // []string
	AttrStepGPUCategoryTimes = "inferprof.step.gpu.category_times" // []double, aligned
	AttrStepGPUTopKernels    = "inferprof.step.gpu.top_kernels"    // []string, longest first
	AttrStepGPUTopTimes      = "inferprof.step.gpu.top_kernel_times"
	AttrStepGPUMissing       = "inferprof.step.gpu.missing" // why the figures are absent or partial
	AttrStepSource           = "inferprof.step.source"      // "kineto" on steps made from profiler traces
	// AttrThreadID (semconv thread.id) on a step span names the engine
	// thread: then only its launches in the engine's process are the step's.
	AttrThreadID = "thread.id"
)

// A request's GPU figures: over the steps that gave it tokens, its share of
// each step's kernel time (by the tokens it got there), and the GPU idle
// time of those steps. AttrGPUTime (seconds) is declared with the cost
// attributes, which read it.
const (
	AttrGPUCategories    = "inferprof.gpu.categories"     // []string
	AttrGPUCategoryTimes = "inferprof.gpu.category_times" // []double, aligned
	AttrCPUOverhead      = "inferprof.latency.cpu_overhead"
	AttrGPUMissing       = "inferprof.gpu.missing"
)

// More GPU activity metrics from the cupti receiver (memory copies, memsets,
// host synchronization, CUDA graph launches, device busy time).
const (
	MetricMemcpyDuration = "inferprof.gpu.memcpy.duration"
	MetricMemcpyBytes    = "inferprof.gpu.memcpy.bytes"
	MetricMemsetDuration = "inferprof.gpu.memset.duration"
	MetricMemsetBytes    = "inferprof.gpu.memset.bytes"
	MetricSyncDuration   = "inferprof.gpu.sync.duration"
	MetricGraphDuration  = "inferprof.gpu.graph.duration"
	MetricGraphCount     = "inferprof.gpu.graph.count"
	MetricGPUBusyTime    = "inferprof.gpu.busy.time"
	AttrMemcpyKind       = "inferprof.gpu.memcpy.kind"
	AttrMemoryKind       = "inferprof.gpu.memory.kind"
	AttrSyncKind         = "inferprof.gpu.sync.kind"
	// AttrCUDAGraphSignature is a CUDA graph's structural signature (16 hex
	// digits, Graphsignal's) or "unknown"; never the process-local graph id,
	// which would make a series per captured graph.
	AttrCUDAGraphSignature = "inferprof.cuda.graph.signature"
)

// GPU device events and counters, produced by the nvml receiver (logs and
// metrics) and read by the graphsignal exporter's error logs. Device
// resources carry hw.id (the GPU UUID), hw.name and nvidia.gpu.* attributes.
const (
	EventNameXID     = "nvidia.gpu.xid"         // log record event name of an XID
	AttrXID          = "nvidia.gpu.xid"         // int: the XID code, on log records and the counter
	AttrXIDMeaning   = "nvidia.gpu.xid.meaning" // text for the well-known codes
	AttrGPUEventType = "nvidia.gpu.event.type"  // xid, double_bit_ecc_error, ...
)

// Agent-run span attributes written by the inference processor on each agent
// run (invoke_agent and the instrumentations' equivalents), and read by the
// inference_metrics connector.
const (
	AttrAgentTimeInModel   = "inferprof.agent.time_in_model"   // s, model calls, overlaps counted once
	AttrAgentTimeInTools   = "inferprof.agent.time_in_tools"   // s, tool calls outside model calls
	AttrAgentTimeInOther   = "inferprof.agent.time_in_other"   // s, the rest of the run
	AttrAgentTimeInQueue   = "inferprof.agent.time_in_queue"   // s, engine queue of the run's calls that reached our engine
	AttrAgentTimeInPrefill = "inferprof.agent.time_in_prefill" // s, likewise prefill
	AttrAgentTimeInDecode  = "inferprof.agent.time_in_decode"  // s, likewise decode
	AttrAgentModelCalls    = "inferprof.agent.model_calls"
	AttrAgentToolCalls     = "inferprof.agent.tool_calls"
	AttrAgentToolErrors    = "inferprof.agent.tool_errors"
	AttrAgentEngineCalls   = "inferprof.agent.engine_calls" // model calls joined to an engine request span
	AttrAgentBottleneck    = "inferprof.agent.bottleneck"   // name of the run's longest direct child: model call, tool call or nested run
	AttrAgentTurn          = "inferprof.agent.turn"         // int, per gen_ai.conversation.id
	AttrAgentSincePrevTurn = "inferprof.agent.time_since_previous_turn"
	AttrAgentCost          = "inferprof.agent.cost"
	AttrAgentCostCurrency  = "inferprof.agent.cost.currency"
	AttrAgentPartial       = "inferprof.agent.partial" // why figures may be incomplete: timeout, evicted, shutdown, truncated

	// On a model call joined to the engine request spans that served it:
	// the engine's phases for that call (overlaps once, the engine's clock),
	// and the rest of the call (network, HTTP, the engine's frontend).
	AttrCallTimeInQueue   = "inferprof.call.time_in_queue"
	AttrCallTimeInPrefill = "inferprof.call.time_in_prefill"
	AttrCallTimeInDecode  = "inferprof.call.time_in_decode"
	AttrCallTimeInOther   = "inferprof.call.time_in_other"

	AttrAgentName      = "gen_ai.agent.name"
	AttrConversationID = "gen_ai.conversation.id"
	AttrEndUserID      = "enduser.id"
)

// Request cost, on request spans (engine server spans and client model calls).
const (
	AttrRequestCost         = "inferprof.request.cost"
	AttrRequestCostCurrency = "inferprof.request.cost.currency"
	AttrRequestCostMethod   = "inferprof.request.cost.method" // gpu_time, token_share, price_table
	// AttrGPUTime is a request's GPU time in seconds (the GPU correlation
	// work writes it); cost uses it when present.
	AttrGPUTime = "inferprof.gpu.time"
	// ResourceGPUCount is how many GPUs serve an engine instance, on its
	// resource; the GPU model comes from hw.name, as NVML reports it.
	ResourceGPUCount = "inferprof.gpu.count"
	ResourceGPUName  = "hw.name"
)

// Agent and cost metrics emitted by the inference_metrics connector.
const (
	MetricAgentRunDuration  = "inferprof.agent.run.duration"
	MetricAgentPartDuration = "inferprof.agent.run.part.duration"
	MetricAgentTurns        = "inferprof.agent.conversation.turns"
	MetricCost              = "inferprof.cost"
	MetricCostPer1kOutput   = "inferprof.cost.per_1k_output_tokens"
	AttrAgentPart           = "part" // model, tools, other
	AttrCostCurrency        = "inferprof.cost.currency"
	// AttrGoodputCriterion names the target of an
	// inferprof.server.goodput.target point.
	AttrGoodputCriterion = "inferprof.goodput.criterion" // time_to_first_token | time_per_output_token | e2e

	// Values of AttrGoodputCriterion: the connector's goodput keys.
	GoodputTTFT = "time_to_first_token"
	GoodputTPOT = "time_per_output_token"
	GoodputE2E  = "e2e"
)
