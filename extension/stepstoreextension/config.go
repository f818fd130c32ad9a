// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepstoreextension // import "github.com/inferprof/inferprof/extension/stepstoreextension"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/inferprof/inferprof/internal/confdur"
	"github.com/inferprof/inferprof/internal/gpuwindow"
)

// Config bounds the store. The defaults are gpuwindow.NewDefaultConfig's.
type Config struct {
	// Quiet is how long a step whose launches all have their kernel records
	// waits for more (the other nodes of a CUDA graph) before it is final.
	// Default 50ms. Must be positive.
	Quiet time.Duration `mapstructure:"quiet"`
	// MaxSteps caps the steps waiting to be finalized, all engines; past it
	// the oldest is finalized early with what it has. Default 65536.
	MaxSteps int `mapstructure:"max_steps"`
	// MaxPendingLaunches caps, per CUPTI source, the launches held until
	// the step that made them arrives (24 bytes each). Default 262144.
	MaxPendingLaunches int `mapstructure:"max_pending_launches"`
	// MaxPendingKernels caps, per CUPTI source, the kernel records held
	// until their launch is placed (48 bytes each). Default 262144.
	MaxPendingKernels int `mapstructure:"max_pending_kernels"`
	// MaxRuns caps, per source, the correlation-id ranges remembered (24
	// bytes each). Default 65536.
	MaxRuns int `mapstructure:"max_runs"`
	// MaxSources caps the CUPTI sources (engine processes). Default 1024.
	MaxSources int `mapstructure:"max_sources"`
	// MaxEngines caps the engine processes that sent steps. Default 1024.
	MaxEngines int `mapstructure:"max_engines"`
	// TopKernels is how many kernels each step names. Default 3.
	TopKernels int `mapstructure:"top_kernels"`

	// prevent unkeyed literal initialization
	_ struct{}
}

var _ component.Config = (*Config)(nil)

func createDefaultConfig() component.Config {
	d := gpuwindow.NewDefaultConfig()
	return &Config{
		Quiet:              d.Quiet,
		MaxSteps:           d.MaxSteps,
		MaxPendingLaunches: d.MaxPendingLaunches,
		MaxPendingKernels:  d.MaxPendingKernels,
		MaxRuns:            d.MaxRuns,
		MaxSources:         d.MaxSources,
		MaxEngines:         d.MaxEngines,
		TopKernels:         d.TopKernels,
	}
}

// Unmarshal decodes the configuration; a value that is not a duration is
// named in the error along with its key (internal/confdur).
func (cfg *Config) Unmarshal(conf *confmap.Conf) error { return confdur.Unmarshal(conf, cfg) }

// Validate checks the configuration; each message names its YAML key.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.Quiet <= 0 {
		errs = append(errs, errors.New("quiet must be positive"))
	}
	for _, f := range []struct {
		key string
		v   int
	}{
		{"max_steps", cfg.MaxSteps}, {"max_pending_launches", cfg.MaxPendingLaunches},
		{"max_pending_kernels", cfg.MaxPendingKernels}, {"max_runs", cfg.MaxRuns},
		{"max_sources", cfg.MaxSources}, {"max_engines", cfg.MaxEngines}, {"top_kernels", cfg.TopKernels},
	} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %d: must be positive", f.key, f.v))
		}
	}
	return errors.Join(errs...)
}

func (cfg *Config) window() gpuwindow.Config {
	return gpuwindow.Config{
		Quiet:              cfg.Quiet,
		MaxSteps:           cfg.MaxSteps,
		MaxPendingLaunches: cfg.MaxPendingLaunches,
		MaxPendingKernels:  cfg.MaxPendingKernels,
		MaxRuns:            cfg.MaxRuns,
		MaxSources:         cfg.MaxSources,
		MaxEngines:         cfg.MaxEngines,
		TopKernels:         cfg.TopKernels,
	}
}
