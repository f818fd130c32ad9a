// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/e2etest"
)

// sentRequest is one llm_request span the traffic sends, with the figures
// the dashboard must show for it.
type sentRequest struct {
	id                                string
	start                             time.Time
	e2e, ttft, queue, prefill, decode float64
	outTokens                         int64
	failed                            bool
}

func (r sentRequest) tpot() float64 { return r.decode / float64(r.outTokens-1) }

// sentKernel is one kernel the traffic streams to the cupti socket.
type sentKernel struct {
	raw, short, category string
	stream               uint32
	n                    int
	dur                  uint64 // ns each
}

// traffic is what feedTraffic sent, for the checks.
type traffic struct {
	service  string
	requests []sentRequest
	kernels  []sentKernel
	gpuUUID  string
	gpuName  string
	util     float64 // fraction
	memUsed  float64 // bytes
	memLimit float64
	powerW   float64
	steps    int // engine batches the hook reported
	engine   driveOutput
}

// Goodput targets of the shipped config (the connector's defaults).
const (
	targetTTFT = 2.0
	targetTPOT = 0.1
)

func (tr traffic) counts() (total, failed, good int) {
	for _, r := range tr.requests {
		total++
		switch {
		case r.failed:
			failed++
		case r.ttft <= targetTTFT && r.tpot() <= targetTPOT:
			good++
		}
	}
	return total, failed, good
}

// dashboardEnv is defaultEnv with short flush intervals, so a test sees
// its traffic in seconds, every kernel record as a span, and short socket
// paths.
func dashboardEnv(t *testing.T, ports *e2etest.Ports, dataDir, sockDir string) []string {
	return append(defaultEnv(t, ports, dataDir),
		"INFERPROF_METRICS_FLUSH_INTERVAL=1s",
		"INFERPROF_CUPTI_INTERVAL=500ms",
		"INFERPROF_KERNEL_SPAN_RATIO=1",
		"INFERPROF_CUPTI_ENDPOINT="+filepath.Join(sockDir, "cupti.sock"),
		"INFERPROF_STEP_ENDPOINT="+filepath.Join(sockDir, "step.sock"))
}

// startShipped runs config/default.yaml with dashboardEnv.
func startShipped(t *testing.T) (*e2etest.Collector, *e2etest.Ports, string) {
	t.Helper()
	ports := e2etest.NewPorts(t)
	sockDir, err := os.MkdirTemp("", "dash")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	c := e2etest.Start(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("default.yaml")},
		Env:         dashboardEnv(t, ports, t.TempDir(), sockDir),
	})
	return c, ports, sockDir
}

