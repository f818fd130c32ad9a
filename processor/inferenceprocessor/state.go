// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor // import "github.com/inferprof/inferprof/processor/inferenceprocessor"

// The processor's state and what one batch accumulates, apart from the code
// that uses them: every file of the package reads these, and none of them
// reads back.

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/internal/loglimit"
	"github.com/inferprof/inferprof/internal/request"
	"github.com/inferprof/inferprof/internal/ticker"
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

	loop     ticker.Loop // the join's releases
	stopOnce sync.Once
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
