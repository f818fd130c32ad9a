// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector // import "github.com/inferprof/inferprof/connector/inferencemetricsconnector"

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatautil"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/aggregate"
	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/metadata"
	"github.com/inferprof/inferprof/internal/stepspan"
)

// metricsConnector is the connector's state. The files above drive it:
// traces.go aggregates spans into it, flush.go and marker.go take windows out.
type metricsConnector struct {
	id        component.ID
	logger    *zap.Logger
	cfg       *Config
	next      consumer.Metrics
	clock     clockwork.Clock
	telemetry *metadata.TelemetryBuilder
	steps     *stepspan.Reader
	series    atomic.Int64 // for the self-metric, read without the lock

	// Goodput targets in seconds; 0 means none.
	goodTTFT, goodTPOT, goodE2E float64

	mu    sync.Mutex // guards everything below
	store *aggregate.Store
	convs *conversations
	// turnOverflow counts conversations observed into the overflow series,
	// reported with the next batch's counts.
	turnOverflow int64
	step         stepspan.Step                         // the engine.step span being aggregated
	idCache      map[aggregate.ResourceKey]pcommon.Map // identity's results
	// windowSpans counts the request and step spans aggregated since the
	// last flush the next consumer took: what a crash now would lose.
	windowSpans uint64

	// The window marker (marker.go); nil without storage. Written by the
	// flush goroutine only.
	markerClient    storage.Client
	markerOpened    time.Time
	markerErrLogged time.Time
	markerSpans     atomic.Int64 // last written, for the self-metric

	cancel       context.CancelFunc
	wg           sync.WaitGroup
	shutdownOnce sync.Once
	overflowLog  *overflowLog
}

var _ connector.Traces = (*metricsConnector)(nil)

func newConnector(set connector.Settings, cfg *Config, next consumer.Metrics, clock clockwork.Clock) (*metricsConnector, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	steps, err := stepspan.NewReader(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	maxEx := 0
	if cfg.Exemplars.Enabled {
		maxEx = cfg.Exemplars.MaxPerDataPoint
	}
	c := &metricsConnector{
		id:          set.ID,
		logger:      set.Logger,
		cfg:         cfg,
		next:        next,
		clock:       clock,
		telemetry:   tb,
		steps:       steps,
		goodTTFT:    cfg.Goodput.TimeToFirstToken.Seconds(),
		goodTPOT:    cfg.Goodput.TimePerOutputToken.Seconds(),
		goodE2E:     cfg.Goodput.E2E.Seconds(),
		idCache:     map[aggregate.ResourceKey]pcommon.Map{},
		overflowLog: newOverflowLog(set.Logger, cfg),
		convs:       newConversations(cfg.Conversations.MaxConversations, cfg.Conversations.Idle),
		store: aggregate.NewStore(aggregate.Settings{
			Limit:               cfg.AggregationCardinalityLimit,
			MaxSeriesPerModel:   cfg.MaxSeriesPerModel,
			MaxSeriesPerService: cfg.MaxSeriesPerService,
			MaxExemplars:        maxEx,
			Delta:               cfg.AggregationTemporality == TemporalityDelta,
			Expiration:          cfg.MetricsExpiration,
			Disabled:            cfg.disabledMetrics(),
			ScopeName:           metadata.ScopeName,
			ScopeVersion:        set.BuildInfo.Version,
			GoodputTargets:      cfg.Goodput.targets(),
		}, pcommon.NewTimestampFromTime(clock.Now())),
	}
	err = tb.RegisterConnectorInferenceMetricsSeriesCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(c.series.Load())
		return nil
	})
	if err == nil {
		err = tb.RegisterConnectorInferenceMetricsWindowSpansCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(c.markerSpans.Load())
			return nil
		})
	}
	if err != nil {
		tb.Shutdown()
		return nil, err
	}
	return c, nil
}

// hashResource keys a resource by its attributes, independently of their
// order, as contrib's connectors do (pdatautil.MapHash).
func (*metricsConnector) hashResource(attrs pcommon.Map) aggregate.ResourceKey {
	return pdatautil.MapHash(attrs)
}