// feedTraffic sends known traffic to a collector running the shipped
// default config: engine steps from the real Python hook on the fake vLLM
// engine, llm_request spans for its requests over OTLP/gRPC (one failed),
// kernel records over the cupti wire format, and NVML-shaped GPU readings
// over OTLP/HTTP.
func feedTraffic(t *testing.T, ports *e2etest.Ports, sockDir string) traffic {
	t.Helper()
	tr := traffic{service: "e2e-dash", gpuUUID: "GPU-5a3f0c1e-8e2b-4c1d-9f7a-0123456789ab", gpuName: "NVIDIA H200",
		util: 0.83, memLimit: 141 << 30, memUsed: 97.5 * (1 << 30), powerW: 612}

	start := time.Now().Add(-500 * time.Millisecond).Truncate(time.Microsecond)
	engine := runFakeEngine(t, filepath.Join(sockDir, "step.sock"), tr.service, "--engine", "vllm", "--step-ms", "5")
	tr.steps = len(engine.Steps)
	tr.engine = engine
	ids := map[string]bool{}
	for _, st := range engine.Steps {
		for _, id := range st.RequestIDs {
			ids[id] = true
		}
	}
	require.GreaterOrEqual(t, len(ids), 6, "the fake engine ran its scenario")

	// Figures chosen so that two requests meet both targets, the rest miss
	// the TPOT target and one fails; e2e grows with i, so the slowest is
	// the last.
	for i := range len(ids) {
		id := fmt.Sprintf("cmpl-%d", i)
		require.Truef(t, ids[id], "the engine served %s", id)
		r := sentRequest{id: id, start: start, queue: 0.01 + 0.002*float64(i), prefill: 0.03, outTokens: 11}
		r.ttft = r.queue + r.prefill + 0.02
		r.decode = 0.4 * float64(i+1)
		r.e2e = r.ttft + r.decode + 0.015
		r.failed = i == 3
		tr.requests = append(tr.requests, r)
	}
	tracer := e2etest.NewTracer(t, ports.Addr("otlp_grpc"), attribute.String("service.name", tr.service))
	for _, r := range tr.requests {
		spec := e2etest.SpanSpec{
			Name: "llm_request", Kind: trace.SpanKindServer, Start: r.start,
			End: r.start.Add(time.Duration(r.e2e * float64(time.Second))),
			Attributes: []attribute.KeyValue{
				attribute.String("gen_ai.request.id", r.id),
				attribute.String("gen_ai.response.model", "meta-llama/Llama-3.1-8B-Instruct"),
				attribute.Int("gen_ai.usage.prompt_tokens", 16),
				attribute.Int64("gen_ai.usage.completion_tokens", r.outTokens),
				attribute.Float64("gen_ai.latency.e2e", r.e2e),
				attribute.Float64("gen_ai.latency.time_to_first_token", r.ttft),
				attribute.Float64("gen_ai.latency.time_in_queue", r.queue),
				attribute.Float64("gen_ai.latency.time_in_model_prefill", r.prefill),
				attribute.Float64("gen_ai.latency.time_in_model_decode", r.decode),
				attribute.Float64("gen_ai.latency.time_in_model_inference", r.prefill+r.decode),
			},
		}
		if r.failed {
			spec.Error = "engine error"
		}
		tracer.Send(t.Context(), "vllm.llm_engine", spec)
	}
	tracer.Flush(t)

	// Kernels on device 0, as the injection library reports them (names
	// as CUPTI gives them, mangled or not; the receiver shortens them).
	tr.kernels = []sentKernel{
		{raw: "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, cutlass::bfloat16_t>, false, true, false, false, true, true, false>(Flash_fwd_params)",
			short: "flash::flash_fwd_kernel", category: "attention", stream: 7, n: 40, dur: 180_000},
		{raw: "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
			short:    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
			category: "gemm", stream: 7, n: 60, dur: 250_000},
		{raw: "void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, float, int, int)",
			short: "vllm::rms_norm_kernel", category: "normalization", stream: 13, n: 30, dur: 20_000},
	}
	conn, err := net.Dial("unix", filepath.Join(sockDir, "cupti.sock"))
	require.NoError(t, err)
	defer conn.Close()
	// As the library opens a connection (docs/cupti-wire.md): hello, its
	// identity, and the UUID of the device its records name.
	b := cuptiwire.AppendHelloFlags(nil, 4242, cuptiwire.HelloLaunches, uint64(time.Now().UnixNano()), "e2e-gpu-node")
	b = cuptiwire.AppendIdentity(b, 1, "", tr.service)
	var uuid [16]byte
	_, err = hex.Decode(uuid[:], []byte(strings.ReplaceAll(strings.TrimPrefix(tr.gpuUUID, "GPU-"), "-", "")))
	require.NoError(t, err)
	b = cuptiwire.AppendDevice(b, cuptiwire.Device{Ordinal: 0, UUID: uuid})
	at := uint64(start.UnixNano())
	for i, k := range tr.kernels {
		b = cuptiwire.AppendString(b, uint32(i+1), k.raw)
	}
	// One stream runs one kernel at a time: each stream's kernels follow
	// each other with a 5 µs gap, round robin over the kernel names.
	var recs []cuptiwire.Record
	next := map[uint32]uint64{}
	left := make([]int, len(tr.kernels))
	for i, k := range tr.kernels {
		left[i] = k.n
	}
	for corr := uint32(1); ; corr++ {
		sent := false
		for i, k := range tr.kernels {
			if left[i] == 0 {
				continue
			}
			left[i]--
			sent = true
			s := max(next[k.stream], at)
			next[k.stream] = s + k.dur + 5_000
			recs = append(recs, cuptiwire.Record{Kind: cuptiwire.RecordKindKernel, Name: uint32(i + 1), Stream: k.stream,
				Start: s, End: s + k.dur, Correlation: corr})
		}
		if !sent {
			break
		}
	}
	b = cuptiwire.AppendRecords(b, recs)
	_, err = conn.Write(b)
	require.NoError(t, err)

	postMetrics(t, ports.Addr("otlp_http"), tr.gpuMetrics(time.Now()))
	return tr
}

