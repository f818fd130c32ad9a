// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepfilterprocessor // import "github.com/inferprof/inferprof/processor/stepfilterprocessor"

import (
	"errors"

	"go.opentelemetry.io/collector/component"
)

// Config is the step_filter processor's configuration.
type Config struct {
	// SpanNames are the span names to drop. Default: [engine.step]. It may not
	// be empty: a filter that drops nothing is a misconfiguration; remove the
	// processor from the pipeline instead.
	SpanNames []string `mapstructure:"span_names"`

	_ struct{}
}

var _ component.Config = (*Config)(nil)

// Validate checks that there is something to drop.
func (cfg *Config) Validate() error {
	if len(cfg.SpanNames) == 0 {
		return errors.New("span_names: must name at least one span; to keep every span, remove step_filter from the pipeline")
	}
	for _, n := range cfg.SpanNames {
		if n == "" {
			return errors.New("span_names: empty name")
		}
	}
	return nil
}
