// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector // import "github.com/inferprof/inferprof/connector/inferencemetricsconnector"

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/aggregate"
	"github.com/inferprof/inferprof/internal/confdur"
)

// Minimums of the intervals and targets: below them a value is a typo (a
// bare 15 is 15ns, and a 15ns flush ticker keeps a core busy), not a setting.
const (
	minFlushInterval = 100 * time.Millisecond
	minIdle          = time.Second
	minTarget        = time.Millisecond
)

// Temporality is the aggregation temporality of the emitted metrics.
type Temporality string

const (
	// TemporalityCumulative: every flush reports totals since the series began.
	TemporalityCumulative Temporality = "cumulative"
	// TemporalityDelta: every flush reports what happened since the last one.
	TemporalityDelta Temporality = "delta"
)

// UnmarshalText accepts cumulative and delta, and span_metrics' spellings
// AGGREGATION_TEMPORALITY_CUMULATIVE and AGGREGATION_TEMPORALITY_DELTA so its
// configs carry over.
func (t *Temporality) UnmarshalText(text []byte) error {
	switch strings.ToLower(strings.TrimPrefix(strings.ToUpper(string(text)), "AGGREGATION_TEMPORALITY_")) {
	case string(TemporalityCumulative):
		*t = TemporalityCumulative
	case string(TemporalityDelta):
		*t = TemporalityDelta
	default:
		return fmt.Errorf("unknown aggregation_temporality %q: use cumulative or delta", text)
	}
	return nil
}

// Dimension adds one attribute to every request series, read from the span,
// else from the resource, else Default.
type Dimension struct {
	// Name is the attribute key.
	Name string `mapstructure:"name"`
	// Default is used when neither the span nor the resource has the
	// attribute; nil leaves the attribute out.
	Default *string `mapstructure:"default"`
	_       struct{}
}

// ExemplarsConfig controls the exemplars attached to latency histograms.
type ExemplarsConfig struct {
	// Enabled attaches trace and span ids of observed requests. Default true.
	Enabled bool `mapstructure:"enabled"`
	// MaxPerDataPoint is how many exemplars each data point keeps per flush:
	// the largest values seen. Default 5; must be positive when enabled.
	MaxPerDataPoint int `mapstructure:"max_per_data_point"`
	_               struct{}
}

// GoodputConfig holds the targets a successful request must meet to count in
// inferprof.server.goodput (DistServe's definition, as in vllm bench serve).
type GoodputConfig struct {
	// TimeToFirstToken is the TTFT target. Default 2s; 0 means no target.
	TimeToFirstToken time.Duration `mapstructure:"time_to_first_token"`
	// TimePerOutputToken is the TPOT target. Default 100ms; 0 means no target.
	// Requests with fewer than 2 output tokens meet it.
	TimePerOutputToken time.Duration `mapstructure:"time_per_output_token"`
	// E2E is the request duration target. Default 0: no target.
	E2E time.Duration `mapstructure:"e2e"`
	_   struct{}
}

// MetricConfig switches one metric on or off.
type MetricConfig struct {
	// Enabled emits the metric. Every metric is enabled by default.
	Enabled bool `mapstructure:"enabled"`
	_       struct{}
}

