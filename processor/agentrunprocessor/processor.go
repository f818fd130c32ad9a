// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrunprocessor // import "github.com/inferprof/inferprof/processor/agentrunprocessor"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/otel/metric"

	"github.com/inferprof/inferprof/internal/loglimit"
	"github.com/inferprof/inferprof/internal/request"
	"github.com/inferprof/inferprof/internal/spanbatch"
	"github.com/inferprof/inferprof/internal/ticker"
	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/agent"
	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/cost"
	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/metadata"
)

func newProcessor(set processor.Settings, cfg *Config, next consumer.Traces) (*agentRunProcessor, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	p := &agentRunProcessor{
		logger:         set.Logger,
		next:           next,
		tel:            tel,
		now:            time.Now,
		warn:           loglimit.New(warnEvery),
		incompleteOpts: reasonOpts(incompleteReasons),
		tick:           ticker.Period(cfg.Agents.Wait, cfg.Agents.EngineWait),
	}
	p.pricer = newPricer(cfg)
	if cfg.Agents.Enabled {
		p.agents = newAssembler(cfg, p.pricer)
		err = tel.RegisterProcessorAgentRunPendingCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(p.agents.Len()))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

func newAssembler(cfg *Config, pricer *cost.Pricer) *agent.Assembler {
	ag := cfg.Agents
	return agent.New(agent.Settings{
		Wait: ag.Wait, MaxHold: ag.MaxHold, EngineWait: ag.EngineWait,
		MaxSpans: ag.MaxSpans, MaxSpansPerTrace: ag.MaxSpansPerTrace,
		MaxConversations: ag.MaxConversations, ConversationIdle: ag.ConversationIdle,
		Pricer: pricer,
	})
}

func newPricer(cfg *Config) *cost.Pricer {
	set := cost.Settings{
		Prices: map[string]cost.Price{}, GPUs: map[string]cost.GPUPrice{},
		DefaultGPU: cfg.Cost.GPU, DefaultGPUCount: cfg.Cost.GPUCount,
		ShareWindow: cfg.Cost.ShareWindow, MaxInstances: cfg.Cost.MaxInstances,
		MaxRecordsPerInstance: 1 << 20,
	}
	for model, pc := range cfg.Prices {
		pr := cost.Price{Input: *pc.Input, Output: *pc.Output, Currency: pc.Currency}
		if pc.CachedInput != nil {
			pr.CachedInput, pr.HasCached = *pc.CachedInput, true
		}
		set.Prices[model] = pr
	}
	for gpu, gc := range cfg.GPUHourPrice {
		set.GPUs[gpu] = cost.GPUPrice{Hour: *gc.Price, Currency: gc.Currency}
	}
	return cost.New(set)
}

func (p *agentRunProcessor) start(context.Context, component.Host) error {
	if p.agents == nil {
		return nil
	}
	p.loop.Start(p.tick, func() time.Time { return p.now() }, p.expire)
	return nil
}

// shutdown stops the ticker and releases every held span downstream: the
// assembly only delays spans, it never loses them.
func (p *agentRunProcessor) shutdown(ctx context.Context) error {
	var err error
	p.stopOnce.Do(func() {
		p.loop.Stop()
		if p.agents != nil {
			out := p.agents.Drain(p.now())
			p.agentStats(ctx)
			if td := mergeReleases(out); td.ResourceSpans().Len() > 0 {
				if err = p.next.ConsumeTraces(ctx, td); err != nil {
					p.giveUp(ctx, td, err)
				}
			}
		}
		p.tel.Shutdown()
	})
	return err
}

func (p *agentRunProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	if p.agents == nil && p.pricer == nil {
		return td, nil
	}
	held := false
	var drop []int
	var b batchState
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		var ri resourceInfo // read at the resource's first engine span
		read := false
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			spans := ss.Spans()
			var phases phaseIndex // built at the scope's first engine span that needs it
			drop = drop[:0]
			for k, n := p.nextSpan(spans, 0), spans.Len(); k < n; k = p.nextSpan(spans, k+1) {
				span := spans.At(k)
				switch request.Classify(span) {
				case request.KindNone:
					if p.agents != nil && p.genaiSpan(&b, rs, ss, span) {
						drop = append(drop, k)
					}
					continue
				case request.KindSGLangStage, request.KindVLLMCore:
					continue
				}
				if !p.wantsEngineSpan(span) {
					continue
				}
				if !read {
					ri, read = p.readResource(rs.Resource()), true
				}
				if p.engineSpan(&b, span, &ri, spans, &phases, spanbatch.Take(rs, ss, span)) {
					drop = append(drop, k)
				}
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
	p.finishBatch(ctx, &b)
	if td.ResourceSpans().Len() == 0 {
		// Everything was held; nothing to pass on now.
		return td, processorhelper.ErrSkipProcessingData
	}
	return td, nil
}

// nextSpan returns the index of the first span from k on that this processor
// must read, or spans.Len(). Most spans of an engine's batch are skipped
// here, in a loop of its own that keeps its few variables in registers.
func (p *agentRunProcessor) nextSpan(spans ptrace.SpanSlice, k int) int {
	for n := spans.Len(); k < n; k++ {
		span := spans.At(k)
		name := span.Name()
		if p.pricer == nil && name == "llm_request" && span.ParentSpanID().IsEmpty() {
			// vLLM's (or TensorRT-LLM's) request span with no caller and
			// nothing to price: nothing to do, and Classify would scan its
			// attributes to tell the two engines apart.
			continue
		}
		// The inference processor's phase spans (three per request) are
		// their request span's, not spans of the caller's trace to record:
		// skipped by name, then marker, before Classify's look-ups
		// (callgrind: 1,800 instructions per request span with phase spans
		// on, when they were classified).
		if request.IsSyntheticPhase(span) {
			continue
		}
		return k
	}
	return k
}
