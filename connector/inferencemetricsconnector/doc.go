// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package inferencemetricsconnector turns LLM inference request spans and
// engine step spans into GenAI semantic-convention and inferprof.* metrics.
//
// mdatagen v0.159.0 cannot compile a metrics builder for histogram metrics, and
// the connector aggregates its own histograms, so the generated builder and its
// config are removed; metadata.yaml still documents every metric.
//
//go:generate go tool mdatagen metadata.yaml
//go:generate rm -f internal/metadata/generated_metrics.go internal/metadata/generated_metrics_test.go internal/metadata/generated_config.go internal/metadata/generated_config_test.go internal/metadata/testdata/config.yaml
package inferencemetricsconnector // import "github.com/inferprof/inferprof/connector/inferencemetricsconnector"
