// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package k8scheckextension // import "github.com/inferprof/inferprof/extension/k8scheckextension"

import (
	"context"
	"os"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/inferprof/inferprof/extension/k8scheckextension/internal/metadata"
)

// NewFactory returns the factory of the Kubernetes check extension.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, create, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	// Passthrough by default, as the shipped agent: it starts anywhere.
	return &Config{Passthrough: true}
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return &check{cfg: cfg.(*Config), logger: set.Logger, getenv: os.Getenv}, nil
}
