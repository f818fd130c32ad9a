// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package enginestepreceiver // import "github.com/inferprof/inferprof/receiver/enginestepreceiver"

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/inferprof/inferprof/internal/bindhint"
	"github.com/inferprof/inferprof/internal/loglimit"
	"github.com/inferprof/inferprof/internal/stepstore"
	"github.com/inferprof/inferprof/internal/stepwire"
	"github.com/inferprof/inferprof/receiver/enginestepreceiver/internal/metadata"
)

// badLogInterval rate-limits the warnings about undecodable datagrams
// and refused or faulty rings.
const badLogInterval = 10 * time.Second

func newReceiver(set receiver.Settings, cfg *Config, next consumer.Traces) (*engineStepReceiver, error) {
	obs, err := receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{
		ReceiverID:             set.ID,
		Transport:              transport,
		ReceiverCreateSettings: set,
	})
	if err != nil {
		return nil, err
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &engineStepReceiver{
		set: set, cfg: cfg, next: next, obs: obs, tb: tb,
		rings:   newRings(),
		dec:     stepwire.NewDecoder(),
		conv:    newConverter(set.BuildInfo.Version),
		sources: map[sourceKey]*source{},
		warn:    loglimit.New(badLogInterval),
		now:     time.Now,
	}, nil
}

// Start opens the socket and starts reading; it returns at once.
func (r *engineStepReceiver) Start(_ context.Context, host component.Host) error {
	r.host = host
	// Workers' launch marks go to the step_store the config names, if any.
	win, err := stepstore.Lookup(host, r.cfg.StepStore, "step_store")
	if err != nil {
		return err
	}
	fd, err := listen(r.cfg.Endpoint)
	if err != nil {
		return bindhint.Wrap(err, "endpoint", "INFERPROF_STEP_ENDPOINT")
	}
	if r.cfg.ReadBufferSize > 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, r.cfg.ReadBufferSize); err != nil {
			r.set.Logger.Warn("could not set the socket receive buffer", zap.Error(err))
		}
	}
	// Closing the pipe's write end wakes a read loop waiting in poll(2).
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		_ = unix.Close(fd)
		_ = os.Remove(r.cfg.Endpoint)
		return fmt.Errorf("engine_step: stop pipe: %w", err)
	}
	r.stop = pipe[1]
	r.win = win
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Go(func() {
		defer func() {
			_ = unix.Close(fd)
			_ = unix.Close(pipe[0])
			r.tb.ReceiverEngineStepRings.Add(context.Background(), -int64(len(r.rings.byID)))
			r.rings.closeAll()
		}()
		r.readLoop(ctx, fd, pipe[0])
	})
	r.set.Logger.Info("engine_step receiver started", zap.String("endpoint", r.cfg.Endpoint),
		zap.Duration("poll_interval", r.cfg.PollInterval))
	return nil
}

// Shutdown stops reading and removes the socket file; safe without Start
// and when called twice.
func (r *engineStepReceiver) Shutdown(ctx context.Context) error {
	var err error
	r.once.Do(func() {
		started := r.cancel != nil
		if started {
			r.cancel()
			_ = unix.Close(r.stop)
			_ = os.Remove(r.cfg.Endpoint)
		}
		done := make(chan struct{})
		go func() { r.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
		}
		r.tb.Shutdown()
		if started {
			r.set.Logger.Info("engine_step receiver stopped")
		}
	})
	return err
}
