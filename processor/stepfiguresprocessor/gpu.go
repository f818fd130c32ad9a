// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepfiguresprocessor // import "github.com/inferprof/inferprof/processor/stepfiguresprocessor"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/internal/gpuwindow"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/spanbatch"
	"github.com/inferprof/inferprof/internal/stepspan"
	"github.com/inferprof/inferprof/internal/stepstore"
	"github.com/inferprof/inferprof/internal/stepwindow"
	"github.com/inferprof/inferprof/internal/stepwire"
)

// gpuTick is how often held spans are checked: a step whose kernel records
// are all in passes within a tick of gpuwindow's Quiet.
const gpuTick = 100 * time.Millisecond

func newGPUJoin(cfg GPUConfig) *gpuJoin {
	return &gpuJoin{wait: cfg.Wait, maxHeld: cfg.MaxHeld, store: cfg.StepStore, tick: gpuTick, outcomes: map[string][]metric.AddOption{}}
}

func (g *gpuJoin) outcome(o string) []metric.AddOption {
	if o == "" {
		o = "ok"
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	opts, ok := g.outcomes[o]
	if !ok {
		opts = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", o)))}
		g.outcomes[o] = opts
	}
	return opts
}

func (g *gpuJoin) held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.steps + len(g.requests)
}

// engineKey names the engine process of a step span: the hook's host and
// pid, and the instance id inferprof-run gave the engine.
func engineKey(res pcommon.Resource) gpuwindow.EngineKey {
	a := res.Attributes()
	var k gpuwindow.EngineKey
	if v, ok := a.Get(names.ResourceHostName); ok {
		k.Host = v.Str()
	}
	if v, ok := a.Get(names.ResourceProcessPID); ok {
		k.PID = uint32(v.Int())
	}
	if v, ok := a.Get(names.ResourceServiceInstance); ok {
		k.Instance = v.Str()
	}
	// Without an instance id from the engine's environment the engine_step
	// receiver names the engine process instead; the CUPTI library then has
	// none either, and host and pid alone match.
	idx := uint32(0)
	if v, ok := a.Get(names.ResourceEngineIndex); ok {
		idx = uint32(v.Int())
	}
	if k.Instance == stepwire.FallbackInstanceID(k.Host, k.PID, idx) {
		k.Instance = ""
	}
	return k
}

// hasStepGPU reports whether a step span carries its figures already (steps
// the cupti receiver made from Kineto traces do).
func hasStepGPU(a pcommon.Map) bool {
	if _, ok := a.Get(names.AttrStepGPUKernelTime); ok {
		return true
	}
	_, ok := a.Get(names.AttrStepGPUMissing)
	return ok
}

// holdStep registers an engine.step span with the window. It returns true
// when the span was moved out of the batch to wait for its kernels; else the
// span says why it has no figures and passes on now.
func (p *stepFiguresProcessor) holdStep(ctx context.Context, rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span, st *stepspan.Step, ref stepwindow.Ref, hasRef bool) bool {
	g := p.gpu
	if g.win == nil || hasStepGPU(span.Attributes()) {
		return false // not started, or figures made elsewhere (Kineto)
	}
	why := gpuwindow.MissingEvicted
	ok := false
	hs := &heldStep{ref: ref, hasRef: hasRef}
	if g.held() < g.maxHeld {
		info := gpuwindow.StepInfo{
			Engine:      engineKey(rs.Resource()),
			LaunchStart: int64(span.StartTimestamp()),
			LaunchEnd:   int64(span.EndTimestamp()),
			Deadline:    p.now().Add(g.wait),
			Ref:         hs,
			Owner:       g,
			Link:        gpuwindow.Link{TraceID: span.TraceID(), SpanID: span.SpanID()},
		}
		info.FromStep(st)
		// Registered under the join's lock, so a tick never finalizes a
		// step whose span is not held yet.
		g.mu.Lock()
		ok, why = g.win.AddStep(info)
		if ok {
			hs.td = spanbatch.Take(rs, ss, span)()
			g.steps++
		}
		g.mu.Unlock()
	}
	if ok {
		if hasRef {
			p.steps.SetGPUPending(ref)
		}
		return true
	}
	gpuwindow.Result{Missing: why}.WriteAttributes(span.Attributes())
	if hasRef {
		p.steps.SetGPU(ref, &stepwindow.GPU{Missing: string(why)})
	}
	p.tel.ProcessorStepFiguresGpuSteps.Add(ctx, 1, g.outcome(string(why))...)
	return false
}

// requestGPU writes a request's GPU figures, or holds the span while some of
// its steps are still gathering theirs. It returns true when it held it.
// instance and id are the span's as interTokenLatency got them; found is
// what its look-up found, which saves a second look-up.
func (p *stepFiguresProcessor) requestGPU(ctx context.Context, rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span,
	instance, id string, found *stepsFound,
) bool {
	g := p.gpu
	rg := found.gpu
	if !rg.Known() {
		return false
	}
	if rg.Pending > 0 {
		g.mu.Lock()
		if g.steps+len(g.requests) < g.maxHeld {
			h := &heldRequest{
				instance: instance, id: id, arrival: span.StartTimestamp().AsTime(), finish: span.EndTimestamp().AsTime(),
				deadline: p.now().Add(g.wait), td: spanbatch.Take(rs, ss, span)(),
			}
			g.requests = append(g.requests, h)
			g.mu.Unlock()
			return true
		}
		g.mu.Unlock()
	}
	p.tel.ProcessorStepFiguresGpuRequests.Add(ctx, 1, g.outcome(writeRequestGPU(span.Attributes(), &rg))...)
	return false
}

