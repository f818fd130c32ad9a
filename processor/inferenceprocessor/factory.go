// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor // import "github.com/inferprof/inferprof/processor/inferenceprocessor"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/metadata"
)

// NewFactory returns the factory of the inference processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		createDefaultConfig,
		processor.WithTraces(createTraces, metadata.TracesStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		// The waterfall is what users ask for most; volume-sensitive users
		// turn it off.
		PhaseSpans: true,
		Model: ModelConfig{
			ResourceAttributes: []string{"gen_ai.request.model", "gen_ai.response.model", names.ResourceModelName},
		},
		// vLLM's LoRARequest calls it lora_name; SGLang's request lora_path.
		LoRAAttributes: []string{"lora_name", "lora_path"},
		OperationName:  "text_completion",
		SGLangJoin: JoinConfig{
			// SGLang's exporters flush every 500 ms by default; a few of
			// those periods cover a slow scheduler process.
			Wait:       3 * time.Second,
			StageTTL:   5 * time.Minute,
			MaxPending: 100_000,
		},
	}
}

func createTraces(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	_, tp, err := newTraces(ctx, set, cfg.(*Config), next)
	return tp, err
}

func newTraces(ctx context.Context, set processor.Settings, cfg *Config, next consumer.Traces) (*inferenceProcessor, processor.Traces, error) {
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
