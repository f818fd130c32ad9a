// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/e2etest"
	"github.com/inferprof/inferprof/internal/names"
)

// kernelTotals sums inferprof.gpu.kernel.duration (seconds) per
// (pid, kernel name, category, device) over everything the sink received.
func kernelTotals(sink *consumertest.MetricsSink) map[string]float64 {
	out := map[string]float64{}
	for _, md := range sink.AllMetrics() {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			pid, _ := rm.Resource().Attributes().Get("process.pid")
			for j := 0; j < rm.ScopeMetrics().Len(); j++ {
				ms := rm.ScopeMetrics().At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					if ms.At(k).Name() != names.MetricKernelDuration {
						continue
					}
					dps := ms.At(k).Sum().DataPoints()
					for l := 0; l < dps.Len(); l++ {
						a := dps.At(l).Attributes()
						n, _ := a.Get(names.AttrKernelName)
						c, _ := a.Get(names.AttrKernelCategory)
						d, _ := a.Get(names.AttrCUDADeviceOrdinal)
						out[fmt.Sprintf("%d/%s/%s/%s", pid.Int(), n.Str(), c.Str(), d.AsString())] += dps.At(l).DoubleValue()
					}
				}
			}
		}
	}
	return out
}

func kernelRecs(name uint32, n int, dur uint64) []cuptiwire.Record {
	recs := make([]cuptiwire.Record, n)
	for i := range recs {
		start := uint64(time.Now().UnixNano()) + uint64(i)*10_000
		recs[i] = cuptiwire.Record{Kind: cuptiwire.RecordKindKernel, Name: name, Start: start, End: start + dur, Stream: 7}
	}
	return recs
}

// TestCUPTIKernelMetrics runs the built collector with the cupti receiver in
// a metrics pipeline. The C encoder (native/cupti) and a Go client stream
// real frames to its socket; a third connection sends a bad frame, which
// drops only that connection.
func TestCUPTIKernelMetrics(t *testing.T) {
	sink := e2etest.NewSink(t)
	ports := e2etest.NewPorts(t)
	sockDir, err := os.MkdirTemp("", "cuptie2e")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "run", "cupti.sock")
	cfg := e2etest.Render(t, ports, t.TempDir(), fmt.Sprintf(`
receivers:
  cupti:
    endpoint: %s
    collection_interval: 100ms
    top_kernels: 10
exporters:
  otlp:
    endpoint: %s
    tls:
      insecure: true
service:
  telemetry:
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
`, sock, sink.Endpoint))
	e2etest.Start(t, e2etest.Options{Config: cfg})

	fi, err := os.Stat(sock)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "socket mode")
	di, err := os.Stat(filepath.Dir(sock))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), di.Mode().Perm(), "socket folder mode")

	// The Go client: a tensor-parallel worker that stays connected.
	good, err := net.Dial("unix", sock)
	require.NoError(t, err)
	defer good.Close()
	b := cuptiwire.AppendHello(nil, 1111, uint64(time.Now().UnixNano()), "e2e-host")
	b = cuptiwire.AppendString(b, 1, "void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, int)")
	b = cuptiwire.AppendRecords(b, kernelRecs(1, 200, 5000))
	_, err = good.Write(b)
	require.NoError(t, err)

	// A worker whose stream goes bad: wrong magic after a valid hello.
	bad, err := net.Dial("unix", sock)
	require.NoError(t, err)
	defer bad.Close()
	junk := cuptiwire.AppendHello(nil, 2222, 0, "e2e-host")
	junk = append(junk, []byte("XXXX\x01\x03\x00\x00\x30\x00\x00\x00")...)
	_, err = bad.Write(junk)
	require.NoError(t, err)
	_ = bad.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = bad.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the collector closes the bad connection")

	// The good connection still streams after the bad one was dropped.
	_, err = good.Write(cuptiwire.AppendRecords(nil, kernelRecs(1, 100, 5000)))
	require.NoError(t, err)

	key := "1111/vllm::rms_norm_kernel/normalization/0"
	require.Eventually(t, func() bool { return kernelTotals(sink.Metrics)[key] >= 300*5000e-9-1e-12 },
		30*time.Second, 20*time.Millisecond, "kernel metrics from the Go client")
	assert.InDelta(t, 300*5000e-9, kernelTotals(sink.Metrics)[key], 1e-12)

	// The C encoder, as the injection library uses it.
	if cc, err := exec.LookPath("gcc"); err == nil {
		native := filepath.Join(e2etest.RepoRoot(), "native", "cupti")
		bin := filepath.Join(t.TempDir(), "emit_frames")
		out, err := exec.Command(cc, "-std=gnu11", "-O1", "-o", bin,
			filepath.Join(native, "tests", "emit_frames.c"), filepath.Join(native, "ipc_client.c")).CombinedOutput()
		require.NoError(t, err, "%s", out)
		out, err = exec.Command(bin, sock, "3000").CombinedOutput()
		require.NoError(t, err, "%s", out)
		// emit_frames sends 1000 flash_fwd kernels split over devices 0 and 1,
		// durations 100 ns each (i%3 == 0).
		require.Eventually(t, func() bool {
			tot := kernelTotals(sink.Metrics)
			return tot["4242/flash::flash_fwd_kernel/attention/0"]+tot["4242/flash::flash_fwd_kernel/attention/1"] >= 1000*100e-9-1e-12
		}, 30*time.Second, 20*time.Millisecond, "kernel metrics from the C encoder")
		tot := kernelTotals(sink.Metrics)
		assert.InDelta(t, 1000*100e-9, tot["4242/flash::flash_fwd_kernel/attention/0"]+tot["4242/flash::flash_fwd_kernel/attention/1"], 1e-12)
		assert.Positive(t, tot["4242/ncclDevKernel_AllReduce_Sum_bf16_RING_LL/communication/0"]+tot["4242/ncclDevKernel_AllReduce_Sum_bf16_RING_LL/communication/1"])
	}

	// The bad connection was counted.
	require.Eventually(t, func() bool {
		v, ok := promValue(ports.Port("telemetry"), "otelcol_receiver_cupti_bad_connections")
		return ok && v == 1
	}, 30*time.Second, 50*time.Millisecond, "bad connection counter")
}
