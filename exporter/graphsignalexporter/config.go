// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignalexporter // import "github.com/inferprof/inferprof/exporter/graphsignalexporter"

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"
	"github.com/inferprof/inferprof/internal/confdur"
	"github.com/inferprof/inferprof/internal/confstrict"
	"github.com/inferprof/inferprof/internal/hostcheck"
)

const (
	defaultEndpoint      = "https://api.graphsignal.com"
	defaultLocalEndpoint = "127.0.0.1:18259"
	// Graphsignal's own uploader uses a 10 s request timeout.
	defaultTimeout = 10 * time.Second
	// Graphsignal's client uploads once a second and never more than
	// 10000 signals at a time.
	defaultFlushTimeout = time.Second
	defaultMaxBatch     = 10000
	// The timeline's default budget holds about 380,000 records of a busy
	// engine's mix, mostly kernel spans: 4× the 95,318 a 16 MiB store holds
	// in `go test -run TestBudgetMatchesHeap -v
	// ./exporter/graphsignalexporter/internal/timeline/` (README, "Timeline
	// memory").
	defaultTimelineMiB = 64
	defaultTimelineAge = 15 * time.Minute
	// A busy minute of the default store renders to about 5 MB; the whole
	// 64 MiB store to about 120 MB (issue #30).
	defaultTimelineResponseMiB = 32
	// The inference_metrics connector's default goodput targets.
	defaultGoodputTTFT = 2 * time.Second
	defaultGoodputTPOT = 100 * time.Millisecond
)

