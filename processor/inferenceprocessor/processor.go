// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor // import "github.com/inferprof/inferprof/processor/inferenceprocessor"

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/internal/stepspan"
	"github.com/inferprof/inferprof/internal/stepwindow"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/agent"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/cost"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/join"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/metadata"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/redact"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/request"
)

type inferenceProcessor struct {
	logger     *zap.Logger
	next       consumer.Traces
	tel        *metadata.TelemetryBuilder
	settings   request.Settings
	phaseSpans bool
	redactor   *redact.Redactor // nil when content is kept
	// lateRedact: request spans that go straight to request.Normalize have
	// their content attributes removed there, in the walk it makes anyway
	// (settings.RemoveContent). Only when no key Classify reads is content,
	// so classifying first sees what it would after redaction.
	lateRedact bool
	join       *join.Table        // nil when the SGLang join is off
	steps      *stepwindow.Window // nil when engine_steps is off
	stepReader *stepspan.Reader   // reads engine.step spans for steps and gpu
	maxGaps    int                // engine_steps.max_itl_gaps
	gpu        *gpuJoin           // nil when gpu is off (gpu.go)
	agents     *agent.Assembler   // nil when agents.enabled is false
	pricer     *cost.Pricer       // nil when nothing is priced
	// deferFigures: request spans get privacy and inter-token latency only
	// (defer_figures; see deferred).
	deferFigures bool

	// Released spans the next consumer refused, retried on the next ticks.
	retry retryQueue
	// warn rate-limits the warnings about anomalies and refusals.
	warn *warnLimiter

	// for tests
	now  func() time.Time
	tick time.Duration

	// Precomputed metric options, so counting allocates nothing.
	// Slices, passed with ..., so a call does not build the variadic slice.
	providerOpts   map[request.Kind][]metric.AddOption
	attrOpt        []metric.AddOption
	eventOpt       []metric.AddOption
	anomalyOpts    map[string][]metric.AddOption // by reason
	incompleteOpts map[string][]metric.AddOption // by reason
	phaseJoinOpts  map[string][]metric.AddOption // by outcome

	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once
}

func newProcessor(set processor.Settings, cfg *Config, next consumer.Traces) (*inferenceProcessor, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	p := &inferenceProcessor{
		deferFigures: cfg.DeferFigures,
		logger:       set.Logger,
		next:         next,
		tel:          tel,
		settings: request.Settings{
			ModelResourceAttributes: cfg.Model.ResourceAttributes,
			DefaultModel:            cfg.Model.Default,
			LoRAAttributes:          cfg.LoRAAttributes,
			OperationName:           cfg.OperationName,
			PhaseSpans:              cfg.PhaseSpans,
			Place:                   cfg.Agents.Enabled,
		},
		phaseSpans:     cfg.PhaseSpans,
		maxGaps:        cfg.EngineSteps.MaxITLGaps,
		now:            time.Now,
		warn:           newWarnLimiter(warnEvery),
		providerOpts:   map[request.Kind][]metric.AddOption{},
		attrOpt:        []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("kind", "attribute")))},
		eventOpt:       []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("kind", "event")))},
		anomalyOpts:    map[string][]metric.AddOption{},
		incompleteOpts: reasonOpts(incompleteReasons),
		phaseJoinOpts:  outcomeOpts(phaseJoinOutcomes),
	}
	for _, k := range []request.Kind{request.KindVLLM, request.KindTensorRTLLM, request.KindSGLangRoot, request.KindTGI} {
		p.providerOpts[k] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("provider", k.Provider())))}
	}
	for _, r := range request.AnomalyReasons {
		p.anomalyOpts[r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))}
	}
	p.settings.Prepare()
	if !cfg.Privacy.KeepContent {
		p.redactor = redact.New(cfg.Privacy.Attributes, cfg.Privacy.Events)
		p.settings.RemoveContent(p.redactor.AttributeMatcher())
		p.lateRedact = true
		for _, k := range request.ClassifyKeys {
			if p.redactor.AttributeMatcher().Match(k) {
				p.lateRedact = false
			}
		}
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
		p.retry.maxSpans = max(p.retry.maxSpans, cfg.GPU.MaxHeld)
		err = tel.RegisterProcessorInferenceGpuHeldCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(p.gpu.held()))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	// A node agent that defers the figures defers agent runs and cost too:
	// the gateway sees every span of a trace, and every engine's requests.
	if !cfg.DeferFigures {
		p.pricer = newPricer(cfg)
	}
	if cfg.Agents.Enabled && !cfg.DeferFigures {
		p.agents = newAssembler(cfg, p.pricer)
		p.retry.maxSpans = max(p.retry.maxSpans, cfg.Agents.MaxSpans)
		err = tel.RegisterProcessorInferenceAgentPendingCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(p.agents.Len()))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	p.tick = tickFor(cfg)
	if cfg.SGLangJoin.Wait > 0 && !cfg.DeferFigures {
		p.join = join.New(join.Settings{
			Wait: cfg.SGLangJoin.Wait, StageTTL: cfg.SGLangJoin.StageTTL, MaxEntries: cfg.SGLangJoin.MaxPending,
		})
		p.retry.maxSpans = max(p.retry.maxSpans, cfg.SGLangJoin.MaxPending)
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

// tickFor is how often held spans are checked: a few times per wait, so a
// held span is late by a quarter of its wait at most, and at least once a
// second.
func tickFor(cfg *Config) time.Duration {
	tick := time.Second
	for _, w := range []time.Duration{cfg.SGLangJoin.Wait, cfg.Agents.Wait, cfg.Agents.EngineWait} {
		if w > 0 {
			tick = min(tick, max(w/4, time.Millisecond))
		}
	}
	return tick
}

func (p *inferenceProcessor) start(_ context.Context, host component.Host) error {
	if p.join == nil && p.agents == nil && p.gpu == nil {
		return nil
	}
	if p.gpu != nil {
		if err := p.gpu.startStore(host, p.logger); err != nil {
			return err
		}
	}
	// Background work gets its own context, not Start's.
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	if p.gpu != nil {
		p.every(ctx, p.gpu.tick, p.tickGPU)
	}
	if p.join != nil {
		p.every(ctx, p.tick, p.expire)
	}
	return nil
}

// every runs fn on a ticker of period d until ctx is done.
func (p *inferenceProcessor) every(ctx context.Context, d time.Duration, fn func(context.Context, time.Time)) {
	p.wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fn(ctx, p.now())
			}
		}
	})
}