// Config is the inference_metrics connector's configuration.
type Config struct {
	// MetricsFlushInterval is how often metrics are emitted. Default 15s; must
	// be positive.
	MetricsFlushInterval time.Duration `mapstructure:"metrics_flush_interval"`
	// AggregationTemporality is cumulative (default) or delta.
	AggregationTemporality Temporality `mapstructure:"aggregation_temporality"`
	// AggregationCardinalityLimit is the most series (resource and dimension
	// sets) held. Past it, spans go into one overflow series marked
	// otel.metric.overflow=true, are counted, and the first is logged at warn
	// (then at most once a minute). Default 1000 (a full scrape is then about
	// 170k samples, see the README); must be positive.
	AggregationCardinalityLimit int `mapstructure:"aggregation_cardinality_limit"`
	// MaxSeriesPerModel caps the request series of one gen_ai.request.model,
	// so that one model's dimensions cannot take the whole limit. Default
	// 200; 0: no cap. A cap above aggregation_cardinality_limit has no effect.
	MaxSeriesPerModel int `mapstructure:"max_series_per_model"`
	// MaxSeriesPerService caps the series of one service.name, so that one
	// sender inventing model names (or instances) cannot take the whole
	// limit from the others. Default 250; 0: no cap. A cap above
	// aggregation_cardinality_limit has no effect.
	MaxSeriesPerService int `mapstructure:"max_series_per_service"`
	// MetricsExpiration drops a cumulative series that has seen no span for
	// this long, which gives its room back under the limits. Default 5m; 0:
	// never. Delta series not updated for a whole interval are always
	// dropped.
	MetricsExpiration time.Duration `mapstructure:"metrics_expiration"`
	// ResourceMetricsKeyAttributes, when set, are the only resource
	// attributes that key the series and are emitted on their resource (as
	// in span_metrics, whose name this is); the rest are dropped. Set it to
	// the attributes the metrics exporters keep (the prometheus exporter's
	// resource_constant_labels), so that what is aggregated apart is exported
	// apart. Empty by default: the whole resource.
	ResourceMetricsKeyAttributes []string `mapstructure:"resource_metrics_key_attributes"`
	// Dimensions are added to the request series' semconv attributes. Empty
	// by default.
	Dimensions []Dimension `mapstructure:"dimensions"`
	// Exemplars on the latency histograms.
	Exemplars ExemplarsConfig `mapstructure:"exemplars"`
	// Goodput targets.
	Goodput GoodputConfig `mapstructure:"goodput"`
	// Conversations bounds the counting of turns per conversation.
	Conversations ConversationsConfig `mapstructure:"conversations"`
	// Storage names a storage extension (file_storage) in which the connector
	// keeps a marker of its open flush window: how many spans it holds,
	// updated once a second. A start that finds a window the last run did
	// not flush (a SIGKILL, an OOM kill) counts its spans in
	// otelcol_connector_inference_metrics_lost_on_restart_spans and logs a
	// warning. The window's figures are not recovered. Default: none.
	Storage *component.ID `mapstructure:"storage"`
	// Metrics switches metrics off by name, e.g.
	// `inferprof.server.other.duration: {enabled: false}`. Empty by default.
	Metrics map[string]MetricConfig `mapstructure:"metrics"`
	_       struct{}
}

// ConversationsConfig: a conversation's turns (inferprof.agent.turn on its
// agent runs) are counted until it has had no turn for Idle, then observed in
// inferprof.agent.conversation.turns.
type ConversationsConfig struct {
	// Idle ends a conversation. Default 30m; must be positive.
	Idle time.Duration `mapstructure:"idle"`
	// MaxConversations caps the conversations followed; past it the least
	// recently active is observed early and counted
	// (otelcol_connector_inference_metrics_conversations_early). Default
	// 100000; must be positive.
	MaxConversations int `mapstructure:"max_conversations"`
	_                struct{}
}

var _ component.Config = (*Config)(nil)

// Unmarshal decodes the configuration; a value that is not a duration is
// named in the error along with its key.
func (c *Config) Unmarshal(conf *confmap.Conf) error { return confdur.Unmarshal(conf, c) }