// Config is the graphsignal exporter's configuration.
type Config struct {
	// ClientConfig is the upload client: endpoint (the base URL of
	// Graphsignal's API; default https://api.graphsignal.com; uploads go to
	// {endpoint}/api/v1/ingest, spans in traces mode to
	// {endpoint}/api/v1/signals/), tls, proxy_url, headers, timeout (per
	// upload attempt; default 10s) and compression (gzip, the only encoding
	// Graphsignal's ingest reads).
	ClientConfig confighttp.ClientConfig `mapstructure:",squash"`

	// APIKey is the Graphsignal API key, sent as X-API-Key. Empty (the
	// default) uploads nothing: the exporter then only serves signals on
	// the local listener.
	APIKey configopaque.String `mapstructure:"api_key"`

	// Tags are added to every signal. GRAPHSIGNAL_TAG_<KEY> environment
	// variables add more (key lower-cased); a key set here wins.
	Tags map[string]string `mapstructure:"tags"`

	// Names picks the metric, tag and log names uploaded and served:
	// graphsignal (the default) uses the names Graphsignal's own profiler
	// sends, so its GPU and CUDA views fill in; source keeps inferprof's
	// OpenTelemetry names.
	Names encode.Names `mapstructure:"names"`

	// Local is the listener serving GET /signals and GET /health; default
	// endpoint 127.0.0.1:18259. An empty endpoint disables it.
	Local confighttp.ServerConfig `mapstructure:"local"`
	// LocalAllowedHosts are the names, besides loopback ones, a request to
	// the local listener may give as its Host; any other is answered 403,
	// which is what a DNS rebinding page reaching 127.0.0.1 gets. Empty
	// (the default): requests that arrived on a loopback address must name
	// loopback. "*" turns the check off.
	LocalAllowedHosts []string `mapstructure:"local_allowed_hosts"`

	// Traces configures the opt-in traces mode.
	Traces TracesConfig `mapstructure:"traces"`

	// Timeline configures GET /timeline on the local listener: the spans
	// of a traces pipeline this exporter is in, and the NVML readings of
	// its metrics pipeline, kept within a memory budget.
	Timeline TimelineConfig `mapstructure:"timeline"`

	// Dashboard configures the page at GET / on the local listener.
	Dashboard DashboardConfig `mapstructure:"dashboard"`

	// QueueConfig is exporterhelper's sending_queue. Set storage to a
	// file_storage extension for a queue that survives restarts.
	QueueConfig configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`
	// RetryConfig is exporterhelper's retry_on_failure.
	RetryConfig configretry.BackOffConfig `mapstructure:"retry_on_failure"`

	_ struct{}
}

// TracesConfig configures the traces mode, which uploads spans to
// Graphsignal's older /api/v1/signals/ endpoint (v0 schema), the only one
// with spans.
type TracesConfig struct {
	// Enabled turns traces mode on; default false. When false, a traces
	// pipeline using this exporter fails to start.
	Enabled bool `mapstructure:"enabled"`

	_ struct{}
}

// TimelineConfig bounds the local timeline.
type TimelineConfig struct {
	// Enabled keeps spans for GET /timeline; default true. It needs the
	// local listener, and this exporter in a traces pipeline to get spans.
	Enabled bool `mapstructure:"enabled"`
	// MemoryLimitMiB is the estimated memory the kept records may use;
	// default 64. Past it the oldest are dropped.
	MemoryLimitMiB int64 `mapstructure:"memory_limit_mib"`
	// MaxAge drops records older than this; default 15m.
	MaxAge time.Duration `mapstructure:"max_age"`
	// MaxResponseMiB caps one GET /timeline response; past it the events
	// stop and the response says so (otherData.truncated and the
	// X-Inferprof-Timeline-Truncated trailer). Default 32; must be positive.
	// Responses are streamed and rendered one at a time, so this bounds
	// neither the copy of the window's records a render holds (at most the
	// store's budget) nor anything else: it bounds what a client receives.
	MaxResponseMiB int64 `mapstructure:"max_response_mib"`

	_ struct{}
}

// DashboardConfig configures the local dashboard.
type DashboardConfig struct {
	// Enabled serves the dashboard at GET /; default true. It needs the
	// local listener.
	Enabled bool `mapstructure:"enabled"`
	// Goodput holds the targets drawn on the latency charts and named
	// beside the goodput figure (which itself comes from the
	// inference_metrics connector's counters). Keep them equal to the
	// connector's goodput settings; defaults are the connector's.
	Goodput GoodputTargets `mapstructure:"goodput"`

	_ struct{}
}

// GoodputTargets are latency targets; 0 means none.
type GoodputTargets struct {
	TimeToFirstToken   time.Duration `mapstructure:"time_to_first_token"`
	TimePerOutputToken time.Duration `mapstructure:"time_per_output_token"`
	E2E                time.Duration `mapstructure:"e2e"`

	_ struct{}
}

var _ component.Config = (*Config)(nil)

// Unmarshal decodes the configuration; a value that is not a duration is
// named in the error along with its key (internal/confdur). An unknown key
// is an error that names it (internal/confstrict): the squashed
// confighttp.ClientConfig would otherwise switch that check off for the
// whole config.
func (cfg *Config) Unmarshal(conf *confmap.Conf) error {
	if err := confdur.Unmarshal(conf, cfg); err != nil {
		return err
	}
	return confstrict.Check(conf, cfg)
}

func createDefaultConfig() component.Config {
	queue := exporterhelper.NewDefaultQueueConfig()
	// The default queue carries exporterhelper's default batch settings;
	// turn batching on with our flush interval and size cap.
	batch := queue.Batch.GetOrInsertDefault()
	batch.FlushTimeout = defaultFlushTimeout
	batch.MaxSize = defaultMaxBatch
	client := confighttp.NewDefaultClientConfig()
	client.Endpoint = defaultEndpoint
	client.Timeout = defaultTimeout
	// Graphsignal's uploader gzips every body; its ingest expects it.
	client.Compression = configcompression.TypeGzip
	local := confighttp.NewDefaultServerConfig()
	local.NetAddr.Endpoint = defaultLocalEndpoint
	return &Config{
		ClientConfig: client,
		Names:        encode.NamesGraphsignal,
		Local:        local,
		QueueConfig:  configoptional.Some(queue),
		RetryConfig:  configretry.NewDefaultBackOffConfig(),
		Timeline:     TimelineConfig{Enabled: true, MemoryLimitMiB: defaultTimelineMiB, MaxAge: defaultTimelineAge, MaxResponseMiB: defaultTimelineResponseMiB},
		Dashboard: DashboardConfig{Enabled: true, Goodput: GoodputTargets{
			TimeToFirstToken: defaultGoodputTTFT, TimePerOutputToken: defaultGoodputTPOT,
		}},
	}
}

// Validate checks rules between fields; exporterhelper and confighttp
// validate their own.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.APIKey != "" || cfg.Traces.Enabled {
		endpoint := cfg.ClientConfig.Endpoint
		u, err := url.Parse(endpoint)
		switch {
		case endpoint == "":
			errs = append(errs, errors.New("endpoint: must be set when api_key is set"))
		case err != nil:
			errs = append(errs, fmt.Errorf("endpoint: %w", err))
		case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
			errs = append(errs, fmt.Errorf("endpoint: %q is not an http(s) URL", endpoint))
		}
		if cfg.ClientConfig.Compression != configcompression.TypeGzip {
			errs = append(errs, fmt.Errorf("compression: %q: Graphsignal's ingest reads gzip bodies only; leave compression at gzip",
				cfg.ClientConfig.Compression))
		}
	}
	if cfg.Traces.Enabled && cfg.APIKey == "" {
		errs = append(errs, errors.New("traces.enabled: needs api_key; spans are only uploaded, never served locally"))
	}
	local := cfg.Local.NetAddr.Endpoint
	if cfg.APIKey == "" && local == "" {
		errs = append(errs, errors.New("local.endpoint: empty with no api_key, so the exporter would do nothing"))
	}
	if local != "" {
		if _, _, err := net.SplitHostPort(local); err != nil {
			errs = append(errs, fmt.Errorf("local.endpoint: %w", err))
		}
	}
	if cfg.Timeline.Enabled {
		if cfg.Timeline.MemoryLimitMiB <= 0 {
			errs = append(errs, fmt.Errorf("timeline.memory_limit_mib: %d: must be positive", cfg.Timeline.MemoryLimitMiB))
		}
		if cfg.Timeline.MaxAge <= 0 {
			errs = append(errs, fmt.Errorf("timeline.max_age: %s: must be positive", cfg.Timeline.MaxAge))
		}
		if cfg.Timeline.MaxResponseMiB <= 0 {
			errs = append(errs, fmt.Errorf("timeline.max_response_mib: %d: must be positive", cfg.Timeline.MaxResponseMiB))
		}
		errs = append(errs, confdur.Min("timeline.max_age", cfg.Timeline.MaxAge, time.Second))
	}
	if g := cfg.Dashboard.Goodput; g.TimeToFirstToken < 0 || g.TimePerOutputToken < 0 || g.E2E < 0 {
		errs = append(errs, errors.New("dashboard.goodput: targets must not be negative"))
	}
	// A bare number is nanoseconds: no latency target is that short.
	errs = append(errs,
		confdur.Min("dashboard.goodput.time_to_first_token", cfg.Dashboard.Goodput.TimeToFirstToken, time.Millisecond),
		confdur.Min("dashboard.goodput.time_per_output_token", cfg.Dashboard.Goodput.TimePerOutputToken, time.Millisecond),
		confdur.Min("dashboard.goodput.e2e", cfg.Dashboard.Goodput.E2E, time.Millisecond))
	for k := range cfg.Tags {
		if k == "" {
			errs = append(errs, errors.New("tags: empty key"))
		}
	}
	if _, err := hostcheck.New(cfg.LocalAllowedHosts); err != nil {
		errs = append(errs, fmt.Errorf("local_%w", err))
	}
	return errors.Join(errs...)
}
