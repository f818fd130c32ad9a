// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor // import "github.com/inferprof/inferprof/processor/inferenceprocessor"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/inferprof/inferprof/internal/loglimit"
	"github.com/inferprof/inferprof/internal/request"
	"github.com/inferprof/inferprof/internal/spanbatch"
	"github.com/inferprof/inferprof/internal/ticker"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/join"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/metadata"
)

func newProcessor(set processor.Settings, cfg *Config, next consumer.Traces) (*inferenceProcessor, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	p := &inferenceProcessor{
		logger: set.Logger,
		next:   next,
		tel:    tel,
		settings: request.Settings{
			ModelResourceAttributes: cfg.Model.ResourceAttributes,
			DefaultModel:            cfg.Model.Default,
			LoRAAttributes:          cfg.LoRAAttributes,
			OperationName:           cfg.OperationName,
			PhaseSpans:              cfg.PhaseSpans,
		},
		phaseSpans:    cfg.PhaseSpans,
		now:           time.Now,
		warn:          loglimit.New(warnEvery),
		providerOpts:  map[request.Kind][]metric.AddOption{},
		anomalyOpts:   map[string][]metric.AddOption{},
		phaseJoinOpts: outcomeOpts(phaseJoinOutcomes),
	}
	for _, k := range []request.Kind{request.KindVLLM, request.KindTensorRTLLM, request.KindSGLangRoot, request.KindTGI} {
		p.providerOpts[k] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("provider", k.Provider())))}
	}
	for _, r := range request.AnomalyReasons {
		p.anomalyOpts[r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))}
	}
	p.settings.Prepare()
	p.tick = ticker.Period(cfg.SGLangJoin.Wait)
	if cfg.SGLangJoin.Wait > 0 {
		p.join = join.New(join.Settings{
			Wait: cfg.SGLangJoin.Wait, StageTTL: cfg.SGLangJoin.StageTTL, MaxEntries: cfg.SGLangJoin.MaxPending,
		})
		err = tel.RegisterProcessorInferenceJoinPendingCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(p.join.Len()))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *inferenceProcessor) start(context.Context, component.Host) error {
	if p.join == nil {
		return nil
	}
	p.loop.Start(p.tick, func() time.Time { return p.now() }, p.expire)
	return nil
}

// shutdown stops the ticker and releases every held span downstream: the
// join only delays spans, it never loses them.
func (p *inferenceProcessor) shutdown(ctx context.Context) error {
	var err error
	p.stopOnce.Do(func() {
		p.loop.Stop()
		if p.join != nil {
			if out := p.join.Drain(); len(out) > 0 {
				err = p.flush(ctx, p.finishReleased(ctx, out))
			}
		}
		p.tel.Shutdown()
	})
	return err
}

func (p *inferenceProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	held := false
	var released []join.Released
	var drop []int
	var w batchWork
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		var ri resourceInfo // read at the resource's first request span
		read := false
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			spans := ss.Spans()
			// Phase spans are appended behind the originals; only look at
			// the originals.
			n := spans.Len()
			w.enginePhases = anyEnginePhase(spans, n)
			if w.enginePhases && p.join != nil {
				released = append(released, p.offerEnginePhases(ctx, spans, n)...)
			}
			w.rs, w.ss = rs, ss
			drop = drop[:0]
			for k := 0; k < n; k++ {
				span := spans.At(k)
				kind := request.Classify(span)
				switch kind {
				case request.KindNone:
					continue
				case request.KindSGLangStage:
					released = append(released, p.stage(ctx, span)...)
					continue
				}
				q := request.Queue{}
				if kind == request.KindSGLangRoot && p.join != nil {
					// Normalize checks the other spans on its own walk.
					if request.Processed(span.Attributes()) {
						continue
					}
					var r []join.Released
					var wait bool
					q, wait, r = p.hold(ctx, rs, ss, span)
					released = append(released, r...)
					if wait {
						drop = append(drop, k)
						continue
					}
				}
				if !read {
					ri, read = p.readResource(rs.Resource()), true
				}
				p.normalize(ctx, &w, kind, spans, k, n-k, &ri, q)
			}
			if len(drop) > 0 {
				held = true
				spanbatch.RemoveIndexes(spans, drop)
			}
		}
	}
	if held {
		spanbatch.RemoveEmpty(td)
	}
	w.counts.flush(ctx, p)
	released = append(released, w.released...)
	if len(released) > 0 {
		// Released spans belong to earlier batches: they go on in a batch of
		// their own, so a refusal is retried here rather than returned to a
		// sender that never sent them.
		p.sendReleased(ctx, released)
	}
	if td.ResourceSpans().Len() == 0 {
		// Everything was held for the join; nothing to pass on now.
		return td, processorhelper.ErrSkipProcessingData
	}
	return td, nil
}
