// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// TestGatewayLabelsAllowListOnly: through the shipped gateway config, a
// resource attribute outside the label allow-list reaches the OTLP export
// whole, and is no label of Prometheus' target_info (issue #30 item 3:
// the gateway's metrics pipeline is split so only the exporters that make
// labels get transform/labels).
func TestGatewayLabelsAllowListOnly(t *testing.T) {
	ports := e2etest.NewPorts(t)
	sink := e2etest.NewSink(t)
	gwPort := e2etest.FreePort(t)
	e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("gateway.yaml")},
		Env:         gatewayEnv(t, ports, "gateway", "127.0.0.1", gwPort, sink.Endpoint),
	})
	const unlisted = "app.customer_note"
	const value = "unlisted-value-4711"
	// An application's own gauge, from the Go SDK's meter over OTLP/gRPC;
	// target_info needs job and instance.
	app := e2etest.NewSDKMeter(t, e2etest.SDKOptions{Endpoint: "127.0.0.1:" + strconv.Itoa(gwPort),
		Resource: []attribute.KeyValue{
			attribute.String("service.name", "vllm-labels"), attribute.String("service.instance.id", "vllm-labels-0"),
			attribute.String("host.name", "gpu-7"), attribute.String(unlisted, value),
		}})
	gauge, err := app.Meter("e2e").Int64Gauge("e2e.labels")
	require.NoError(t, err)
	gauge.Record(t.Context(), 7)
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		return app.ForceFlush(ctx) == nil
	}, 30*time.Second, 100*time.Millisecond, "the gateway never accepted the metric")

	// The OTLP export keeps the whole resource.
	require.Eventually(t, func() bool {
		for _, got := range sink.Metrics.AllMetrics() {
			for i := 0; i < got.ResourceMetrics().Len(); i++ {
				if v, ok := got.ResourceMetrics().At(i).Resource().Attributes().Get(unlisted); ok && v.Str() == value {
					return true
				}
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "the unlisted resource attribute did not reach the OTLP export")

	// Prometheus: the metric and its target_info, without the attribute.
	var scrape string
	ok := assert.Eventually(t, func() bool {
		scrape = scrapeText(t, ports.Addr("gateway_prometheus"))
		return strings.Contains(scrape, "e2e_labels") && strings.Contains(scrape, `target_info{`) &&
			strings.Contains(scrape, `host_name="gpu-7"`)
	}, 30*time.Second, 100*time.Millisecond, "no e2e_labels and target_info on :8889")
	require.True(t, ok, scrape)
	for _, l := range strings.Split(scrape, "\n") {
		if strings.HasPrefix(l, "target_info{") && strings.Contains(l, "vllm-labels") {
			assert.NotContains(t, l, "app_customer_note", "an unlisted resource attribute became a target_info label")
			assert.NotContains(t, l, value)
		}
	}
	assert.NotContains(t, scrape, value)
}
