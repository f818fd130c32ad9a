// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor // import "github.com/inferprof/inferprof/processor/inferenceprocessor"

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/inferprof/inferprof/internal/confdur"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/redact"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/request"
)

// Config is the inference processor's configuration.
type Config struct {
	// PhaseSpans adds child spans queue, prefill and decode under each request
	// span, placed on the request's own timeline, so a trace viewer shows the
	// waterfall. Default true; false keeps span volume unchanged.
	PhaseSpans bool `mapstructure:"phase_spans"`

	// Model says where gen_ai.request.model comes from when the span lacks it.
	Model ModelConfig `mapstructure:"model"`

	// LoRAAttributes are span, then resource, attribute keys that may carry
	// the LoRA adapter name; the first one found is written to
	// inferprof.lora.adapter. Default [lora_name, lora_path]. Empty: only an
	// inferprof.lora.adapter already on the span (or TGI's adapter_id) is kept.
	LoRAAttributes []string `mapstructure:"lora_attributes"`

	// OperationName is gen_ai.operation.name for request spans that do not
	// say which API they served (vLLM's span name is fixed) and whose request
	// id does not tell either. Default "text_completion". Must not be empty.
	OperationName string `mapstructure:"operation_name"`

	// SGLangJoin bounds how long an SGLang request span waits for the stage
	// spans of its trace, which SGLang's scheduler exports separately.
	SGLangJoin JoinConfig `mapstructure:"sglang_join"`

	// Privacy removes prompt and completion content from every span.
	Privacy PrivacyConfig `mapstructure:"privacy"`

	// EngineSteps rebuilds each request's inter-token latency from the
	// engine.step spans of the same engine (the engine_step receiver).
	EngineSteps StepsConfig `mapstructure:"engine_steps"`

	// GPU ties each engine.step span to the CUDA kernels the step launched
	// (from the cupti receiver of the same collector) and each request to
	// its share of them.
	GPU GPUConfig `mapstructure:"gpu"`

	// Agents writes agent-run figures (time in model, tools and other,
	// the engine queue share, turns) on agent-run spans.
	Agents AgentsConfig `mapstructure:"agents"`

	// Prices are per-model prices per 1M tokens, keyed by model name
	// (gen_ai.request.model). No default.
	Prices map[string]PriceConfig `mapstructure:"prices"`
	// GPUHourPrice prices self-hosted engines by the hour of their GPUs,
	// keyed by the GPU model name as NVML reports it (hw.name). No default.
	GPUHourPrice map[string]GPUPriceConfig `mapstructure:"gpu_hour_price"`
	// Cost says which GPUs serve engines that do not say.
	Cost CostConfig `mapstructure:"cost"`

	// DeferFigures is for the node agent of a two-tier deployment
	// (config/agent.yaml): it removes content and adds inter-token latency
	// from this node's engine steps, and leaves the canonical figures, phase
	// spans and the SGLang join to the gateway's inference processor, which
	// sees every span of a trace (a PD-disaggregated request's spans come
	// from two nodes). sglang_join, phase_spans, agents, prices and
	// gpu_hour_price are then not used: agent runs and cost are the
	// gateway's too.
	// Default false.
	DeferFigures bool `mapstructure:"defer_figures"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// ModelConfig resolves gen_ai.request.model: the span first, then these
// resource attributes in order, then Default.
type ModelConfig struct {
	// ResourceAttributes are resource attribute keys that name the served
	// model. Default [gen_ai.request.model, gen_ai.response.model,
	// inferprof.model.name]. Empty: the resource is not consulted.
	ResourceAttributes []string `mapstructure:"resource_attributes"`
	// Default is the model name when neither the span nor the resource has
	// one. Default "" (the attribute is then left unset).
	Default string `mapstructure:"default"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// JoinConfig bounds the SGLang split-batch join.
type JoinConfig struct {
	// Wait is how long an SGLang request span is held for its queue stage
	// (prefill_waiting) before it is released without it. Default 3s; 0
	// disables the join (request spans pass at once, without a queue time).
	Wait time.Duration `mapstructure:"wait"`
	// StageTTL is how long a queue stage record waits for its request span.
	// SGLang ends the request span when the request finishes, so the stage
	// usually comes first, by up to the whole decode. Default 5m. Must be
	// positive when Wait is set.
	StageTTL time.Duration `mapstructure:"stage_ttl"`
	// MaxPending caps held request spans (each counts one, however many
	// share a trace) plus traces with only stage records (about 200 bytes
	// each, plus the held span). When full, the oldest stage record is
	// forgotten, then the oldest held request spans are released early;
	// both are counted, and no span is dropped. It also caps the released
	// spans waiting to be offered again after the next consumer refused
	// them. Default 100000. Must be positive when Wait is set.
	MaxPending int `mapstructure:"max_pending"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// StepsConfig bounds the window of recent engine steps kept per engine
// instance. Request spans arrive when their request finished, so the window
// must span the longest request; a request whose steps already left it is
// marked inferprof.steps.missing=evicted instead of given figures.
type StepsConfig struct {
	// Enabled turns the inter-token latency rebuild on. Default true; it
	// costs nothing until step spans arrive.
	Enabled bool `mapstructure:"enabled"`
	// MaxAge keeps steps this long after the newest step of their engine.
	// Default 5m. Must be positive.
	MaxAge time.Duration `mapstructure:"max_age"`
	// MaxRecords caps the (request, step) token records kept in all, the
	// window's main memory cost (about 42 bytes each). Default 2000000
	// (about 85 MB). Must be positive.
	MaxRecords int `mapstructure:"max_records"`
	// MaxInstances caps the engine instances (service.instance.id, or
	// service.name without the launcher) tracked.
	// Default 256. Must be positive.
	MaxInstances int `mapstructure:"max_instances"`
	// StallFactor counts an inter-token gap as a stall
	// (inferprof.decode.stalls) when it exceeds this multiple of the
	// request's median gap. Default 3. Must be above 1.
	StallFactor float64 `mapstructure:"stall_factor"`
	// MaxITLGaps caps inferprof.latency.itl.gaps, which otherwise holds one
	// double per output token on every request span and travels to every
	// trace exporter of the pipeline. Above the cap the attribute holds
	// MaxITLGaps evenly spaced order statistics of the gaps (smallest to
	// largest, the minimum and maximum included), so the connector's
	// inter-token histogram keeps each request's distribution, at most
	// MaxITLGaps samples of it. p50/p99/max are always computed from every
	// gap. Default 256 (about 2.3 KB per span on the wire); 0 leaves the
	// attribute out. Must not be negative.
	MaxITLGaps int `mapstructure:"max_itl_gaps"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// GPUConfig bounds the step-to-kernel join. Step spans of an engine whose
// processes stream CUPTI activity to this collector are held until their
// kernel records arrived, then pass on with inferprof.step.gpu.*; request
// spans whose steps are still held wait for them, then get inferprof.gpu.*.
// Steps of engines without a CUPTI stream pass at once, marked
// inferprof.step.gpu.missing=no_source.
type GPUConfig struct {
	// Enabled turns the join on. Default true; it holds nothing while no
	// CUPTI stream is connected.
	Enabled bool `mapstructure:"enabled"`
	// Wait is how long a step span waits for its kernel records. CUPTI hands
	// them over in buffers, usually well under a second after the kernels
	// ran, but a buffer fills slowly under light load. A step whose records
	// are all in passes as soon as they are. Default 5s. Must be positive.
	Wait time.Duration `mapstructure:"wait"`
	// MaxHeld caps the step and request spans held at once; past it the
	// oldest step is finalized early with what it has
	// (inferprof.step.gpu.missing=evicted) and requests pass without
	// waiting. Default 100000. Must be positive.
	MaxHeld int `mapstructure:"max_held"`
	// StepStore names the step_store extension the cupti receiver feeds.
	// Unset: no CUPTI stream reaches the steps, which pass marked
	// inferprof.step.gpu.missing=no_source.
	StepStore *component.ID `mapstructure:"step_store"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// PrivacyConfig lists what content is removed from every span.
type PrivacyConfig struct {
	// Attributes are span and span-event attribute keys to delete. A key
	// ending in "*" matches every key with that prefix. Default: the
	// prompt/completion keys listed in the README. Must not be empty unless
	// KeepContent is true, so a stray `attributes: []` cannot turn removal off.
	Attributes []string `mapstructure:"attributes"`
	// Events are span event names to delete (content events such as
	// gen_ai.user.message). Same matching as Attributes. Must not be empty
	// unless KeepContent is true.
	Events []string `mapstructure:"events"`
	// KeepContent turns content removal off. Default false. Only for
	// pipelines where content is handled elsewhere.
	KeepContent bool `mapstructure:"keep_content"`

	// prevent unkeyed literal initialization
	_ struct{}
}

var _ component.Config = (*Config)(nil)

// Unmarshal decodes the configuration; a value that is not a duration is
// named in the error along with its key (internal/confdur).
func (cfg *Config) Unmarshal(conf *confmap.Conf) error { return confdur.Unmarshal(conf, cfg) }

// Validate checks the configuration; each message names its YAML key.
func (cfg *Config) Validate() error {
	var errs []error
	if strings.TrimSpace(cfg.OperationName) == "" {
		errs = append(errs, errors.New("operation_name must not be empty"))
	}
	if es := cfg.EngineSteps; es.Enabled {
		if es.MaxAge <= 0 {
			errs = append(errs, errors.New("engine_steps.max_age must be positive"))
		}
		if es.MaxRecords <= 0 {
			errs = append(errs, errors.New("engine_steps.max_records must be positive"))
		}
		if es.MaxInstances <= 0 {
			errs = append(errs, errors.New("engine_steps.max_instances must be positive"))
		}
		if es.MaxITLGaps < 0 {
			errs = append(errs, errors.New("engine_steps.max_itl_gaps must not be negative"))
		}
		if !(es.StallFactor > 1) {
			errs = append(errs, errors.New("engine_steps.stall_factor must be above 1"))
		}
	}
	if cfg.GPU.Enabled {
		if cfg.GPU.Wait <= 0 {
			errs = append(errs, errors.New("gpu.wait must be positive"))
		}
		if cfg.GPU.MaxHeld <= 0 {
			errs = append(errs, errors.New("gpu.max_held must be positive"))
		}
	}
	if cfg.SGLangJoin.Wait < 0 {
		errs = append(errs, errors.New("sglang_join.wait must not be negative"))
	}
	if cfg.SGLangJoin.Wait > 0 && cfg.SGLangJoin.MaxPending <= 0 {
		errs = append(errs, errors.New("sglang_join.max_pending must be greater than zero when sglang_join.wait is set"))
	}
	if cfg.SGLangJoin.Wait > 0 && cfg.SGLangJoin.StageTTL <= 0 {
		errs = append(errs, errors.New("sglang_join.stage_ttl must be greater than zero when sglang_join.wait is set"))
	}
	for _, k := range cfg.Model.ResourceAttributes {
		if k == "" {
			errs = append(errs, errors.New("model.resource_attributes must not contain an empty key"))
		}
	}
	for _, k := range cfg.LoRAAttributes {
		if k == "" {
			errs = append(errs, errors.New("lora_attributes must not contain an empty key"))
		}
	}
	if !cfg.Privacy.KeepContent {
		if len(cfg.Privacy.Attributes) == 0 {
			errs = append(errs, errors.New("privacy.attributes is empty: list the keys to remove, or set privacy.keep_content: true to keep prompts and completions"))
		}
		if len(cfg.Privacy.Events) == 0 {
			errs = append(errs, errors.New("privacy.events is empty: list the event names to remove, or set privacy.keep_content: true to keep prompts and completions"))
		}
	}
	errs = append(errs, cfg.validateAgents()...)
	errs = append(errs, cfg.validateMinimums()...)
	errs = append(errs, validatePatterns("privacy.attributes", cfg.Privacy.Attributes, true)...)
	errs = append(errs, validatePatterns("privacy.events", cfg.Privacy.Events, false)...)
	return errors.Join(errs...)
}

// writtenAttributes are the keys this processor writes: the request
// span's canonical set, the agent figures and the cost.
var writtenAttributes = append(append([]string(nil), request.CanonicalAttributes...),
	names.AttrAgentTimeInModel, names.AttrAgentTimeInTools, names.AttrAgentTimeInOther,
	names.AttrAgentTimeInQueue, names.AttrAgentModelCalls, names.AttrAgentToolCalls,
	names.AttrAgentBottleneck, names.AttrAgentTurn, names.AttrAgentSincePrevTurn, names.AttrAgentName,
	names.AttrRequestCost, names.AttrRequestCostMethod, names.AttrRequestCostCurrency)

// validatePatterns rejects empty patterns, a "*" anywhere but the end, and,
// for attributes, any pattern that would delete the canonical attributes
// this processor writes (a bare "*" or "gen_ai.*" would).
func validatePatterns(key string, patterns []string, attrs bool) []error {
	var errs []error
	for _, p := range patterns {
		body := strings.TrimSuffix(p, "*")
		switch {
		case body == "":
			errs = append(errs, fmt.Errorf("%s: pattern %q matches everything", key, p))
			continue
		case strings.Contains(body, "*"):
			errs = append(errs, fmt.Errorf("%s: pattern %q may only end in *", key, p))
			continue
		}
		if !attrs {
			continue
		}
		m := redact.NewMatcher([]string{p})
		for _, c := range writtenAttributes {
			if m.Match(c) {
				errs = append(errs, fmt.Errorf("%s: pattern %q would delete the canonical attribute %s", key, p, c))
				break
			}
		}
	}
	return errs
}
