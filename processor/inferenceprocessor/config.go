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

var _ component.Config = (*Config)(nil)

// removedKeys are keys this processor once had, with where their job went.
// A config written for the old shape fails with the new place named, rather
// than with a bare "has invalid keys".
var removedKeys = []struct{ key, moved string }{
	{"privacy", "content removal is the privacy processor's job: list privacy before inference in the pipeline's processors (its defaults are the ones this block had)"},
	{"engine_steps", "inter-token latency from engine steps is the step_figures processor's job: move this block under step_figures and list step_figures before inference"},
	{"gpu", "GPU figures per step and request are the step_figures processor's job: move this block under step_figures and list step_figures before inference"},
	{"defer_figures", "a node agent runs the step_figures processor in place of inference, and the gateway runs inference (config/agent.yaml, config/gateway.yaml)"},
	{"agents", agentRunMoved},
	{"prices", agentRunMoved},
	{"gpu_hour_price", agentRunMoved},
	{"cost", agentRunMoved},
}

const agentRunMoved = "agent runs and cost are the agent_run processor's job: move this key, unchanged, under agent_run and list agent_run after inference (docs/agents.md, docs/cost.md)"

// Unmarshal decodes the configuration; a value that is not a duration is
// named in the error along with its key (internal/confdur).
func (cfg *Config) Unmarshal(conf *confmap.Conf) error {
	var errs []error
	for _, r := range removedKeys {
		if conf.IsSet(r.key) {
			errs = append(errs, fmt.Errorf("inference processor: %q is no longer a key of this processor: %s", r.key, r.moved))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return confdur.Unmarshal(conf, cfg)
}

// Validate checks the configuration; each message names its YAML key.
func (cfg *Config) Validate() error {
	var errs []error
	if strings.TrimSpace(cfg.OperationName) == "" {
		errs = append(errs, errors.New("operation_name must not be empty"))
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
	errs = append(errs, validateMinimums(cfg.SGLangJoin.Wait, cfg.SGLangJoin.StageTTL)...)
	return errors.Join(errs...)
}
