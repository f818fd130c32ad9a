// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepfiguresprocessor // import "github.com/inferprof/inferprof/processor/stepfiguresprocessor"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/otel/metric"

	"github.com/inferprof/inferprof/internal/loglimit"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/request"
	"github.com/inferprof/inferprof/internal/spanbatch"
	"github.com/inferprof/inferprof/internal/stepspan"
	"github.com/inferprof/inferprof/internal/stepwindow"
	"github.com/inferprof/inferprof/processor/stepfiguresprocessor/internal/metadata"
)

func newProcessor(set processor.Settings, cfg *Config, next consumer.Traces) (*stepFiguresProcessor, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	p := &stepFiguresProcessor{
		logger:  set.Logger,
		warn:    loglimit.New(warnEvery),
		next:    next,
		tel:     tel,
		maxGaps: cfg.EngineSteps.MaxITLGaps,
		now:     time.Now,
	}
	if p.stepReader, err = stepspan.NewReader(set.TelemetrySettings); err != nil {
		return nil, err
	}
	if es := cfg.EngineSteps; es.Enabled {
		p.steps = stepwindow.New(stepwindow.Config{
			MaxAge: es.MaxAge, MaxRecords: es.MaxRecords, MaxInstances: es.MaxInstances, StallFactor: es.StallFactor,
		})
		if err := p.steps.RegisterTelemetry(set.TelemetrySettings); err != nil {
			return nil, err
		}
	}
	if cfg.GPU.Enabled {
		p.gpu = newGPUJoin(cfg.GPU)
		err = tel.RegisterProcessorStepFiguresGpuHeldCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(p.gpu.held()))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *stepFiguresProcessor) start(_ context.Context, host component.Host) error {
	if p.gpu == nil {
		return nil
	}
	if err := p.gpu.startStore(host, p.logger); err != nil {
		return err
	}
	p.loop.Start(p.gpu.tick, func() time.Time { return p.now() }, p.tickGPU)
	return nil
}

// shutdown stops the ticker and releases every held span downstream, as it
// stands: the GPU join only delays spans.
func (p *stepFiguresProcessor) shutdown(ctx context.Context) error {
	p.stopOnce.Do(func() {
		p.loop.Stop()
		if p.gpu != nil && p.gpu.win != nil {
			p.drainGPU(ctx)
		}
		p.tel.Shutdown()
		p.steps.Close()
		p.stepReader.Shutdown()
	})
	return nil
}

func (p *stepFiguresProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	if p.steps == nil && p.gpu == nil {
		return td, nil
	}
	held := p.addSteps(ctx, td)
	// Asked once per batch, after addSteps: without the step hook every
	// look-up of a request would find nothing, and a look-up (its key
	// split, map probes and lock) costs more than the rest of the span's
	// work. Steps that another batch adds meanwhile are seen by the next
	// batch, as they would be had they come a moment later.
	if p.steps != nil && p.steps.Stats().Instances > 0 && p.requests(ctx, td) {
		held = true
	}
	if held {
		spanbatch.RemoveEmpty(td)
	}
	if td.ResourceSpans().Len() == 0 {
		// Everything was held for its GPU figures; nothing to pass on now.
		return td, processorhelper.ErrSkipProcessingData
	}
	return td, nil
}

// requests writes the step figures on every request span of td, and holds
// those whose steps are still waiting for their kernels. It returns whether
// it held any, leaving empty scopes and resources for the caller to remove.
func (p *stepFiguresProcessor) requests(ctx context.Context, td ptrace.Traces) bool {
	held := false
	var drop []int
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		instance, read := "", false // the resource's key in the step window, read at its first request
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			spans := ss.Spans()
			drop = drop[:0]
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				id := requestID(span)
				if id == "" {
					continue
				}
				if !read {
					instance, read = stepwindow.InstanceKey(rs.Resource()), true
				}
				found := p.interTokenLatency(span, instance, id)
				if p.gpu != nil && p.requestGPU(ctx, rs, ss, span, instance, id, &found) {
					drop = append(drop, k) // held for its steps' GPU figures; released by tickGPU
				}
			}
			if len(drop) > 0 {
				held = true
				spanbatch.RemoveIndexes(spans, drop)
			}
		}
	}
	return held
}

// requestID is the gen_ai.request.id (a string, as the inference processor
// reads it) of a span that is a whole engine request, else "". vLLM's
// llm_core is the engine half of a request whose API span has the figures;
// a span an inference processor upstream already processed had its figures
// written there too.
func requestID(span ptrace.Span) string {
	switch request.Classify(span) {
	case request.KindNone, request.KindSGLangStage, request.KindVLLMCore:
		return ""
	}
	attrs := span.Attributes()
	v, ok := attrs.Get(names.AttrRequestID)
	if !ok || v.Type() != pcommon.ValueTypeStr || v.Str() == "" || request.Processed(attrs) {
		return ""
	}
	return v.Str()
}