// semconvDimensions are the attributes every request series carries already.
var semconvDimensions = []string{"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "error.type"}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.MetricsFlushInterval <= 0 {
		errs = append(errs, fmt.Errorf("metrics_flush_interval must be positive, got %s", c.MetricsFlushInterval))
	}
	errs = append(errs,
		confdur.Min("metrics_flush_interval", c.MetricsFlushInterval, minFlushInterval),
		confdur.Min("metrics_expiration", c.MetricsExpiration, minFlushInterval),
		confdur.Min("conversations.idle", c.Conversations.Idle, minIdle),
		confdur.Min("goodput.time_to_first_token", c.Goodput.TimeToFirstToken, minTarget),
		confdur.Min("goodput.time_per_output_token", c.Goodput.TimePerOutputToken, minTarget),
		confdur.Min("goodput.e2e", c.Goodput.E2E, minTarget))
	switch c.AggregationTemporality {
	case TemporalityCumulative, TemporalityDelta:
	default:
		errs = append(errs, fmt.Errorf("aggregation_temporality must be cumulative or delta, got %q", c.AggregationTemporality))
	}
	if c.AggregationCardinalityLimit <= 0 {
		errs = append(errs, fmt.Errorf("aggregation_cardinality_limit must be positive, got %d", c.AggregationCardinalityLimit))
	}
	errs = append(errs, c.validateLimits()...)
	if c.MetricsExpiration < 0 {
		errs = append(errs, fmt.Errorf("metrics_expiration must not be negative, got %s", c.MetricsExpiration))
	}
	if c.Exemplars.Enabled && c.Exemplars.MaxPerDataPoint <= 0 {
		errs = append(errs, fmt.Errorf("exemplars.max_per_data_point must be positive when exemplars are enabled, got %d", c.Exemplars.MaxPerDataPoint))
	}
	if c.Goodput.TimeToFirstToken < 0 || c.Goodput.TimePerOutputToken < 0 || c.Goodput.E2E < 0 {
		errs = append(errs, errors.New("goodput targets must not be negative"))
	}
	if c.Conversations.Idle <= 0 {
		errs = append(errs, fmt.Errorf("conversations.idle must be positive, got %s", c.Conversations.Idle))
	}
	if c.Conversations.MaxConversations <= 0 {
		errs = append(errs, fmt.Errorf("conversations.max_conversations must be positive, got %d", c.Conversations.MaxConversations))
	}
	if err := c.validateIdentity(); err != nil {
		errs = append(errs, err)
	}
	seen := map[string]bool{}
	for _, d := range semconvDimensions {
		seen[d] = true
	}
	for i, d := range c.Dimensions {
		switch {
		case d.Name == "":
			errs = append(errs, fmt.Errorf("dimensions[%d].name must be set", i))
		case seen[d.Name]:
			errs = append(errs, fmt.Errorf("dimensions[%d]: %q is duplicated or already a default dimension", i, d.Name))
		}
		seen[d.Name] = true
	}
	for name := range c.Metrics {
		if !knownMetric(name) {
			errs = append(errs, fmt.Errorf("metrics: unknown metric %q", name))
		}
	}
	return errors.Join(errs...)
}

func (c *Config) validateLimits() []error {
	var errs []error
	if c.MaxSeriesPerModel < 0 {
		errs = append(errs, fmt.Errorf("max_series_per_model must not be negative, got %d", c.MaxSeriesPerModel))
	}
	if c.MaxSeriesPerService < 0 {
		errs = append(errs, fmt.Errorf("max_series_per_service must not be negative, got %d", c.MaxSeriesPerService))
	}
	return errs
}

// validateIdentity checks resource_metrics_key_attributes.
func (c *Config) validateIdentity() error {
	seen := make(map[string]bool, len(c.ResourceMetricsKeyAttributes))
	for i, k := range c.ResourceMetricsKeyAttributes {
		switch {
		case k == "":
			return fmt.Errorf("resource_metrics_key_attributes[%d] must not be empty", i)
		case seen[k]:
			return fmt.Errorf("resource_metrics_key_attributes: %q is listed twice", k)
		}
		seen[k] = true
	}
	return nil
}

func knownMetric(name string) bool {
	if aggregate.IsExponential(name) {
		return true
	}
	for _, s := range aggregate.Specs {
		if s.Name == name {
			return true
		}
	}
	return false
}

func (c *Config) disabledMetrics() map[string]bool {
	d := map[string]bool{}
	for name, m := range c.Metrics {
		if !m.Enabled {
			d[name] = true
		}
	}
	return d
}
