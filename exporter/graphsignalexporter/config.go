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
	defaultEndpoint = "https://api.graphsignal.com"
	// 18259, the port the listener had before issue #28, is the
	// inferprof_ui exporter's: where users open the dashboard.
	defaultLocalEndpoint = "127.0.0.1:18260"
	// Graphsignal's own uploader uses a 10 s request timeout.
	defaultTimeout = 10 * time.Second
	// Graphsignal's client uploads once a second and never more than
	// 10000 signals at a time.
	defaultFlushTimeout = time.Second
	defaultMaxBatch     = 10000
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

	// Local is the listener serving GET /signals; default endpoint
	// 127.0.0.1:18260. An empty endpoint disables it. Health is
	// health_check's; the dashboard and the timeline inferprof_ui's.
	Local confighttp.ServerConfig `mapstructure:"local"`
	// LocalAllowedHosts are the names, besides loopback ones, a request to
	// the local listener may give as its Host; any other is answered 403,
	// which is what a DNS rebinding page reaching 127.0.0.1 gets. Empty
	// (the default): requests that arrived on a loopback address must name
	// loopback. "*" turns the check off.
	LocalAllowedHosts []string `mapstructure:"local_allowed_hosts"`

	// Traces configures the opt-in traces mode.
	Traces TracesConfig `mapstructure:"traces"`

	// Timeline and Dashboard are the keys of the local UI, which the
	// inferprof_ui exporter serves since issue #28; set here they are an
	// error that says so.
	Timeline  any `mapstructure:"timeline"`
	Dashboard any `mapstructure:"dashboard"`

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
	for _, moved := range []struct {
		key string
		v   any
	}{{"timeline", cfg.Timeline}, {"dashboard", cfg.Dashboard}} {
		if moved.v != nil {
			errs = append(errs, fmt.Errorf("%s: the dashboard and the timeline moved to the inferprof_ui exporter "+
				"(docs/dashboard.md): move this block there and add inferprof_ui to the traces and metrics pipelines", moved.key))
		}
	}
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
