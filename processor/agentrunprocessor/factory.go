// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor // import "github.com/inferprof/inferprof/processor/agentrunprocessor"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/metadata"
)

// NewFactory returns the factory of the agent run processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		createDefaultConfig,
		processor.WithTraces(createTraces, metadata.TracesStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		Agents: AgentsConfig{
			Enabled: true,
			// The OpenTelemetry SDK's batch span processor flushes every
			// 5 s by default: an engine's request span can reach us that
			// much after its caller's.
			Wait:             6 * time.Second,
			MaxHold:          5 * time.Minute,
			MaxSpans:         200_000,
			MaxSpansPerTrace: 10_000,
			MaxConversations: 100_000,
			ConversationIdle: time.Hour,
		},
		Cost: CostConfig{
			GPUCount:     1,
			ShareWindow:  time.Minute,
			MaxInstances: 256,
		},
	}
}

func createTraces(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	_, tp, err := newTraces(ctx, set, cfg.(*Config), next)
	return tp, err
}

func newTraces(ctx context.Context, set processor.Settings, cfg *Config, next consumer.Traces) (*agentRunProcessor, processor.Traces, error) {
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