// gpuMetrics follows the nvml receiver's device resource (scraper.go
// fillResource) and its hw.gpu.* gauges: a collector's data, no SDK's.
func (tr traffic) gpuMetrics(ts time.Time) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	a := rm.Resource().Attributes()
	a.PutStr("host.name", "e2e-gpu-node")
	a.PutStr("hw.id", tr.gpuUUID)
	a.PutStr("hw.name", tr.gpuName)
	a.PutStr("hw.type", "gpu")
	a.PutStr("hw.vendor", "NVIDIA")
	a.PutStr("nvidia.gpu.pci.bus_id", "00000000:1B:00.0")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	gauge := func(name, unit string, v float64, attrs map[string]string) {
		m := ms.AppendEmpty()
		m.SetName(name)
		m.SetUnit(unit)
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
		dp.SetDoubleValue(v)
		for k, v := range attrs {
			dp.Attributes().PutStr(k, v)
		}
	}
	gauge("hw.gpu.utilization", "1", tr.util, map[string]string{"hw.gpu.task": "general"})
	gauge("hw.gpu.utilization", "1", 0.05, map[string]string{"hw.gpu.task": "decoder"})
	gauge("hw.gpu.memory.usage", "By", tr.memUsed, nil)
	gauge("hw.gpu.memory.limit", "By", tr.memLimit, nil)
	gauge("hw.power", "W", tr.powerW, nil)
	return md
}

// dashboardDoc is the part of /dashboard.json the tests read.
type dashboardDoc struct {
	Totals struct {
		Requests int64 `json:"requests"`
		Good     int64 `json:"good"`
		Errors   int64 `json:"errors"`
	} `json:"totals"`
	Latency map[string][]struct {
		Count int64 `json:"count"`
	} `json:"latency"`
	Kernels struct {
		Top []struct {
			Name    string  `json:"name"`
			Seconds float64 `json:"seconds"`
		} `json:"top"`
	} `json:"kernels"`
	GPUs []struct {
		ID string `json:"id"`
	} `json:"gpus"`
	Slowest []struct {
		RequestID string `json:"request_id"`
	} `json:"slowest"`
	Timeline struct {
		Requests int `json:"requests"`
	} `json:"timeline"`
}

func getJSON(t *testing.T, url string, v any) bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	return json.NewDecoder(resp.Body).Decode(v) == nil
}

// waitForTraffic waits until the dashboard's data shows all of tr.
func waitForTraffic(t *testing.T, c *e2etest.Collector, addr string, tr traffic) dashboardDoc {
	t.Helper()
	total, failed, _ := tr.counts()
	var d dashboardDoc
	require.Eventually(t, func() bool {
		d = dashboardDoc{}
		if !getJSON(t, "http://"+addr+"/dashboard.json", &d) {
			return false
		}
		var kernelSeconds float64
		for _, k := range d.Kernels.Top {
			kernelSeconds += k.Seconds
		}
		var want float64
		for _, k := range tr.kernels {
			want += float64(k.n) * float64(k.dur) / 1e9
		}
		return d.Totals.Requests+d.Totals.Errors == int64(total) && d.Totals.Errors == int64(failed) &&
			d.Timeline.Requests == total && len(d.GPUs) == 1 && kernelSeconds >= want-1e-9 && len(d.Latency["itl"]) > 0
	}, 60*time.Second, 200*time.Millisecond, "the dashboard never showed the traffic\n%s", c.Output())
	return d
}
