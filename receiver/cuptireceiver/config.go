// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver // import "github.com/inferprof/inferprof/receiver/cuptireceiver"

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/inferprof/inferprof/internal/confdur"
	"github.com/inferprof/inferprof/internal/kernelclass"
	"github.com/inferprof/inferprof/internal/unixsock"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadata"
)

// DefaultEndpoint is where the injection library connects unless
// INFERPROF_CUPTI_ENDPOINT says otherwise (internal/unixsock holds it).
const DefaultEndpoint = unixsock.DefaultCUPTIEndpoint

// Config is the cupti receiver's YAML configuration.
type Config struct {
	// Endpoint is the Unix socket path the injection library connects to.
	// Default /tmp/inferprof/cupti.sock; its folder is created 0700 and the
	// socket 0600. Empty disables the socket (Kineto traces only).
	Endpoint string `mapstructure:"endpoint"`
	// Kineto reads PyTorch profiler trace files.
	Kineto KinetoConfig `mapstructure:"kineto"`
	// CollectionInterval is how often sums are flushed as delta metrics and
	// the Kineto folder is scanned. Default 10s; must be positive.
	CollectionInterval time.Duration `mapstructure:"collection_interval"`
	// TopKernels is how many kernels per device and interval keep their own
	// series; the rest are summed per category as gpu.kernel.name="other".
	// Default 30; 0 sums every kernel into its category.
	TopKernels int `mapstructure:"top_kernels"`
	// MaxConnections bounds concurrent engine connections. Default 256.
	MaxConnections int `mapstructure:"max_connections"`
	// IdleTimeout closes a connection that sends nothing for this long,
	// counted as otelcol_receiver_cupti_idle_connections: the library sends
	// its stats every second, so only a stuck or hostile client (one that
	// sent its hello, or nothing, and holds a place under max_connections)
	// stays silent. Default 30s; must be positive.
	IdleTimeout time.Duration `mapstructure:"idle_timeout"`
	// QuietAfter is how long an engine may keep launching kernels without
	// CUPTI completing a buffer before the stream counts as quiet (a warning
	// and otelcol_receiver_cupti_quiet_streams). Default 30s.
	QuietAfter time.Duration `mapstructure:"quiet_after"`
	// KernelCategories are extra rules tried before the built-in table.
	KernelCategories []CategoryRule `mapstructure:"kernel_categories"`
	// Spans emits sampled kernel executions as spans, for timelines, when
	// the receiver is also in a traces pipeline.
	Spans SpansConfig `mapstructure:"spans"`
	// StepStore names the step_store extension whose window ties kernels
	// to the engine steps that launched them. Unset: no correlation.
	StepStore *component.ID `mapstructure:"step_store"`

	metadata.MetricsBuilderConfig `mapstructure:",squash"`
	_                             struct{}
}

// KinetoConfig configures the trace-file reader.
type KinetoConfig struct {
	// Directory holds *.json and *.json.gz traces (for example vLLM's
	// VLLM_TORCH_PROFILER_DIR). Each file is read once, after its size and
	// modification time held still for one interval. Empty disables it.
	Directory string `mapstructure:"directory"`
	// Storage names a storage extension (for example file_storage) that
	// keeps which files were read, so a restart does not count them twice.
	// Without it, files already in the folder at start are read again.
	Storage *component.ID `mapstructure:"storage"`
	_       struct{}
}

// SpansConfig configures optional kernel spans.
type SpansConfig struct {
	// Enabled turns kernel spans on. Default false.
	Enabled bool `mapstructure:"enabled"`
	// SamplingRatio is the share of kernel executions kept, in (0, 1].
	// Default 0.001 (one in a thousand); every 1/ratio-th record is taken.
	SamplingRatio float64 `mapstructure:"sampling_ratio"`
	// MaxPerInterval caps spans per collection_interval. Default 1000.
	MaxPerInterval int `mapstructure:"max_per_interval"`
	_              struct{}
}

// CategoryRule maps kernel names matching Pattern (a Go regular expression,
// case-insensitive) to Category.
type CategoryRule struct {
	Category string `mapstructure:"category"`
	Pattern  string `mapstructure:"pattern"`
	_        struct{}
}

var _ component.Config = (*Config)(nil)

// Unmarshal decodes the configuration; a value that is not a duration is
// named in the error along with its key (internal/confdur).
func (c *Config) Unmarshal(conf *confmap.Conf) error { return confdur.Unmarshal(conf, c) }

func createDefaultConfig() component.Config {
	return &Config{
		Endpoint:             DefaultEndpoint,
		CollectionInterval:   10 * time.Second,
		TopKernels:           30,
		MaxConnections:       256,
		IdleTimeout:          30 * time.Second,
		QuietAfter:           30 * time.Second,
		Spans:                SpansConfig{SamplingRatio: 0.001, MaxPerInterval: 1000},
		MetricsBuilderConfig: metadata.DefaultMetricsBuilderConfig(),
	}
}

// minInterval is the shortest collection_interval taken.
const minInterval = 10 * time.Millisecond

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.Endpoint == "" && c.Kineto.Directory == "" {
		errs = append(errs, errors.New("endpoint and kineto.directory are both empty: nothing to receive"))
	}
	if c.Endpoint != "" && !filepath.IsAbs(c.Endpoint) {
		errs = append(errs, fmt.Errorf("endpoint %q: must be an absolute socket path", c.Endpoint))
	}
	if c.CollectionInterval <= 0 {
		errs = append(errs, fmt.Errorf("collection_interval %s: must be positive", c.CollectionInterval))
	}
	if c.TopKernels < 0 || c.TopKernels > 10000 {
		errs = append(errs, fmt.Errorf("top_kernels %d: must be between 0 and 10000", c.TopKernels))
	}
	if c.QuietAfter <= 0 {
		errs = append(errs, fmt.Errorf("quiet_after %s: must be positive", c.QuietAfter))
	}
	// A bare number is nanoseconds: a 15ns flush ticker keeps a core busy.
	// quiet_after is a threshold, not a ticker; tests set it to 1ns.
	errs = append(errs, confdur.Min("collection_interval", c.CollectionInterval, minInterval))
	if c.Kineto.Storage != nil && c.Kineto.Directory == "" {
		errs = append(errs, errors.New("kineto.storage is set but kineto.directory is empty"))
	}
	if c.MaxConnections <= 0 {
		errs = append(errs, fmt.Errorf("max_connections %d: must be positive", c.MaxConnections))
	}
	if c.IdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("idle_timeout %s: must be positive", c.IdleTimeout))
	}
	if c.Spans.Enabled && (c.Spans.SamplingRatio <= 0 || c.Spans.SamplingRatio > 1) {
		errs = append(errs, fmt.Errorf("spans.sampling_ratio %g: must be in (0, 1]", c.Spans.SamplingRatio))
	}
	if c.Spans.Enabled && (c.Spans.MaxPerInterval <= 0 || c.Spans.MaxPerInterval > 1_000_000) {
		errs = append(errs, fmt.Errorf("spans.max_per_interval %d: must be between 1 and 1000000", c.Spans.MaxPerInterval))
	}
	if _, err := kernelclass.New(c.rules()); err != nil {
		errs = append(errs, fmt.Errorf("kernel_categories: %w", err))
	}
	return errors.Join(errs...)
}

func (c *Config) rules() []kernelclass.Rule {
	out := make([]kernelclass.Rule, len(c.KernelCategories))
	for i, r := range c.KernelCategories {
		out[i] = kernelclass.Rule{Category: r.Category, Pattern: r.Pattern}
	}
	return out
}