// tickGPU passes on the step spans whose kernels are in, then the request
// spans whose steps all have their figures (or whose wait is over).
func (p *stepFiguresProcessor) tickGPU(ctx context.Context, now time.Time) {
	g := p.gpu
	out := ptrace.NewTraces()
	g.mu.Lock()
	g.results = g.win.Collect(now, g, g.results[:0])
	g.steps -= len(g.results)
	results := g.results
	g.mu.Unlock()
	for _, r := range results {
		hs, ok := r.Ref.(*heldStep)
		if !ok {
			continue
		}
		r.WriteAttributes(spanbatch.Only(hs.td).Attributes())
		if hs.hasRef {
			p.steps.SetGPU(hs.ref, stepGPU(r))
		}
		p.tel.ProcessorStepFiguresGpuSteps.Add(ctx, 1, g.outcome(string(r.Missing))...)
		hs.td.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
	}
	clear(g.results)

	g.mu.Lock()
	reqs := g.requests
	g.requests = nil
	g.mu.Unlock()
	var keep []*heldRequest
	for _, h := range reqs {
		rg := p.steps.LookupGPU(h.instance, h.id, h.arrival, h.finish)
		if rg.Pending > 0 && now.Before(h.deadline) {
			keep = append(keep, h)
			continue
		}
		span := spanbatch.Only(h.td)
		p.tel.ProcessorStepFiguresGpuRequests.Add(ctx, 1, g.outcome(writeRequestGPU(span.Attributes(), &rg))...)
		h.td.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
	}
	g.mu.Lock()
	g.requests = append(keep, g.requests...)
	g.mu.Unlock()
	p.sendHeld(ctx, out)
}

// sendHeld passes released spans on in a batch of their own: they belong
// to earlier batches, whose senders were answered when they were held. A
// refusal is counted and logged, as groupbytrace does; the exporters'
// sending queues are where retries belong.
func (p *stepFiguresProcessor) sendHeld(ctx context.Context, td ptrace.Traces) {
	if td.ResourceSpans().Len() == 0 {
		return
	}
	if err := p.next.ConsumeTraces(ctx, td); err != nil {
		p.tel.ProcessorStepFiguresReleaseFailures.Add(ctx, int64(td.SpanCount()))
		if suppressed, ok := p.warn.Allow("release_refused", p.now()); ok {
			p.logger.Warn("Next consumer refused spans held for their GPU figures; they are lost (otelcol_processor_step_figures_release_failures)",
				zap.Int("spans", td.SpanCount()), zap.Int("similar_suppressed", suppressed), zap.Error(err))
		}
	}
}

// startStore finds the window of gpu.step_store. Without one no CUPTI
// stream can reach the steps, so they get a window no one feeds and pass
// marked no_source, as they would with a store and no cupti receiver.
func (g *gpuJoin) startStore(host component.Host, logger *zap.Logger) error {
	win, err := stepstore.Lookup(host, g.store, "gpu.step_store")
	if err != nil {
		return err
	}
	if win == nil {
		logger.Info("gpu.step_store is not set: engine steps pass with inferprof.step.gpu.missing=no_source")
		win = gpuwindow.New(gpuwindow.Config{MaxEngines: 1})
	}
	g.win = win
	return nil
}

// drainGPU releases everything held, as it stands, at shutdown.
func (p *stepFiguresProcessor) drainGPU(ctx context.Context) {
	g := p.gpu
	p.tickGPU(ctx, time.Unix(1<<40, 0)) // every deadline is past
	if n := g.held(); n > 0 {
		p.logger.Warn("spans still held for GPU figures at shutdown", zap.Int("spans", n))
	}
}

// stepGPU is what the step window keeps of a step's figures.
func stepGPU(r gpuwindow.Result) *stepwindow.GPU {
	f := r.Figures
	sg := &stepwindow.GPU{Missing: string(r.Missing), Known: f.KernelCount > 0, KernelNS: f.KernelNS, IdleNS: f.IdleNS}
	for _, c := range f.Categories {
		sg.Categories = append(sg.Categories, stepwindow.GPUCategory{Category: c.Category, NS: c.NS})
	}
	return sg
}

func seconds(ns uint64) float64 { return float64(ns) / 1e9 }

// writeRequestGPU writes a request's figures and returns the outcome: ""
// when every step had whole figures, else the reason.
func writeRequestGPU(a pcommon.Map, g *stepwindow.RequestGPU) string {
	why := ""
	switch {
	case g.Pending > 0:
		why = string(gpuwindow.MissingIncomplete)
	case g.Missing > 0:
		why = g.MissingReason
	}
	if why != "" {
		a.PutStr(names.AttrGPUMissing, why)
	}
	if g.Steps == 0 && g.TimeNS == 0 && g.CPUOverheadNS == 0 {
		return why
	}
	a.PutDouble(names.AttrGPUTime, g.TimeNS/1e9)
	a.PutDouble(names.AttrCPUOverhead, seconds(g.CPUOverheadNS))
	g.SortCategories()
	cats := a.PutEmptySlice(names.AttrGPUCategories)
	times := a.PutEmptySlice(names.AttrGPUCategoryTimes)
	for _, c := range g.Categories {
		cats.AppendEmpty().SetStr(c.Category)
		times.AppendEmpty().SetDouble(c.NS / 1e9)
	}
	return why
}
