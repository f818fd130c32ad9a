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

	"github.com/inferprof/inferprof/internal/loglimit"
	"github.com/inferprof/inferprof/internal/request"
	"github.com/inferprof/inferprof/internal/spanbatch"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/join"
	"github.com/inferprof/inferprof/processor/inferenceprocessor/internal/metadata"
)

type inferenceProcessor struct {
	logger     *zap.Logger
	next       consumer.Traces
	tel        *metadata.TelemetryBuilder
	settings   request.Settings
	phaseSpans bool
	join       *join.Table // nil when the SGLang join is off

	// warn rate-limits the warnings about anomalies and refusals.
	warn *loglimit.Limiter

	// for tests
	now  func() time.Time
	tick time.Duration

	// Precomputed metric options, so counting allocates nothing.
	// Slices, passed with ..., so a call does not build the variadic slice.
	providerOpts  map[request.Kind][]metric.AddOption
	anomalyOpts   map[string][]metric.AddOption // by reason
	phaseJoinOpts map[string][]metric.AddOption // by outcome

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
	p.tick = tickFor(cfg)
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

// tickFor is how often held spans are checked: a few times per wait, so a
// held span is late by a quarter of its wait at most, and at least once a
// second.
func tickFor(cfg *Config) time.Duration {
	tick := time.Second
	if w := cfg.SGLangJoin.Wait; w > 0 {
		tick = min(tick, max(w/4, time.Millisecond))
	}
	return tick
}

func (p *inferenceProcessor) start(context.Context, component.Host) error {
	if p.join == nil {
		return nil
	}
	// Background work gets its own context, not Start's.
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.every(ctx, p.tick, p.expire)
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

// batchWork is what processing one batch accumulates and reuses.
type batchWork struct {
	counts  tally
	scratch request.Scratch // Normalize's, reused from span to span
	// enginePhases: the scope being walked holds phase spans its engine
	// wrote itself (see hasEnginePhases); set per scope.
	enginePhases bool
	// rs, ss: the resource and scope being walked, for held phase spans.
	rs ptrace.ResourceSpans
	ss ptrace.ScopeSpans
	// released: held spans the join let go early to make room.
	released []join.Released
}

// tally is what a batch adds to the per-span self-metrics, added once at its
// end: a counter's Add looks up its series and offers an exemplar, which
// per span would cost more than most of what the processor does to one.
type tally struct {
	requests   [request.KindVLLMCore + 1]int64 // by kind
	phaseSpans int64
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
	*t = tally{}
}

// resourceInfo is what the processor reads from a resource: the same for
// all its spans, so read once per resource rather than once per span.
type resourceInfo struct {
	facts request.Resource
}

func (p *inferenceProcessor) readResource(res pcommon.Resource) resourceInfo {
	return resourceInfo{facts: request.ReadResource(res, &p.settings)}
}

// normalize writes the canonical attributes on spans.At(k) and appends its
// phase spans to spans; left is how many original spans from k on may get
// phase spans too. What it returns is w's, valid until its next call.
func (p *inferenceProcessor) normalize(ctx context.Context, w *batchWork, kind request.Kind, spans ptrace.SpanSlice, k, left int, ri *resourceInfo, q request.Queue) *request.Result {
	span := spans.At(k)
	t := &w.counts
	r := request.Normalize(kind, span, &ri.facts, &p.settings, q, &w.scratch)
	if r.Processed {
		return r
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
	return r
}
