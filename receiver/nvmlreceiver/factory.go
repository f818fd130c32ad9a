// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlreceiver // import "github.com/inferprof/inferprof/receiver/nvmlreceiver"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/inferprof/inferprof/internal/sharedcomponent"
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

// sourceComponent is a gpuSource in the shape sharedcomponent holds.
type sourceComponent struct{ gpuSource }

func (s sourceComponent) Start(ctx context.Context, host component.Host) error {
	return s.start(ctx, host)
}

func (s sourceComponent) Shutdown(ctx context.Context) error { return s.shutdown(ctx) }

// sharedSource is one receiver's handle on its config's gpuSource: NVML is
// initialised by the first receiver's Start and shut down by the last one's
// Shutdown.
type sharedSource = *sharedcomponent.Component[sourceComponent]

var sources = sharedcomponent.NewMap[*Config, sourceComponent]()

func getSource(cfg *Config, set receiver.Settings) (sharedSource, error) {
	return sources.LoadOrStore(cfg, func() (sourceComponent, error) {
		src, err := newDefaultSource(cfg, set)
		return sourceComponent{src}, err
	})
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

func newMetricsReceiver(set receiver.Settings, cfg *Config, src sharedSource, next consumer.Metrics, opts ...scraperhelper.ControllerOption) (receiver.Metrics, error) {
	s, err := scraper.NewMetrics(src.Unwrap().scrapeMetrics, scraper.WithStart(src.Start), scraper.WithShutdown(src.Shutdown))
	if err != nil {
		return nil, err
	}
	opts = append(opts, scraperhelper.AddMetricsScraper(metadata.Type, s))
	return scraperhelper.NewMetricsController(&cfg.ControllerConfig, set, next, opts...)
}

func newLogsReceiver(set receiver.Settings, cfg *Config, src sharedSource, next consumer.Logs, opts ...scraperhelper.ControllerOption) (receiver.Logs, error) {
	src.Unwrap().wantLogs()
	f := scraper.NewFactory(metadata.Type, nil, scraper.WithLogs(
		func(context.Context, scraper.Settings, component.Config) (scraper.Logs, error) {
			return scraper.NewLogs(src.Unwrap().scrapeLogs, scraper.WithStart(src.Start), scraper.WithShutdown(src.Shutdown))
		}, metadata.LogsStability))
	opts = append(opts, scraperhelper.AddFactoryWithConfig(f, nil))
	return scraperhelper.NewLogsController(&cfg.ControllerConfig, set, next, opts...)
}
