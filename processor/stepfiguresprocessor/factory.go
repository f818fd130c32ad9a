// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepfiguresprocessor // import "github.com/inferprof/inferprof/processor/stepfiguresprocessor"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/inferprof/inferprof/internal/stepwindow"
	"github.com/inferprof/inferprof/processor/stepfiguresprocessor/internal/metadata"
)

// NewFactory returns the factory of the step figures processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		createDefaultConfig,
		processor.WithTraces(createTraces, metadata.TracesStability),
	)
}

func createDefaultConfig() component.Config {
	def := stepwindow.NewDefaultConfig()
	return &Config{
		EngineSteps: StepsConfig{
			Enabled:      true,
			MaxAge:       def.MaxAge,
			MaxRecords:   def.MaxRecords,
			MaxInstances: def.MaxInstances,
			StallFactor:  def.StallFactor,
			MaxITLGaps:   256,
		},
		GPU: GPUConfig{
			Enabled: true,
			// Past the CUPTI library's flush (200 ms) and a few slowly
			// filling buffers under light load.
			Wait:    5 * time.Second,
			MaxHeld: 100_000,
		},
	}
}

func createTraces(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	_, tp, err := newTraces(ctx, set, cfg.(*Config), next)
	return tp, err
}

func newTraces(ctx context.Context, set processor.Settings, cfg *Config, next consumer.Traces) (*stepFiguresProcessor, processor.Traces, error) {
	p, err := newProcessor(set, cfg, next)
	if err != nil {
		return nil, nil, err
	}
	tp, err := processorhelper.NewTraces(ctx, set, cfg, next, p.processTraces,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}),
		processorhelper.WithStart(p.start),
		processorhelper.WithShutdown(p.shutdown))
	return p, tp, err
}
