// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package requestguardextension // import "github.com/inferprof/inferprof/extension/requestguardextension"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/inferprof/inferprof/extension/requestguardextension/internal/metadata"
)

// NewFactory returns the factory of the request guard extension.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, create, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	// 128 levels cost pdata's decoder a few KiB of stack and leave room for
	// any attribute a real instrumentation writes (docs/reliability.md).
	return &Config{MaxDepth: 128}
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newGuard(set, cfg.(*Config))
}
