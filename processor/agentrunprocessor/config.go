// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor // import "github.com/inferprof/inferprof/processor/agentrunprocessor"

import (
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/inferprof/inferprof/internal/confdur"
)

// Config is the agent run processor's configuration. The keys are the ones
// the inference processor had for the same jobs, unchanged, so a block
// moves from one processor to the other as it is.
type Config struct {
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

	// prevent unkeyed literal initialization
	_ struct{}
}

var _ component.Config = (*Config)(nil)

// Unmarshal decodes the configuration; a value that is not a duration is
// named in the error along with its key, and so is an unknown key
// (internal/confdur).
func (cfg *Config) Unmarshal(conf *confmap.Conf) error {
	return confdur.Unmarshal(conf, cfg)
}

// Validate checks the configuration; each message names its YAML key.
func (cfg *Config) Validate() error {
	errs := validateAgents(cfg.Agents, cfg.Prices, cfg.GPUHourPrice, cfg.Cost)
	errs = append(errs, cfg.validateMinimums()...)
	return errors.Join(errs...)
}

// Minimums of the durations. A bare number in YAML (5, not 5s) decodes as
// nanoseconds: a wait that short holds nothing, and a window that short keeps
// nothing, both silently. Waits are thresholds checked on a ticker, so a
// millisecond is already finer than they act on; windows hold state for
// whole requests, which last seconds.
const (
	minWait   = time.Millisecond
	minWindow = time.Second
)

// validateMinimums checks every duration that is set (0 keeps its own
// meaning: off, or the check in validateAgents) against its minimum.
func (cfg *Config) validateMinimums() []error {
	var errs []error
	for _, err := range []error{
		confdur.Min("agents.wait", cfg.Agents.Wait, minWait),
		confdur.Min("agents.engine_wait", cfg.Agents.EngineWait, minWait),
		confdur.Min("agents.max_hold", cfg.Agents.MaxHold, minWindow),
		confdur.Min("agents.conversation_idle", cfg.Agents.ConversationIdle, minWindow),
		confdur.Min("cost.share_window", cfg.Cost.ShareWindow, minWindow),
	} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
