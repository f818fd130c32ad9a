// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/graphsignaltest"
	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
	"github.com/inferprof/inferprof/internal/e2etest"
)

// A real PyTorch profiler trace with kernels and three copy kinds (HtoD,
// DtoH, DtoD): receiver/cuptireceiver/testdata/kineto/README.md.
const kinetoFixture = "timeline_analysis-sampled_rank-0.json.gz"

const namesConfig = `
receivers:
  otlp:
    protocols:
      http:
        endpoint: {{addr "otlp_http"}}
  cupti:
    endpoint: {{.Dir}}/cupti.sock
    collection_interval: 1s
    kineto:
      directory: {{.Dir}}/kineto
exporters:
  graphsignal:
    api_key: names-key
    endpoint: ${env:GRAPHSIGNAL_ENDPOINT}
    local:
      endpoint: {{addr "graphsignal_local"}}
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    metrics:
      receivers: [otlp, cupti]
      exporters: [graphsignal]
`

// kinetoTotals computes, straight from the trace file, the kernel time and
// the copy time per kind, in nanoseconds.
func kinetoTotals(t *testing.T, path string) (kernels float64, copies map[string]float64) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	var doc struct {
		TraceEvents []struct {
			Ph   string  `json:"ph"`
			Cat  string  `json:"cat"`
			Name string  `json:"name"`
			Dur  float64 `json:"dur"` // microseconds
		} `json:"traceEvents"`
	}
	require.NoError(t, json.NewDecoder(zr).Decode(&doc))
	copies = map[string]float64{}
	// Kineto names copies "Memcpy HtoD (Pageable -> Device)"; the direction
	// is CUPTI's copy kind.
	kinds := map[string]string{"HtoD": "host_to_device", "DtoH": "device_to_host", "DtoD": "device_to_device"}
	for _, e := range doc.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		switch e.Cat {
		case "kernel":
			kernels += e.Dur * 1e3
		case "gpu_memcpy":
			fields := strings.Fields(e.Name)
			require.GreaterOrEqual(t, len(fields), 2, e.Name)
			copies[kinds[fields[1]]] += e.Dur * 1e3
		}
	}
	return kernels, copies
}

func gpuUtilization(fraction float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	// The device resource the nvml receiver writes (scraper.go fillResource):
	// another collector's data, which no SDK sends.
	a := rm.Resource().Attributes()
	a.PutStr("host.name", "e2e-gpu-node")
	a.PutStr("hw.id", "GPU-5a3f0c1e-8e2b-4c1d-9f7a-0123456789ab")
	a.PutStr("hw.name", "NVIDIA H200")
	a.PutStr("nvidia.gpu.pci.bus_id", "00000000:1B:00.0")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("hw.gpu.utilization")
	m.SetUnit("1")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	dp.SetDoubleValue(fraction)
	dp.Attributes().PutStr("hw.gpu.task", "general")
	return md
}

// profileFrames is a profile's value per frame over every accepted upload.
func profileFrames(srv *graphsignaltest.Server, name string) map[string]float64 {
	out := map[string]float64{}
	for frame, v := range srv.Profile(name) {
		out[frame] = float64(v[0])
	}
	return out
}

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// TestGraphsignalNamesEndToEnd: a real Kineto trace and OTLP GPU metrics go
// into the built collector; the fake Graphsignal decodes, with Graphsignal's
// schema, what Graphsignal's own profiler would have sent.
func TestGraphsignalNamesEndToEnd(t *testing.T) {
	fixture := filepath.Join(e2etest.RepoRoot(), "receiver", "cuptireceiver", "testdata", "kineto", kinetoFixture)
	wantKernels, wantCopies := kinetoTotals(t, fixture)
	require.Len(t, wantCopies, 3)

	ports := e2etest.NewPorts(t)
	srv := graphsignaltest.NewServer(t)
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o700)) // it holds the cupti socket, which must be in an owner-only folder
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "kineto"), 0o700))
	data, err := os.ReadFile(fixture)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kineto", "rank0.pt.trace.json.gz"), data, 0o600))
	cfg := e2etest.Render(t, ports, dir, namesConfig)
	e2etest.Start(t, e2etest.Options{Config: cfg, Env: []string{"GRAPHSIGNAL_ENDPOINT=" + srv.URL}})

	const fraction = 0.37
	postMetrics(t, ports.Addr("otlp_http"), gpuUtilization(fraction))

	require.Eventually(t, func() bool {
		got := sum(profileFrames(srv, "cuda_kernels_nanoseconds"))
		return got > 0 && got >= wantKernels-1e4 && len(profileFrames(srv, "cuda_memcpy_nanoseconds")) == 3
	}, 60*time.Second, 100*time.Millisecond)
	require.Empty(t, srv.Malformed(), "every upload decodes with Graphsignal's schema")

	// Kernel frames sum to the trace's kernel time (ns; each frame's value
	// is rounded to a whole nanosecond per upload).
	kernels := profileFrames(srv, "cuda_kernels_nanoseconds")
	assert.InDelta(t, wantKernels, sum(kernels), float64(len(kernels)*len(srv.Accepted())))
	// One frame per copy kind, each with the trace's copy time.
	copies := profileFrames(srv, "cuda_memcpy_nanoseconds")
	require.Len(t, copies, len(wantCopies))
	for kind, ns := range wantCopies {
		assert.InDeltaf(t, ns, copies[kind], float64(len(srv.Accepted())), "copy kind %s", kind)
	}

	var util []float64
	kinds := map[string]bool{}
	for _, u := range srv.Accepted() {
		for _, m := range u.V1.GetMetrics() {
			if m.GetName() == "gpu_utilization_percent" {
				assert.Equal(t, signalsv1.Metric_GAUGE_METRIC, m.Type)
				for _, dp := range m.Datapoints {
					util = append(util, dp.GetGauge())
				}
			}
			assert.NotEqual(t, "hw.gpu.utilization", m.GetName())
		}
		for _, r := range u.V1.GetResources() {
			kinds[r.Kind] = true
		}
	}
	require.Len(t, util, 1)
	assert.InDelta(t, 100*fraction, util[0], 1e-9, "gpu_utilization_percent is 100× the fraction sent")
	assert.True(t, kinds["host"], "a host resource")
	assert.True(t, kinds["device"], "a device resource")

	// /signals serves the same names.
	var doc signalsDoc
	require.Eventually(t, func() bool {
		var ok bool
		doc, ok = getSignals(t, ports.Addr("graphsignal_local"))
		return ok
	}, 10*time.Second, 50*time.Millisecond)
	served := map[string]bool{}
	for _, m := range doc.Metrics {
		served[m.Name] = true
	}
	for _, name := range []string{"gpu_utilization_percent", "cuda_kernels_nanoseconds", "cuda_memcpy_nanoseconds"} {
		assert.Truef(t, served[name], "/signals lacks %s", name)
	}
}
