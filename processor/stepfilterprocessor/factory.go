// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepfilterprocessor // import "github.com/inferprof/inferprof/processor/stepfilterprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/processor/stepfilterprocessor/internal/metadata"
)

// NewFactory returns the factory of the step_filter processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		createDefaultConfig,
		processor.WithTraces(createTraces, metadata.TracesStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{SpanNames: []string{names.SpanEngineStep}}
}

func createTraces(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	f, err := newFilter(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return processorhelper.NewTraces(ctx, set, cfg, next, f.processTraces,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}),
		processorhelper.WithShutdown(f.shutdown))
}
