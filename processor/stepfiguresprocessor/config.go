// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepfiguresprocessor // import "github.com/inferprof/inferprof/processor/stepfiguresprocessor"

import (
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/inferprof/inferprof/internal/confdur"
)

// Config is the step figures processor's configuration.
type Config struct {
	// EngineSteps rebuilds each request's inter-token latency from the
	// engine.step spans of the same engine (the engine_step receiver).
	EngineSteps StepsConfig `mapstructure:"engine_steps"`

	// GPU ties each engine.step span to the CUDA kernels the step launched
	// (from the cupti receiver of the same collector) and each request to
	// its share of them.
	GPU GPUConfig `mapstructure:"gpu"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// StepsConfig bounds the window of recent engine steps kept per engine
// instance. Request spans arrive when their request finished, so the window
// must span the longest request; a request whose steps already left it is
// marked inferprof.steps.missing=evicted instead of given figures.
type StepsConfig struct {
	// Enabled turns the inter-token latency rebuild on. Default true; it
	// costs nothing until step spans arrive. The GPU figures of requests
	// need it too (they are shares of their steps').
	Enabled bool `mapstructure:"enabled"`
	// MaxAge keeps steps this long after the newest step of their engine.
	// Default 5m. Must be at least 1s.
	MaxAge time.Duration `mapstructure:"max_age"`
	// MaxRecords caps the (request, step) token records kept in all, the
	// window's main memory cost (about 42 bytes each). Default 2000000
	// (about 85 MB). Must be positive.
	MaxRecords int `mapstructure:"max_records"`
	// MaxInstances caps the engine instances (service.instance.id, or
	// service.name without the launcher) tracked.
	// Default 256. Must be positive.
	MaxInstances int `mapstructure:"max_instances"`
	// StallFactor counts an inter-token gap as a stall
	// (inferprof.decode.stalls) when it exceeds this multiple of the
	// request's median gap. Default 3. Must be above 1.
	StallFactor float64 `mapstructure:"stall_factor"`
	// MaxITLGaps caps inferprof.latency.itl.gaps, which otherwise holds one
	// double per output token on every request span and travels to every
	// trace exporter of the pipeline. Above the cap the attribute holds
	// MaxITLGaps evenly spaced order statistics of the gaps (smallest to
	// largest, the minimum and maximum included), so the connector's
	// inter-token histogram keeps each request's distribution, at most
	// MaxITLGaps samples of it. p50/p99/max are always computed from every
	// gap. Default 256 (about 2.3 KB per span on the wire); 0 leaves the
	// attribute out. Must not be negative.
	MaxITLGaps int `mapstructure:"max_itl_gaps"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// GPUConfig bounds the step-to-kernel join. Step spans of an engine whose
// processes stream CUPTI activity to this collector are held until their
// kernel records arrived, then pass on with inferprof.step.gpu.*; request
// spans whose steps are still held wait for them, then get inferprof.gpu.*.
// Steps of engines without a CUPTI stream pass at once, marked
// inferprof.step.gpu.missing=no_source.
type GPUConfig struct {
	// Enabled turns the join on. Default true; it holds nothing while no
	// CUPTI stream is connected.
	Enabled bool `mapstructure:"enabled"`
	// Wait is how long a step span waits for its kernel records. CUPTI hands
	// them over in buffers, usually well under a second after the kernels
	// ran, but a buffer fills slowly under light load. A step whose records
	// are all in passes as soon as they are. Default 5s. Must be at least
	// 1ms.
	Wait time.Duration `mapstructure:"wait"`
	// MaxHeld caps the step and request spans held at once; past it the
	// oldest step is finalized early with what it has
	// (inferprof.step.gpu.missing=evicted) and requests pass without
	// waiting. Default 100000. Must be positive.
	MaxHeld int `mapstructure:"max_held"`
	// StepStore names the step_store extension the cupti receiver feeds.
	// Unset: no CUPTI stream reaches the steps, which pass marked
	// inferprof.step.gpu.missing=no_source.
	StepStore *component.ID `mapstructure:"step_store"`

	// prevent unkeyed literal initialization
	_ struct{}
}

var _ component.Config = (*Config)(nil)

// Minimums of the durations. A bare number in YAML (5, not 5s) decodes as
// nanoseconds: a wait that short holds nothing, a window that short keeps
// nothing, both silently.
const (
	minWait   = time.Millisecond
	minWindow = time.Second
)

// Unmarshal decodes the configuration; a value that is not a duration is
// named in the error along with its key (internal/confdur).
func (cfg *Config) Unmarshal(conf *confmap.Conf) error { return confdur.Unmarshal(conf, cfg) }

// Validate checks the configuration; each message names its YAML key.
func (cfg *Config) Validate() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if es := cfg.EngineSteps; es.Enabled {
		if es.MaxAge <= 0 {
			errs = append(errs, errors.New("engine_steps.max_age must be positive"))
		}
		if es.MaxRecords <= 0 {
			errs = append(errs, errors.New("engine_steps.max_records must be positive"))
		}
		if es.MaxInstances <= 0 {
			errs = append(errs, errors.New("engine_steps.max_instances must be positive"))
		}
		if es.MaxITLGaps < 0 {
			errs = append(errs, errors.New("engine_steps.max_itl_gaps must not be negative"))
		}
		if !(es.StallFactor > 1) {
			errs = append(errs, errors.New("engine_steps.stall_factor must be above 1"))
		}
		add(confdur.Min("engine_steps.max_age", es.MaxAge, minWindow))
	}
	if cfg.GPU.Enabled {
		if cfg.GPU.Wait <= 0 {
			errs = append(errs, errors.New("gpu.wait must be positive"))
		}
		if cfg.GPU.MaxHeld <= 0 {
			errs = append(errs, errors.New("gpu.max_held must be positive"))
		}
	}
	add(confdur.Min("gpu.wait", cfg.GPU.Wait, minWait))
	return errors.Join(errs...)
}
