// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver // import "github.com/inferprof/inferprof/receiver/cuptireceiver"

// The receiver's state and each connection's, and the small methods every
// file calls, apart from the code that drives them: the files above read
// these, and none of them reads back.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/kernelclass"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadata"
)

var errSourcesFull = errors.New("source table full")

type cuptiReceiver struct {
	set receiver.Settings
	cfg *Config
	// nextMetrics and nextTraces are set by the factory before Start.
	nextMetrics consumer.Metrics
	nextTraces  consumer.Traces
	started     bool
	corr        *correlation // the shared correlation window, from Start
	tb          *metadata.TelemetryBuilder
	agg         *aggregate.Aggregator
	badLog      *zap.Logger // sampled: a reconnecting bad client cannot flood the log
	now         func() time.Time
	host        component.Host
	ln          net.Listener
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	mu          sync.Mutex
	conns       map[net.Conn]struct{}
	stopping    bool
	files       map[string]fileState // Kineto files seen, by path
	store       storage.Client       // kineto.storage; nil without it
	lastRec     uint64               // aggregator record count at the last flush
	lastDrop    uint64
	lastGraphOv uint64 // aggregator graph signature overflow at the last flush
	libs        libraryStats
	shutOnce    sync.Once
}

func newReceiver(set receiver.Settings, cfg *Config) (*cuptiReceiver, error) {
	classes, err := kernelclass.New(cfg.rules())
	if err != nil {
		return nil, fmt.Errorf("kernel_categories: %w", err)
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	r := &cuptiReceiver{
		set:   set,
		cfg:   cfg,
		tb:    tb,
		now:   time.Now,
		conns: map[net.Conn]struct{}{},
		files: map[string]fileState{},
		badLog: set.Logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return zapcore.NewSamplerWithOptions(c, time.Second, 5, 0)
		})),
	}
	mb := metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set)
	r.agg = aggregate.New(classes, aggregate.DefaultLimits, cfg.TopKernels, mb, pcommon.NewTimestampFromTime(r.now()))
	return r, nil
}

// connHandler is one connection's state: its source and the map from its
// string ids to the aggregator's kernel series.
type connHandler struct {
	agg     *aggregate.Aggregator
	tb      *metadata.TelemetryBuilder
	ctx     context.Context
	src     aggregate.Source
	srcIdx  uint32
	held    bool             // srcIdx is held and must be released
	kernels []uint32         // string id → series index
	cache   *aggregate.Cache // also holds the connection's graph id → signature table
	stats   cuptiwire.Stats  // the library's counters as last reported, on any connection
	libs    *libraryStats
	lib     libraryKey

	graphResetWarned bool
	graphNamesNoted  bool

	log         *zap.Logger
	now         func() time.Time
	quietAfter  time.Duration
	live        cuptiwire.Liveness
	progress    time.Time // when CUPTI last completed a buffer to the library, by our clock
	quiet       bool
	clockWarned bool
	corr        connCorrelation
}

func (h *connHandler) cacheOf() *aggregate.Cache {
	if h.cache == nil {
		h.cache = aggregate.NewCache()
	}
	return h.cache
}

// fileState is a Kineto trace file as the last scan saw it; done once it was read.
type fileState struct {
	size  int64
	mtime time.Time
	done  bool
}
