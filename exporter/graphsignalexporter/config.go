package graphsignalexporter // import "github.com/inferprof/inferprof/exporter/graphsignalexporter"

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
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
)

// Config is the graphsignal exporter's configuration.
type Config struct {
	// APIKey is the Graphsignal API key. Empty (the default) uploads nothing:
	// the exporter then only serves signals on LocalEndpoint.
	APIKey configopaque.String `mapstructure:"api_key"`

	// Endpoint is the base URL of Graphsignal's API; default
	// https://api.graphsignal.com. Uploads go to {endpoint}/api/v1/ingest,
	// spans (traces mode) to {endpoint}/api/v1/signals/.
	Endpoint string `mapstructure:"endpoint"`

	// Tags are added to every signal. GRAPHSIGNAL_TAG_<KEY> environment
	// variables add more (key lower-cased); a key set here wins.
	Tags map[string]string `mapstructure:"tags"`

	// LocalEndpoint is the host:port serving GET /signals and GET /health;
	// default 127.0.0.1:18259. Empty disables it.
	LocalEndpoint string `mapstructure:"local_endpoint"`

	// Traces configures the opt-in traces mode.
	Traces TracesConfig `mapstructure:"traces"`

	// TimeoutConfig bounds each upload attempt; default 10s.
	TimeoutConfig exporterhelper.TimeoutConfig `mapstructure:",squash"`
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

func createDefaultConfig() component.Config {
	queue := exporterhelper.NewDefaultQueueConfig()
	batch := exporterhelper.NewDefaultBatchConfig()
	batch.FlushTimeout = defaultFlushTimeout
	batch.MaxSize = defaultMaxBatch
	queue.Batch = configoptional.Some(batch)
	timeout := exporterhelper.NewDefaultTimeoutConfig()
	timeout.Timeout = defaultTimeout
	return &Config{
		Endpoint:      defaultEndpoint,
		LocalEndpoint: defaultLocalEndpoint,
		TimeoutConfig: timeout,
		QueueConfig:   configoptional.Some(queue),
		RetryConfig:   configretry.NewDefaultBackOffConfig(),
	}
}

// Validate checks rules between fields; exporterhelper validates its own.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.APIKey != "" || cfg.Traces.Enabled {
		u, err := url.Parse(cfg.Endpoint)
		switch {
		case cfg.Endpoint == "":
			errs = append(errs, errors.New("endpoint: must be set when api_key is set"))
		case err != nil:
			errs = append(errs, fmt.Errorf("endpoint: %w", err))
		case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
			errs = append(errs, fmt.Errorf("endpoint: %q is not an http(s) URL", cfg.Endpoint))
		}
	}
	if cfg.Traces.Enabled && cfg.APIKey == "" {
		errs = append(errs, errors.New("traces.enabled: needs api_key; spans are only uploaded, never served locally"))
	}
	if cfg.APIKey == "" && cfg.LocalEndpoint == "" {
		errs = append(errs, errors.New("local_endpoint: empty with no api_key, so the exporter would do nothing"))
	}
	if cfg.LocalEndpoint != "" {
		if _, _, err := net.SplitHostPort(cfg.LocalEndpoint); err != nil {
			errs = append(errs, fmt.Errorf("local_endpoint: %w", err))
		}
	}
	for k := range cfg.Tags {
		if k == "" {
			errs = append(errs, errors.New("tags: empty key"))
		}
	}
	return errors.Join(errs...)
}