// shutdown stops the ticker and releases every held span downstream: the
// join only delays spans, it never loses them.
func (p *inferenceProcessor) shutdown(ctx context.Context) error {
	var err error
	p.stopOnce.Do(func() {
		if p.cancel != nil {
			p.cancel()
		}
		p.wg.Wait()
		var pre ptrace.Traces
		if p.join != nil {
			if out := p.join.Drain(); len(out) > 0 {
				pre = p.finishReleased(ctx, out) // may hold spans for their GPU figures
			}
		}
		if p.gpu != nil && p.gpu.win != nil {
			p.drainGPU(ctx) // may give spans to the agent assembly
		}
		var agentOut []agent.Release
		if p.agents != nil {
			agentOut = p.agents.Drain(p.now())
			p.agentStats(ctx)
		}
		err = p.flush(ctx, pre, agentOut)
		p.tel.Shutdown()
		p.steps.Close()
		p.stepReader.Shutdown()
	})
	return err
}

func (p *inferenceProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	held := false
	if p.steps != nil || p.gpu != nil {
		held = p.addSteps(ctx, td)
	}
	var released []join.Released
	var drop []int
	var b batchState
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
				p.redactEvents(&w.counts, span)
				if !p.lateRedact {
					p.redactAttributes(&w.counts, span)
				}
				kind := request.Classify(span)
				if p.lateRedact && !p.direct(kind) {
					p.redactAttributes(&w.counts, span)
				}
				switch kind {
				case request.KindNone:
					if p.agents != nil && p.genaiSpan(&b, rs, ss, span) {
						drop = append(drop, k)
					}
					continue
				case request.KindSGLangStage:
					released = append(released, p.stage(ctx, span)...)
					continue
				}
				if p.deferFigures {
					if !read {
						ri, read = p.readResource(rs.Resource()), true
					}
					if id, found := p.deferred(span, kind, &ri); p.gpu != nil && p.requestGPU(ctx, rs, ss, span, &ri, id, nil, false, &found) {
						drop = append(drop, k)
					}
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
				r, found := p.normalize(ctx, &w, kind, spans, k, n-k, &ri, q)
				span = spans.At(k) // phase spans may have moved it
				switch {
				case p.gpu != nil && p.requestGPU(ctx, rs, ss, span, &ri, requestID(r), r, true, found):
					drop = append(drop, k) // held for its steps' GPU figures; released by tickGPU
				case p.wantsEngineSpan(span, r):
					if p.engineSpan(&b, span, &ri, r, takeSpan(rs, ss, span)) {
						drop = append(drop, k)
					}
				}
			}
			if len(drop) > 0 {
				held = true
				removeIndexes(spans, drop)
			}
		}
	}
	if held {
		removeEmpty(td)
	}
	w.counts.flush(ctx, p)
	p.finishBatch(ctx, &b)
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

// direct reports whether spans of kind go straight to request.Normalize:
// request spans, except SGLang's while the join may hold them.
func (p *inferenceProcessor) direct(kind request.Kind) bool {
	if p.deferFigures {
		return false
	}
	switch kind {
	case request.KindNone, request.KindSGLangStage:
		return false
	case request.KindSGLangRoot:
		return p.join == nil
	}
	return true
}

// redactEvents removes content events, and content attributes of the
// span's events.
func (p *inferenceProcessor) redactEvents(t *tally, span ptrace.Span) {
	if p.redactor == nil {
		return
	}
	attrs, events := p.redactor.Events(span)
	t.contentAttrs += int64(attrs)
	t.contentEvents += int64(events)
}

