// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepstoreextension // import "github.com/inferprof/inferprof/extension/stepstoreextension"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/inferprof/inferprof/extension/stepstoreextension/internal/metadata"
)

// NewFactory returns the factory of the step store extension.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, create, metadata.ExtensionStability)
}

func create(_ context.Context, _ extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newStore(cfg.(*Config)), nil
}
