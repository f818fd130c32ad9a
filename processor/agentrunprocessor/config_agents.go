// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor // import "github.com/inferprof/inferprof/processor/agentrunprocessor"

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// AgentsConfig bounds the assembly of agent runs from their spans (see
// docs/agents.md).
type AgentsConfig struct {
	// Enabled turns agent-run figures on. Default true; it costs nothing
	// until a GenAI client span arrives.
	Enabled bool `mapstructure:"enabled"`
	// Wait is how long a complete agent trace (every held span's ancestors
	// arrived, up to the top of their process) waits for late spans from
	// other processes, such as the engine's request spans, whose exporter
	// flushes on its own clock (5 s by default in the OpenTelemetry SDK's
	// batch processor). Default 6s; 0 writes the figures at once.
	Wait time.Duration `mapstructure:"wait"`
	// MaxHold is the longest an agent run or model call span is held when
	// the top of its trace never arrives (it is then released with what
	// arrived, marked inferprof.agent.partial=timeout), and how long the
	// records of a trace are kept for late engine spans. Default 5m. Must be
	// positive.
	MaxHold time.Duration `mapstructure:"max_hold"`
	// EngineWait holds an engine request span that has a parent (its
	// caller sent traceparent) this long for the caller's spans, so the
	// engine's cost is counted with the caller's agent name and user. 0
	// (default): engine spans pass at once unless their caller is already
	// held; their cost then carries the agent name only when the agent's
	// spans came first.
	EngineWait time.Duration `mapstructure:"engine_wait"`
	// MaxSpans caps the spans recorded (a few numbers each, about 300
	// bytes) plus the spans held, all traces together. When full, the
	// oldest records are forgotten, then held spans released early
	// (inferprof.agent.partial=evicted); nothing is dropped. Default 200000.
	MaxSpans int `mapstructure:"max_spans"`
	// MaxSpansPerTrace caps the spans recorded for one trace; past it the
	// trace's figures are marked partial (truncated). Held spans always
	// count. Default 10000. Must not exceed max_spans.
	MaxSpansPerTrace int `mapstructure:"max_spans_per_trace"`
	// MaxConversations caps the conversations whose turns are counted;
	// the least recently active is forgotten first. Default 100000.
	MaxConversations int `mapstructure:"max_conversations"`
	// ConversationIdle forgets a conversation with no turn for this long;
	// its next turn counts from 1 again. Default 1h.
	ConversationIdle time.Duration `mapstructure:"conversation_idle"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// PriceConfig is one model's price per 1M tokens. There is no default price:
// a model not listed has no price-table cost.
type PriceConfig struct {
	// Input is the price of 1M input tokens. Required.
	Input *float64 `mapstructure:"input"`
	// CachedInput is the price of 1M input tokens read from the provider's
	// prompt cache (gen_ai.usage.cache_read.input_tokens). Unset: cached
	// tokens cost Input.
	CachedInput *float64 `mapstructure:"cached_input"`
	// Output is the price of 1M output tokens. Required.
	Output *float64 `mapstructure:"output"`
	// Currency names the currency, e.g. USD. Required.
	Currency string `mapstructure:"currency"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// GPUPriceConfig is one GPU model's price per hour.
type GPUPriceConfig struct {
	// Price per GPU per hour. Required.
	Price *float64 `mapstructure:"price"`
	// Currency names the currency. Required.
	Currency string `mapstructure:"currency"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// CostConfig says which GPUs serve the engines, for gpu_hour_price.
type CostConfig struct {
	// GPU is the GPU model (as NVML names it, hw.name, e.g. "NVIDIA H200")
	// of engines whose resource does not carry hw.name. Must be a key of
	// gpu_hour_price when set.
	GPU string `mapstructure:"gpu"`
	// GPUCount is the number of GPUs of one engine instance (its tensor and
	// pipeline parallel size) when its resource lacks inferprof.gpu.count.
	// Default 1.
	GPUCount int `mapstructure:"gpu_count"`
	// ShareWindow is the wall time over which an engine's GPU cost is
	// shared among its requests by tokens, for requests without
	// inferprof.gpu.time. Default 1m.
	ShareWindow time.Duration `mapstructure:"share_window"`
	// MaxInstances caps the engine instances the share is kept for.
	// Default 256.
	MaxInstances int `mapstructure:"max_instances"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// validateAgents checks the agents, prices, gpu_hour_price and cost keys. A
// function of the sections rather than a method of Config, so this file
// needs nothing of config.go, which calls it.
func validateAgents(ag AgentsConfig, prices map[string]PriceConfig, gpuHour map[string]GPUPriceConfig, c CostConfig) []error {
	var errs []error
	if ag.Enabled {
		if ag.Wait < 0 {
			errs = append(errs, errors.New("agents.wait must not be negative"))
		}
		if ag.EngineWait < 0 {
			errs = append(errs, errors.New("agents.engine_wait must not be negative"))
		}
		if ag.MaxHold <= 0 {
			errs = append(errs, errors.New("agents.max_hold must be positive"))
		}
		if ag.MaxHold > 0 && (ag.Wait >= ag.MaxHold || ag.EngineWait >= ag.MaxHold) {
			errs = append(errs, errors.New("agents.wait and agents.engine_wait must be shorter than agents.max_hold"))
		}
		if ag.MaxSpans <= 0 {
			errs = append(errs, errors.New("agents.max_spans must be positive"))
		}
		if ag.MaxSpansPerTrace <= 0 || ag.MaxSpansPerTrace > ag.MaxSpans {
			errs = append(errs, errors.New("agents.max_spans_per_trace must be positive and at most agents.max_spans"))
		}
		if ag.MaxConversations <= 0 {
			errs = append(errs, errors.New("agents.max_conversations must be positive"))
		}
		if ag.ConversationIdle <= 0 {
			errs = append(errs, errors.New("agents.conversation_idle must be positive"))
		}
	}
	for _, model := range sortedKeys(prices) {
		p := prices[model]
		key := fmt.Sprintf("prices[%q]", model)
		if strings.TrimSpace(model) == "" {
			errs = append(errs, errors.New("prices: a model name must not be empty"))
		}
		errs = append(errs, checkPrice(key+".input", p.Input, true)...)
		errs = append(errs, checkPrice(key+".output", p.Output, true)...)
		errs = append(errs, checkPrice(key+".cached_input", p.CachedInput, false)...)
		if strings.TrimSpace(p.Currency) == "" {
			errs = append(errs, fmt.Errorf("%s.currency is required: no currency is assumed", key))
		}
	}
	for _, gpu := range sortedKeys(gpuHour) {
		p := gpuHour[gpu]
		key := fmt.Sprintf("gpu_hour_price[%q]", gpu)
		if strings.TrimSpace(gpu) == "" {
			errs = append(errs, errors.New("gpu_hour_price: a GPU name must not be empty"))
		}
		errs = append(errs, checkPrice(key+".price", p.Price, true)...)
		if strings.TrimSpace(p.Currency) == "" {
			errs = append(errs, fmt.Errorf("%s.currency is required: no currency is assumed", key))
		}
	}
	if c.GPU != "" {
		if _, ok := gpuHour[c.GPU]; !ok {
			errs = append(errs, fmt.Errorf("cost.gpu %q has no entry in gpu_hour_price", c.GPU))
		}
	}
	if c.GPUCount <= 0 {
		errs = append(errs, errors.New("cost.gpu_count must be positive"))
	}
	if c.ShareWindow <= 0 {
		errs = append(errs, errors.New("cost.share_window must be positive"))
	}
	if c.MaxInstances <= 0 {
		errs = append(errs, errors.New("cost.max_instances must be positive"))
	}
	return errs
}

func checkPrice(key string, v *float64, required bool) []error {
	switch {
	case v == nil && required:
		return []error{fmt.Errorf("%s is required", key)}
	case v == nil:
		return nil
	case math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0:
		return []error{fmt.Errorf("%s must be a finite number, zero or more", key)}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
