// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepspan // import "github.com/inferprof/inferprof/internal/stepspan"

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/internal/stepspan/internal/metadata"
)

// Reader is one component's reader of engine.step spans: Read, and a bad
// value counted in the component's otelcol_engine_step_bad_attributes and
// logged the first time. Safe for concurrent use.
type Reader struct {
	tb     *metadata.TelemetryBuilder
	logger *zap.Logger
	logged atomic.Bool
}

// NewReader returns a Reader reporting through set.
func NewReader(set component.TelemetrySettings) (*Reader, error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	return &Reader{tb: tb, logger: set.Logger}, nil
}

// Read is the package's Read, counting and logging what was bad. A nil
// Reader reads without counting (tests).
func (r *Reader) Read(ctx context.Context, span ptrace.Span, dst *Step, want Fields) bool {
	if !Read(span, dst, want) {
		return false
	}
	if dst.Bad > 0 && r != nil {
		r.tb.EngineStepBadAttributes.Add(ctx, int64(dst.Bad))
		if !r.logged.Swap(true) {
			// The key only: step attributes hold request ids, never to be
			// logged.
			r.logger.Warn("engine.step span attribute with a bad value read as absent; later ones are only counted (otelcol_engine_step_bad_attributes)",
				zap.String("attribute", dst.BadKey))
		}
	}
	return true
}

// Shutdown stops the Reader's telemetry; safe on nil.
func (r *Reader) Shutdown() {
	if r != nil {
		r.tb.Shutdown()
	}
}
