// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package privacyprocessor // import "github.com/inferprof/inferprof/processor/privacyprocessor"

import (
	"errors"

	"go.opentelemetry.io/collector/component"

	"github.com/inferprof/inferprof/internal/privacy"
)

// Config is the privacy processor's configuration.
type Config struct {
	// Attributes are attribute keys whose values are content; they are
	// removed from spans, span events and links, log records (and the top
	// level of map bodies), datapoints, exemplars, resources and scopes. A
	// key ending in "*" matches that prefix; case is ignored. Default:
	// internal/privacy's list (docs/privacy.md). Must not be empty.
	Attributes []string `mapstructure:"attributes"`
	// Events are content event names. A span event of one of these names is
	// removed; a log record whose event_name (or event.name attribute) is
	// one keeps its metadata and loses its body. Same matching as
	// Attributes. Default: internal/privacy's list. Must not be empty.
	Events []string `mapstructure:"events"`

	// prevent unkeyed literal initialization
	_ struct{}
}

var _ component.Config = (*Config)(nil)

// Validate checks the configuration; each message names its YAML key.
func (cfg *Config) Validate() error {
	var errs []error
	if len(cfg.Attributes) == 0 {
		errs = append(errs, errors.New("attributes is empty: list the content keys to remove, or remove the privacy processor from the pipeline"))
	}
	if len(cfg.Events) == 0 {
		errs = append(errs, errors.New("events is empty: list the content event names to remove, or remove the privacy processor from the pipeline"))
	}
	errs = append(errs, privacy.ValidatePatterns("attributes", cfg.Attributes), privacy.ValidatePatterns("events", cfg.Events))
	return errors.Join(errs...)
}
