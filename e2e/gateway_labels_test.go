// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

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
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "vllm-labels")
	// target_info needs job and instance.
	rm.Resource().Attributes().PutStr("service.instance.id", "vllm-labels-0")
	rm.Resource().Attributes().PutStr("host.name", "gpu-7")
	rm.Resource().Attributes().PutStr(unlisted, value)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("e2e.labels")
	m.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(7)

	conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(gwPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	client := pmetricotlp.NewGRPCClient(conn)
	require.Eventually(t, func() bool {
		_, err := client.Export(t.Context(), pmetricotlp.NewExportRequestFromMetrics(md))
		return err == nil
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