// redactAttributes removes the span's content attributes.
func (p *inferenceProcessor) redactAttributes(t *tally, span ptrace.Span) {
	if p.redactor == nil {
		return
	}
	t.contentAttrs += int64(p.redactor.Attributes(span.Attributes()))
}

// batchWork is what processing one batch accumulates and reuses.
type batchWork struct {
	counts  tally
	scratch request.Scratch // Normalize's, reused from span to span
	found   stepsFound      // normalize's, likewise
	// steps: 0 not asked yet, 1 the step window holds some engine's steps,
	// 2 it holds none (see hasSteps).
	steps uint8
	// enginePhases: the scope being walked holds phase spans its engine
	// wrote itself (see hasEnginePhases); set per scope.
	enginePhases bool
	// rs, ss: the resource and scope being walked, for held phase spans.
	rs ptrace.ResourceSpans
	ss ptrace.ScopeSpans
	// released: held spans the join let go early to make room.
	released []join.Released
}

// hasSteps reports whether the step window holds any engine's steps, asked
// once per batch (after addSteps): without the step hook every look-up of
// a request would find nothing, and a look-up (its key split, map probes
// and lock) costs more than the rest of the span's inter-token work. Steps
// that another batch adds meanwhile are seen by the next batch, as they
// would be had they come a moment later.
func (w *batchWork) hasSteps(p *inferenceProcessor) bool {
	if w.steps == 0 {
		w.steps = 2
		if p.steps.Stats().Instances > 0 {
			w.steps = 1
		}
	}
	return w.steps == 1
}

// tally is what a batch adds to the per-span self-metrics, added once at its
// end: a counter's Add looks up its series and offers an exemplar, which
// per span would cost more than most of what the processor does to one.
type tally struct {
	requests                    [request.KindVLLMCore + 1]int64 // by kind
	phaseSpans                  int64
	contentAttrs, contentEvents int64
}

func (t *tally) flush(ctx context.Context, p *inferenceProcessor) {
	for kind, n := range t.requests {
		if n > 0 {
			p.tel.ProcessorInferenceRequests.Add(ctx, n, p.providerOpts[request.Kind(kind)]...)
		}
	}
	if t.phaseSpans > 0 {
		p.tel.ProcessorInferencePhaseSpans.Add(ctx, t.phaseSpans)
	}
	if t.contentAttrs > 0 {
		p.tel.ProcessorInferenceContentRemoved.Add(ctx, t.contentAttrs, p.attrOpt...)
	}
	if t.contentEvents > 0 {
		p.tel.ProcessorInferenceContentRemoved.Add(ctx, t.contentEvents, p.eventOpt...)
	}
	*t = tally{}
}

// resourceInfo is what the processor reads from a resource: the same for
// all its spans, so read once per resource rather than once per span.
type resourceInfo struct {
	facts    request.Resource
	instance string // the engine instance's key in the step window; "" when engine_steps is off
	// For cost: the engine instance, and its GPUs when the resource says.
	costInstance string
	gpu          string
	gpuCount     int
}

func (p *inferenceProcessor) readResource(res pcommon.Resource) resourceInfo {
	ri := resourceInfo{facts: request.ReadResource(res, &p.settings)}
	if p.steps != nil {
		ri.instance = stepwindow.InstanceKey(res)
	}
	if p.pricer != nil {
		ri.readCostResource(res)
	}
	return ri
}

// normalize writes the canonical attributes on spans.At(k) and appends its
// phase spans to spans; left is how many original spans from k on may get
// phase spans too. What it returns is w's, valid until its next call.
func (p *inferenceProcessor) normalize(ctx context.Context, w *batchWork, kind request.Kind, spans ptrace.SpanSlice, k, left int, ri *resourceInfo, q request.Queue) (*request.Result, *stepsFound) {
	span := spans.At(k)
	t := &w.counts
	r := request.Normalize(kind, span, &ri.facts, &p.settings, q, &w.scratch)
	t.contentAttrs += int64(r.ContentRemoved)
	found := &w.found
	*found = stepsFound{}
	if r.Processed {
		return r, found
	}
	if p.steps != nil && r.Request {
		found.looked = true // nothing found, when the window is empty
		if w.hasSteps(p) {
			*found = p.interTokenLatency(span, ri.instance, r.RequestID)
		}
	}
	if r.Request {
		t.requests[kind]++
	}
	if len(r.Anomalies) > 0 {
		p.countAnomalies(ctx, span, r)
	}
	if p.phaseSpans {
		p.phases(ctx, w, kind, spans, k, left, r.Phases)
	}
	return r, found
}

// removeIndexes removes the spans at the given ascending indexes (the
// places of spans moved out by hold).
func removeIndexes(spans ptrace.SpanSlice, idx []int) {
	i, next := 0, 0
	spans.RemoveIf(func(ptrace.Span) bool {
		drop := next < len(idx) && idx[next] == i
		if drop {
			next++
		}
		i++
		return drop
	})
}

// removeEmpty drops scopes and resources left without spans by hold.
func removeEmpty(td ptrace.Traces) {
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
}
