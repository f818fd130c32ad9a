// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// procCPU is a process's user plus system CPU time from /proc/<pid>/stat.
func procCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(tb, err)
	// Fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, err := strconv.ParseInt(f[11], 10, 64)
	require.NoError(tb, err)
	stime, err := strconv.ParseInt(f[12], 10, 64)
	require.NoError(tb, err)
	const ticks = 100 // USER_HZ, 100 on Linux
	return time.Duration(utime+stime) * time.Second / ticks
}

// buildBenchClient compiles native/cupti/bench/bench_client.c, the engine
// end: the library's own encoder and non-blocking transport.
func buildBenchClient(tb testing.TB) string {
	tb.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		tb.Skip("gcc is needed to build the C benchmark client")
	}
	native := filepath.Join(e2etest.RepoRoot(), "native", "cupti")
	bin := filepath.Join(tb.TempDir(), "bench_client")
	out, err := exec.Command(cc, "-std=gnu11", "-O2", "-pthread", "-o", bin,
		filepath.Join(native, "bench", "bench_client.c"), filepath.Join(native, "ipc_client.c")).CombinedOutput()
	require.NoError(tb, err, "%s", out)
	return bin
}

// BenchmarkCUPTIEndToEnd streams kernel records from the C client (the
// injection library's encoder and transport) to the cupti receiver of the
// built collector, at fixed rates, and reports what was dropped and what
// the collector's CPU cost per million records was. One op is one run of
// cuptiBenchSeconds. It needs the built binary (make build; INFERPROF_BIN).
func BenchmarkCUPTIEndToEnd(b *testing.B) {
	client := buildBenchClient(b)
	seconds := 2.0
	if v, err := strconv.ParseFloat(os.Getenv("CUPTI_BENCH_SECONDS"), 64); err == nil && v > 0 {
		seconds = v
	}
	for _, rate := range []float64{0.5e6, 1e6, 2e6, 4e6, 8e6} {
		b.Run(fmt.Sprintf("rate=%gM", rate/1e6), func(b *testing.B) {
			ports := e2etest.NewPorts(b)
			sockDir, err := os.MkdirTemp("", "cuptibench")
			require.NoError(b, err)
			b.Cleanup(func() { _ = os.RemoveAll(sockDir) })
			sock := filepath.Join(sockDir, "run", "cupti.sock")
			cfg := e2etest.Render(b, ports, b.TempDir(), fmt.Sprintf(`
receivers:
  cupti:
    endpoint: %s
    collection_interval: 1s
exporters:
  debug:
    verbosity: basic
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
      exporters: [debug]
`, sock))
			col := e2etest.Start(b, e2etest.Options{Config: cfg})
			// client=before is the transport as it was: the system's socket
			// buffer (net.core.wmem_default, 208 KiB here) and a batch dropped
			// whenever the socket is full. client=now is the library: a 4 MiB
			// backlog and a 4 MiB socket buffer (INFERPROF_CUPTI_SNDBUF_KB, capped
			// by net.core.wmem_max); client=now_small_sndbuf is the library where
			// wmem_max keeps the socket buffer at the default.
			for _, sb := range []struct {
				name            string
				sndbuf, backlog int
			}{{"before", 0, 0}, {"now_small_sndbuf", 0, -1}, {"now", 4096, -1}} {
				b.Run("client="+sb.name, func(b *testing.B) {
					var sent, dropped, received, cpu float64
					var sendTime time.Duration
					for b.Loop() {
						before, _ := promValue(ports.Port("telemetry"), "otelcol_receiver_cupti_records")
						cpu0 := procCPU(b, col.PID())
						out, err := exec.Command(client, "--connect", sock, "--rate", strconv.FormatFloat(rate, 'f', 0, 64),
							"--seconds", strconv.FormatFloat(seconds, 'f', -1, 64), "--sndbuf-kb", strconv.Itoa(sb.sndbuf), "--backlog-kb", strconv.Itoa(sb.backlog)).CombinedOutput()
						require.NoError(b, err, "%s", out)
						var s, d int64
						var secs float64
						_, err = fmt.Sscanf(strings.TrimSpace(string(out)), "sent=%d dropped=%d seconds=%g", &s, &d, &secs)
						require.NoError(b, err, "%s", out)
						// Everything the client did not drop reaches the aggregator.
						want := before + float64(s-d)
						var got float64
						require.Eventually(b, func() bool {
							got, _ = promValue(ports.Port("telemetry"), "otelcol_receiver_cupti_records")
							return got >= want
						}, 60*time.Second, 20*time.Millisecond, "records received (the counter moves at each 1 s flush)")
						require.InDelta(b, want, got, 0, "records received")
						sendTime += time.Duration(secs * float64(time.Second))
						cpu += (procCPU(b, col.PID()) - cpu0).Seconds()
						sent += float64(s)
						dropped += float64(d)
						received += got - before
					}
					b.ReportMetric(100*dropped/sent, "dropped-%")
					b.ReportMetric(1000*cpu/(received/1e6), "receiver-cpu-ms/Mrec")
					b.ReportMetric(received/sendTime.Seconds(), "records/s")
				})
			}
			col.Stop()
		})
	}
}
