// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlreceiver // import "github.com/inferprof/inferprof/receiver/nvmlreceiver"

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/inferprof/inferprof/internal/confdur"
	"github.com/inferprof/inferprof/receiver/nvmlreceiver/internal/metadata"
)

// Config is the nvml receiver's YAML configuration.
type Config struct {
	// Scrape schedule: collection_interval (default 10s), initial_delay (1s) and timeout.
	// The logs pipeline polls device events on the same schedule.
	ControllerConfig scraperhelper.ControllerConfig `mapstructure:",squash"`
	// Which metrics and resource attributes to emit.
	MetricsBuilderConfig metadata.MetricsBuilderConfig `mapstructure:",squash"`

	// Devices selects GPUs with CUDA_VISIBLE_DEVICES syntax: a comma-separated list of NVML
	// indexes (PCI bus order) or GPU UUIDs ("GPU-8932f937", a unique prefix is enough).
	// Default "" means every GPU. Write `devices: ${env:CUDA_VISIBLE_DEVICES:-}` to follow the engine's variable.
	Devices string `mapstructure:"devices"`

	// InitRetryInterval is how often NVML initialisation is retried while no driver is found.
	// Default 1m; zero retries on every scrape.
	InitRetryInterval time.Duration `mapstructure:"init_retry_interval"`

	// Events configures critical device events (XID, double-bit ECC, ...).
	Events EventsConfig `mapstructure:"events"`

	// Processes configures per-process GPU memory and utilisation.
	Processes ProcessesConfig `mapstructure:"processes"`

	_ struct{}
}

// EventsConfig configures NVML event polling.
type EventsConfig struct {
	// Enabled registers an NVML event set on every selected device. Default true.
	Enabled bool `mapstructure:"enabled"`
	// MaxPending bounds the event log records held between two logs scrapes; beyond it records are
	// dropped and counted (the XID counter still counts them). Default 1000; zero is invalid.
	MaxPending int `mapstructure:"max_pending"`

	_ struct{}
}

// ProcessesConfig configures per-process metrics.
type ProcessesConfig struct {
	// ProcRoot is where /proc/<pid>/cgroup is read to find container.id. NVML reports host PIDs, so a
	// containerised collector needs the host's /proc mounted here (and hostPID on Kubernetes).
	// Default "/proc"; empty skips container.id.
	ProcRoot string `mapstructure:"proc_root"`

	_ struct{}
}

var _ component.Config = (*Config)(nil)

// Unmarshal decodes the configuration; a value that is not a duration is
// named in the error along with its key (internal/confdur).
func (cfg *Config) Unmarshal(conf *confmap.Conf) error { return confdur.Unmarshal(conf, cfg) }

// minInterval is the shortest collection_interval and init_retry_interval taken.
const minInterval = 10 * time.Millisecond

// Validate checks the configuration.
func (cfg *Config) Validate() error {
	var errs []error
	if _, err := parseDeviceFilter(cfg.Devices); err != nil {
		errs = append(errs, fmt.Errorf("devices: %w", err))
	}
	// A bare number is nanoseconds, far too often to scrape or retry.
	errs = append(errs,
		confdur.Min("collection_interval", cfg.ControllerConfig.CollectionInterval, minInterval),
		confdur.Min("init_retry_interval", cfg.InitRetryInterval, minInterval))
	if cfg.InitRetryInterval < 0 {
		errs = append(errs, errors.New("init_retry_interval must not be negative"))
	}
	if cfg.Events.MaxPending <= 0 {
		errs = append(errs, errors.New("events::max_pending must be positive"))
	}
	return errors.Join(errs...)
}

// deviceSelector is one entry of a CUDA_VISIBLE_DEVICES-style list: an index or a UUID (prefix).
type deviceSelector struct {
	index int    // -1 when uuid is set
	uuid  string // "GPU-..." or "MIG-..."
}

// parseDeviceFilter parses a CUDA_VISIBLE_DEVICES-style list. nil means every device.
func parseDeviceFilter(s string) ([]deviceSelector, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []deviceSelector
	for tok := range strings.SplitSeq(s, ",") {
		tok = strings.TrimSpace(tok)
		switch {
		case tok == "":
			return nil, fmt.Errorf("empty entry in %q", s)
		case strings.HasPrefix(tok, "GPU-") || strings.HasPrefix(tok, "MIG-"):
			if len(tok) == len("GPU-") {
				return nil, fmt.Errorf("UUID %q has no hex digits", tok)
			}
			out = append(out, deviceSelector{index: -1, uuid: tok})
		default:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 {
				return nil, fmt.Errorf("entry %q is neither a device index nor a GPU-/MIG- UUID", tok)
			}
			out = append(out, deviceSelector{index: i})
		}
	}
	return out, nil
}
