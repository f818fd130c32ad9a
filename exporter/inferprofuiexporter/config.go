// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferprofuiexporter // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter"

import (
	"errors"
	"fmt"
	"net"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/confmap"

	"github.com/inferprof/inferprof/internal/confdur"
	"github.com/inferprof/inferprof/internal/confstrict"
	"github.com/inferprof/inferprof/internal/hostcheck"
)

const (
	defaultEndpoint = "127.0.0.1:18259"
	// The timeline's default budget holds about 380,000 records of a busy
	// engine's mix, mostly kernel spans: 4× the 95,318 a 16 MiB store holds
	// in `go test -run TestBudgetMatchesHeap -v
	// ./exporter/inferprofuiexporter/internal/timeline/` (README, "Timeline
	// memory").
	defaultTimelineMiB = 64
	defaultTimelineAge = 15 * time.Minute
	// A busy minute of the default store renders to about 5 MB; the whole
	// 64 MiB store to about 120 MB (issue #30).
	defaultTimelineResponseMiB = 32
)

// Config is the inferprof_ui exporter's configuration.
type Config struct {
	// ServerConfig is the listener: endpoint (default 127.0.0.1:18259),
	// tls, cors, auth, middlewares (request_guard in the shipped configs)
	// and timeouts.
	ServerConfig confighttp.ServerConfig `mapstructure:",squash"`

	// AllowedHosts are the names, besides loopback ones, a request may give
	// as its Host; any other is answered 403, which is what a DNS
	// rebinding page reaching 127.0.0.1 gets. Empty (the default):
	// requests that arrived on a loopback address must name loopback. "*"
	// turns the check off.
	AllowedHosts []string `mapstructure:"allowed_hosts"`

	// Timeline configures GET /timeline: the spans of the traces pipelines
	// this exporter is in and the NVML readings of its metrics pipeline,
	// kept within a memory budget.
	Timeline TimelineConfig `mapstructure:"timeline"`

	// Dashboard configures the page at GET /.
	Dashboard DashboardConfig `mapstructure:"dashboard"`

	_ struct{}
}

// TimelineConfig bounds the timeline.
type TimelineConfig struct {
	// Enabled keeps spans for GET /timeline; default true.
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
	// what a client receives, not the copy of the window a render holds
	// (at most the store's budget).
	MaxResponseMiB int64 `mapstructure:"max_response_mib"`

	_ struct{}
}

// DashboardConfig configures the dashboard. Its goodput targets are not
// set here: they are the inference_metrics connector's, read from the
// inferprof.server.goodput.target gauge it emits.
type DashboardConfig struct {
	// Enabled serves the dashboard at GET / and its data at GET
	// /dashboard.json; default true.
	Enabled bool `mapstructure:"enabled"`

	_ struct{}
}

var _ component.Config = (*Config)(nil)

var errGoodputMoved = errors.New("dashboard.goodput: the goodput targets are the inference_metrics connector's " +
	"(its goodput settings); the dashboard draws the ones it emits, so remove them here")

// Unmarshal decodes the configuration: a value that is not a duration is
// named along with its key (internal/confdur), and an unknown key is an
// error that names it.
func (cfg *Config) Unmarshal(conf *confmap.Conf) error {
	if conf.IsSet("dashboard::goodput") {
		return errGoodputMoved
	}
	if err := confdur.Unmarshal(conf, cfg); err != nil {
		return err
	}
	// confighttp.ServerConfig decodes leniently and, squashed, would let
	// any key of this config through (internal/confstrict).
	return confstrict.Check(conf, cfg)
}

func createDefaultConfig() component.Config {
	server := confighttp.NewDefaultServerConfig()
	server.NetAddr.Endpoint = defaultEndpoint
	return &Config{
		ServerConfig: server,
		Timeline:     TimelineConfig{Enabled: true, MemoryLimitMiB: defaultTimelineMiB, MaxAge: defaultTimelineAge, MaxResponseMiB: defaultTimelineResponseMiB},
		Dashboard:    DashboardConfig{Enabled: true},
	}
}

// Validate checks rules between fields; confighttp validates its own.
func (cfg *Config) Validate() error {
	var errs []error
	endpoint := cfg.ServerConfig.NetAddr.Endpoint
	if endpoint == "" {
		errs = append(errs, errors.New("endpoint: must be set; to serve no UI, leave inferprof_ui out of the pipelines"))
	} else if _, _, err := net.SplitHostPort(endpoint); err != nil {
		errs = append(errs, fmt.Errorf("endpoint: %w", err))
	}
	if !cfg.Timeline.Enabled && !cfg.Dashboard.Enabled {
		errs = append(errs, errors.New("timeline.enabled and dashboard.enabled are both false, so the exporter would serve nothing"))
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
	if _, err := hostcheck.New(cfg.AllowedHosts); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
