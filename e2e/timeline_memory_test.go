// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// vmHWM is the peak resident set of process pid, in bytes
// (/proc/<pid>/status VmHWM).
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// kernelSpans is a batch of n sampled kernel spans, the timeline's cheapest
// and most numerous records, ending before now. Hand-built: they are the
// cupti receiver's records, made inside a collector, which no SDK sends.
func kernelSpans(n, seq int, now time.Time) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("host.name", "gpu-node-1")
	rs.Resource().Attributes().PutStr("hw.id", "GPU-0")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	spans.EnsureCapacity(n)
	for i := range n {
		sp := spans.AppendEmpty()
		sp.SetName("kernel")
		id := uint64(seq*n + i + 1)
		sp.SetTraceID(pcommon.TraceID{1, byte(id >> 32), byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)})
		sp.SetSpanID(pcommon.SpanID{2, byte(id >> 32), byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)})
		start := now.Add(-time.Minute).Add(time.Duration(id) * time.Microsecond)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(5 * time.Microsecond)))
		sp.Attributes().PutStr("gpu.kernel.name", "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn_"+strconv.Itoa(i%50))
		sp.Attributes().PutStr("gpu.kernel.category", "gemm")
		sp.Attributes().PutInt("cuda.stream.id", int64(7+i%4))
	}
	return td
}

const timelineMemoryConfig = `
receivers:
  otlp:
    protocols:
      http:
        endpoint: {{addr "otlp_http"}}
exporters:
  inferprof_ui:
    endpoint: {{addr "ui"}}
    timeline:
      memory_limit_mib: 16
      max_age: 1h
      max_response_mib: 8
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [inferprof_ui]
`

// TestParallelTimelineReadsBoundMemory: with the timeline store full, eight
// GET /timeline?last=24h at once, while spans keep arriving, raise the
// collector's peak RSS by a bounded amount: renders run one at a time (the
// others wait or get 503 with Retry-After), each streams and stops at
// max_response_mib with truncated set. On main each read built its whole
// document in memory, all eight at once (issue #30: 0.92 to 5.79 GB).
func TestParallelTimelineReadsBoundMemory(t *testing.T) {
	ports := e2etest.NewPorts(t)
	c := e2etest.Start(t, e2etest.Options{Config: e2etest.Render(t, ports, t.TempDir(), timelineMemoryConfig)})
	otlp, local := ports.Addr("otlp_http"), ports.Addr("ui")
	now := time.Now()
	const batch = 5000
	seq := 0
	for ; seq < 30; seq++ { // 150,000 kernels: past the 16 MiB store's ~95,000
		postTraces(t, otlp, kernelSpans(batch, seq, now))
	}
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + local + "/timeline?last=24h")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var tr struct {
			OtherData map[string]any `json:"otherData"`
		}
		if json.NewDecoder(resp.Body).Decode(&tr) != nil {
			return false
		}
		k, _ := tr.OtherData["kernels"].(float64)
		return k > 80_000
	}, 60*time.Second, 200*time.Millisecond, "the timeline store never filled")
	before := vmHWM(t, c.PID())

	// Load: spans keep arriving during the reads.
	stop := make(chan struct{})
	var load sync.WaitGroup
	load.Go(func() {
		for i := seq; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			b, err := ptraceotlp.NewExportRequestFromTraces(kernelSpans(1000, i, now)).MarshalProto()
			if err != nil {
				return
			}
			if resp, err := http.Post("http://"+otlp+"/v1/traces", "application/x-protobuf", bytes.NewReader(b)); err == nil {
				resp.Body.Close()
			}
		}
	})

	type result struct {
		status    int
		truncated bool
		size      int
		retry     string
	}
	results := make(chan result, 8)
	var reads sync.WaitGroup
	for range 8 {
		reads.Go(func() {
			resp, err := http.Get("http://" + local + "/timeline?last=24h")
			if err != nil {
				results <- result{}
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			r := result{status: resp.StatusCode, size: len(body), retry: resp.Header.Get("Retry-After")}
			if resp.StatusCode == http.StatusOK {
				var tr struct {
					OtherData map[string]any `json:"otherData"`
				}
				if json.Unmarshal(body, &tr) == nil {
					r.truncated, _ = tr.OtherData["truncated"].(bool)
				}
			}
			results <- r
		})
	}
	reads.Wait()
	close(stop)
	load.Wait()
	close(results)
	after := vmHWM(t, c.PID())

	ok := 0
	for r := range results {
		switch r.status {
		case http.StatusOK:
			ok++
			assert.True(t, r.truncated, "the full store is more than max_response_mib: the response says it was cut")
			assert.LessOrEqual(t, r.size, 8<<20+64<<10, "a response stops at max_response_mib")
		case http.StatusServiceUnavailable:
			assert.NotEmpty(t, r.retry, "a 503 says when to retry")
		default:
			t.Errorf("GET /timeline: status %d", r.status)
		}
	}
	assert.Positive(t, ok, "at least one read is served")
	growth := after - before
	t.Logf("peak RSS %.0f MiB after filling the store, %.0f MiB after 8 parallel reads under load (+%.0f MiB); %d of 8 served",
		float64(before)/(1<<20), float64(after)/(1<<20), float64(growth)/(1<<20), ok)
	// One render at a time holds a copy of the window's records (up to the
	// 16 MiB budget) and its garbage; 96 MiB leaves room for the GC's
	// headroom and the load, and is far below eight whole documents.
	assert.Less(t, growth, int64(96<<20), "parallel reads raised the peak RSS by %d MiB", growth>>20)
	c.Stop()
}
