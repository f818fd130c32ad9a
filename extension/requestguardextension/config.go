// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package requestguardextension // import "github.com/inferprof/inferprof/extension/requestguardextension"

import (
	"fmt"

	"go.opentelemetry.io/collector/component"

	"github.com/inferprof/inferprof/internal/hostcheck"
)

// Config is the request guard's configuration.
type Config struct {
	// MaxDepth is how many levels of nested protobuf messages (OTLP/JSON:
	// objects) a body may have below its top-level message. OTLP's own
	// structure takes at most 8 (a metric exemplar's attribute value); each
	// level of an array attribute value takes 2 more, of a map 3. Default
	// 128: 60 levels of nested arrays in a span attribute. Must be positive.
	MaxDepth int `mapstructure:"max_depth"`
	// AllowedHosts are the names, besides loopback ones (localhost,
	// 127.0.0.0/8, ::1), an HTTP request's Host may give. Empty (the
	// default): requests that arrived on a loopback address must name
	// loopback, others are not checked. Listed: every request must name
	// loopback or one of these. "*" turns the check off.
	AllowedHosts []string `mapstructure:"allowed_hosts"`

	// prevent unkeyed literal initialization
	_ struct{}
}

var _ component.Config = (*Config)(nil)

// Validate checks the configuration; each message names its YAML key.
func (cfg *Config) Validate() error {
	if cfg.MaxDepth <= 0 {
		return fmt.Errorf("max_depth %d: must be positive", cfg.MaxDepth)
	}
	_, err := hostcheck.New(cfg.AllowedHosts)
	return err
}
