// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/inferprof/inferprof/internal/e2etest"
	"github.com/inferprof/inferprof/internal/names"
)

// kinetoTracePath is a real PyTorch profiler trace kept in the receiver's
// testdata (HolisticTraceAnalysis test data; see its README).
func kinetoTracePath(name string) string {
	return filepath.Join(e2etest.RepoRoot(), "receiver", "cuptireceiver", "testdata", "kineto", name)
}

// fixtureKernels counts the kernel events of a trace file by decoding it
// generically, independently of the receiver's reader.
func fixtureKernels(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	var doc struct {
		TraceEvents []struct {
			Ph  string `json:"ph"`
			Cat string `json:"cat"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.NewDecoder(zr).Decode(&doc))
	n := 0
	for _, ev := range doc.TraceEvents {
		if ev.Ph == "X" && ev.Cat == "kernel" {
			n++
		}
	}
	return n
}

// kinetoKernelCount sums inferprof.gpu.kernel.count over every Kineto
// resource the sink received.
func kinetoKernelCount(sink *consumertest.MetricsSink) int64 {
	var n int64
	for _, md := range sink.AllMetrics() {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			if src, ok := rm.Resource().Attributes().Get("inferprof.activity.source"); !ok || src.Str() != "kineto" {
				continue
			}
			for j := 0; j < rm.ScopeMetrics().Len(); j++ {
				ms := rm.ScopeMetrics().At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					if ms.At(k).Name() != names.MetricKernelCount {
						continue
					}
					dps := ms.At(k).Sum().DataPoints()
					for l := 0; l < dps.Len(); l++ {
						n += dps.At(l).IntValue()
					}
				}
			}
		}
	}
	return n
}

// promValue reads one unlabelled series from the collector's own Prometheus
// endpoint; ok is false until the series exists.
func promValue(port int, name string) (float64, bool) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port)) //nolint:noctx // loopback test helper
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := strings.TrimPrefix(line, name)
		if !strings.HasPrefix(rest, " ") && !strings.HasPrefix(rest, "{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		return v, err == nil
	}
	return 0, false
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	// Written beside the folder and renamed in, as a profiler finishing a
	// trace would, so the reader never sees half a file.
	tmp := filepath.Join(filepath.Dir(filepath.Dir(to)), filepath.Base(to)+".part")
	require.NoError(t, os.WriteFile(tmp, b, 0o600))
	require.NoError(t, os.Rename(tmp, to))
}

// TestKinetoReadPositionsSurviveRestart runs the built collector with the
// Kineto reader and a file_storage extension, drops a real trace in the
// folder, sees it counted, stops the collector, and starts it again on the
// same storage folder. A second trace dropped after the restart proves the
// folder was scanned again; the first trace must not be counted twice.
// Without storage the same steps count it twice, which shows the check can
// fail.
func TestKinetoReadPositionsSurviveRestart(t *testing.T) {
	first := kinetoTracePath("alexnet-benchmark_result_2869224_1695835535_trace.json.gz")
	second := kinetoTracePath("triton_example-triton_example.json.gz")
	firstKernels, secondKernels := int64(fixtureKernels(t, first)), int64(fixtureKernels(t, second))
	require.Positive(t, firstKernels)
	require.Positive(t, secondKernels)

	for _, tc := range []struct {
		name        string
		storage     bool
		wantRestart int64 // kernels of the first trace after the restart
	}{
		{"file_storage", true, firstKernels},
		{"no_storage", false, 2 * firstKernels},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := e2etest.NewSink(t)
			ports := e2etest.NewPorts(t)
			base := t.TempDir()
			traces := filepath.Join(base, "traces")
			require.NoError(t, os.Mkdir(traces, 0o700))
			storageDir := filepath.Join(base, "storage")
			ext, use, svc := "", "", ""
			if tc.storage {
				ext = "extensions:\n  file_storage:\n    directory: {{.Dir}}\n    create_directory: true\n"
				use = "      storage: file_storage\n"
				svc = "  extensions: [file_storage]\n"
			}
			cfg := e2etest.Render(t, ports, storageDir, ext+fmt.Sprintf(`
receivers:
  cupti:
    endpoint: ""
    collection_interval: 100ms
    kineto:
      directory: %s
%sexporters:
  otlp:
    endpoint: %s
    tls:
      insecure: true
service:
%s  telemetry:
    metrics:
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: {{port "telemetry"}}
  pipelines:
    metrics:
      receivers: [cupti]
      exporters: [otlp]
`, traces, use, sink.Endpoint, svc))

			c1 := e2etest.Start(t, e2etest.Options{Config: cfg})
			copyFile(t, first, filepath.Join(traces, filepath.Base(first)))
			require.Eventually(t, func() bool { return kinetoKernelCount(sink.Metrics) >= firstKernels },
				60*time.Second, 20*time.Millisecond, "the first trace is counted")
			require.Equal(t, firstKernels, kinetoKernelCount(sink.Metrics))
			c1.Stop()

			c2 := e2etest.Start(t, e2etest.Options{Config: cfg})
			copyFile(t, second, filepath.Join(traces, filepath.Base(second)))
			// Both files are scanned in one pass, in name order, and the pass
			// ends in one flush: once the second trace's kernels arrive, a
			// second read of the first would have arrived too.
			require.Eventually(t, func() bool {
				return kinetoKernelCount(sink.Metrics) >= tc.wantRestart+secondKernels
			}, 60*time.Second, 20*time.Millisecond, "the trace dropped after the restart is counted")
			require.Equal(t, tc.wantRestart+secondKernels, kinetoKernelCount(sink.Metrics))
			wantFiles := 1.0
			if !tc.storage {
				wantFiles = 2
			}
			var files float64
			require.Eventually(t, func() bool {
				var ok bool
				files, ok = promValue(ports.Port("telemetry"), "otelcol_receiver_cupti_trace_files")
				return ok && files == wantFiles
			}, 30*time.Second, 20*time.Millisecond, "files read by the restarted collector")
			require.Equal(t, wantFiles, files)
			c2.Stop()
		})
	}
}
