// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlreceiver // import "github.com/inferprof/inferprof/receiver/nvmlreceiver"

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/inferprof/inferprof/receiver/nvmlreceiver/internal/metadata"
)

const (
	defaultCollectionInterval = 10 * time.Second
	defaultInitRetryInterval  = time.Minute
	defaultMaxPending         = 1000
)

// NewFactory returns the nvml receiver factory.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(
		metadata.Type,
		createDefaultConfig,
		receiver.WithMetrics(createMetrics, metadata.MetricsStability),
		receiver.WithLogs(createLogs, metadata.LogsStability),
	)
}

func createDefaultConfig() component.Config {
	cc := scraperhelper.NewDefaultControllerConfig()
	cc.CollectionInterval = defaultCollectionInterval
	return &Config{
		ControllerConfig:     cc,
		MetricsBuilderConfig: metadata.NewDefaultMetricsBuilderConfig(),
		InitRetryInterval:    defaultInitRetryInterval,
		Events:               EventsConfig{Enabled: true, MaxPending: defaultMaxPending},
		Processes:            ProcessesConfig{ProcRoot: "/proc"},
	}
}

// gpuSource is the state both signals read: one NVML session per receiver config, so the
// metrics and logs pipelines share devices, the event set and the XID counters.
type gpuSource interface {
	start(ctx context.Context, host component.Host) error
	shutdown(ctx context.Context) error
	scrapeMetrics(ctx context.Context) (pmetric.Metrics, error)
	scrapeLogs(ctx context.Context) (plog.Logs, error)
	// wantLogs tells the source that a logs pipeline drains event records.
	wantLogs()
}

// sharedSource reference-counts a gpuSource between the metrics and logs receivers of one config.
type sharedSource struct {
	src  gpuSource
	cfg  *Config
	mu   sync.Mutex
	refs int
}

var (
	sourcesMu sync.Mutex
	sources   = map[*Config]*sharedSource{}
)

func getSource(cfg *Config, set receiver.Settings) (*sharedSource, error) {
	sourcesMu.Lock()
	defer sourcesMu.Unlock()
	if s, ok := sources[cfg]; ok {
		return s, nil
	}
	src, err := newDefaultSource(cfg, set)
	if err != nil {
		return nil, err
	}
	s := &sharedSource{src: src, cfg: cfg}
	sources[cfg] = s
	return s, nil
}

func (s *sharedSource) start(ctx context.Context, host component.Host) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs++
	if s.refs > 1 {
		return nil
	}
	return s.src.start(ctx, host)
}

func (s *sharedSource) shutdown(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs == 0 { // shutdown without start
		return nil
	}
	s.refs--
	if s.refs > 0 {
		return nil
	}
	sourcesMu.Lock()
	delete(sources, s.cfg)
	sourcesMu.Unlock()
	return s.src.shutdown(ctx)
}

func createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	c := cfg.(*Config)
	src, err := getSource(c, set)
	if err != nil {
		return nil, err
	}
	return newMetricsReceiver(set, c, src, next)
}

func createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	c := cfg.(*Config)
	src, err := getSource(c, set)
	if err != nil {
		return nil, err
	}
	return newLogsReceiver(set, c, src, next)
}

func newMetricsReceiver(set receiver.Settings, cfg *Config, src *sharedSource, next consumer.Metrics, opts ...scraperhelper.ControllerOption) (receiver.Metrics, error) {
	s, err := scraper.NewMetrics(src.src.scrapeMetrics, scraper.WithStart(src.start), scraper.WithShutdown(src.shutdown))
	if err != nil {
		return nil, err
	}
	opts = append(opts, scraperhelper.AddMetricsScraper(metadata.Type, s))
	return scraperhelper.NewMetricsController(&cfg.ControllerConfig, set, next, opts...)
}

func newLogsReceiver(set receiver.Settings, cfg *Config, src *sharedSource, next consumer.Logs, opts ...scraperhelper.ControllerOption) (receiver.Logs, error) {
	src.src.wantLogs()
	f := scraper.NewFactory(metadata.Type, nil, scraper.WithLogs(
		func(context.Context, scraper.Settings, component.Config) (scraper.Logs, error) {
			return scraper.NewLogs(src.src.scrapeLogs, scraper.WithStart(src.start), scraper.WithShutdown(src.shutdown))
		}, metadata.LogsStability))
	opts = append(opts, scraperhelper.AddFactoryWithConfig(f, nil))
	return scraperhelper.NewLogsController(&cfg.ControllerConfig, set, next, opts...)
}
