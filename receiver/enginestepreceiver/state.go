// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package enginestepreceiver // import "github.com/inferprof/inferprof/receiver/enginestepreceiver"

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"

	"github.com/inferprof/inferprof/internal/gpuwindow"
	"github.com/inferprof/inferprof/internal/loglimit"
	"github.com/inferprof/inferprof/internal/stepwire"
	"github.com/inferprof/inferprof/receiver/enginestepreceiver/internal/metadata"
)

// engineStepReceiver is the receiver's state, in a file of its own below
// the lifecycle, the read loop and the handlers, which all use it.
type engineStepReceiver struct {
	set  receiver.Settings
	cfg  *Config
	next consumer.Traces
	obs  *receiverhelper.ObsReport
	tb   *metadata.TelemetryBuilder
	host component.Host
	fd   int // the bound socket, -1 before Start; owned by the read loop once it runs
	stop int // write end of the pipe that wakes the read loop for Shutdown
	// waiting is true while the read loop waits on the socket (for tests).
	waiting atomic.Bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once

	// Owned by the read loop.
	rings  *rings
	dec    *stepwire.Decoder
	resets uint64 // dec.Resets() already counted
	step   stepwire.Step
	mark   stepwire.Mark
	// win takes the launch marks of executor workers (the collector's one
	// correlation window, docs/architecture.md); nil before Start.
	win     *gpuwindow.Window
	conv    converter
	sources map[sourceKey]*source
	tick    uint64 // orders sources by when they were last heard
	warn    *loglimit.Limiter
	now     func() time.Time
}

// source is what the receiver remembers of one hook process: its running
// counts, to turn them into deltas.
type source struct {
	dropped, evicted uint32
	heard            uint64
}

type sourceKey struct {
	host  string
	pid   uint32
	index uint32
}
