// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepfiguresprocessor // import "github.com/inferprof/inferprof/processor/stepfiguresprocessor"

// The processor's state and the GPU join's, apart from the code that uses
// them: every file of the package reads these, and none of them reads back.

import (
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/internal/gpuwindow"
	"github.com/inferprof/inferprof/internal/loglimit"
	"github.com/inferprof/inferprof/internal/stepspan"
	"github.com/inferprof/inferprof/internal/stepwindow"
	"github.com/inferprof/inferprof/internal/ticker"
	"github.com/inferprof/inferprof/processor/stepfiguresprocessor/internal/metadata"
)

// warnEvery is how often the refused-release warning repeats: the first is
// logged, then one per interval saying how many were held back.
const warnEvery = time.Minute

type stepFiguresProcessor struct {
	logger  *zap.Logger
	warn    *loglimit.Limiter
	next    consumer.Traces
	tel     *metadata.TelemetryBuilder
	steps   *stepwindow.Window // nil when engine_steps is off
	maxGaps int                // engine_steps.max_itl_gaps
	gpu     *gpuJoin           // nil when gpu is off (gpu.go)
	// stepReader reads engine.step spans for the steps and the GPU join.
	stepReader *stepspan.Reader

	// for tests
	now func() time.Time

	loop     ticker.Loop // the GPU join's releases
	stopOnce sync.Once
}

// gpuJoin holds engine.step spans until the kernels they launched are in,
// and request spans until their steps are. The kernels come from the cupti
// receiver through the window of the step_store extension gpu.step_store
// names.
type gpuJoin struct {
	win     *gpuwindow.Window
	store   *component.ID // gpu.step_store
	wait    time.Duration
	maxHeld int
	tick    time.Duration // how often held spans are checked; tests tick by hand

	mu       sync.Mutex
	steps    int // held step spans: their Ref is in the window
	requests []*heldRequest
	results  []gpuwindow.Result

	outcomes map[string][]metric.AddOption
}

// heldStep is a step span waiting for its kernels.
type heldStep struct {
	td     ptrace.Traces // the span alone, with its resource and scope
	ref    stepwindow.Ref
	hasRef bool
}

// heldRequest is a request span waiting for its steps' figures.
type heldRequest struct {
	td           ptrace.Traces
	instance, id string
	arrival      time.Time
	finish       time.Time
	deadline     time.Time
}
