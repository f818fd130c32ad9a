// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package k8scheckextension // import "github.com/inferprof/inferprof/extension/k8scheckextension"

import "go.opentelemetry.io/collector/component"

// Config is the Kubernetes check's configuration. Its keys mirror the
// k8s_attributes settings they describe: a config cannot read another
// component's block, so the shipped configs set both from one variable.
type Config struct {
	// Passthrough is k8s_attributes' own passthrough setting: true means it
	// asks no API server.
	Passthrough bool `mapstructure:"passthrough"`
	// NodeName is the node whose pods k8s_attributes watches
	// (k8s_attributes' filter.node_from_env_var); it only names the node in
	// the message.
	NodeName string `mapstructure:"node_name"`

	// prevent unkeyed literal initialization
	_ struct{}
}

var _ component.Config = (*Config)(nil)

// Validate checks the configuration. Every combination is a valid config;
// whether it can run depends on where it runs, which Start checks.
func (*Config) Validate() error { return nil }
