// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
)

// otlpLogs is a real OTLP/gRPC logs server on loopback.
type otlpLogs struct {
	plogotlp.UnimplementedGRPCServer
	mu   sync.Mutex
	logs []plog.Logs
}

func (s *otlpLogs) Export(_ context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	ld := plog.NewLogs()
	req.Logs().CopyTo(ld)
	s.mu.Lock()
	s.logs = append(s.logs, ld)
	s.mu.Unlock()
	return plogotlp.NewExportResponse(), nil
}

func startOTLP(t testing.TB) (*otlpLogs, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	s := &otlpLogs{}
	plogotlp.RegisterGRPCServer(srv, s)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return s, ln.Addr().String()
}

type gotRecord struct {
	res   map[string]any
	attrs map[string]any
	body  string
	sev   plog.SeverityNumber
}

func (s *otlpLogs) records() (recs []gotRecord, raw string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all bytes.Buffer
	for _, ld := range s.logs {
		b, _ := (&plog.JSONMarshaler{}).MarshalLogs(ld)
		all.Write(b)
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					recs = append(recs, gotRecord{res: rl.Resource().Attributes().AsRaw(), attrs: lr.Attributes().AsRaw(), body: lr.Body().AsString(), sev: lr.SeverityNumber()})
				}
			}
		}
	}
	return recs, all.String()
}

func byKind(recs []gotRecord) map[string][]gotRecord {
	m := map[string][]gotRecord{}
	for _, r := range recs {
		k, _ := r.attrs[attrErrorKind].(string)
		m[k] = append(m[k], r)
	}
	return m
}

// fakeEngine logs the way vLLM does (its _FORMAT; NewLineFormatter's
// header on every line), logs a prompt at INFO as --enable-log-requests
// does, logs an exception whose message quotes the prompt, and dies of an
// uncaught CUDA OOM whose message quotes it too.
const fakeEngine = `import logging, os, sys
class F(logging.Formatter):
    def format(self, r):
        m = super().format(r)
        parts = m.split(r.message)
        return m.replace("\n", "\r\n" + parts[0])
h = logging.StreamHandler(sys.stdout)
h.setFormatter(F("(APIServer pid=%(process)d) %(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s", "%m-%d %H:%M:%S"))
log = logging.getLogger("vllm"); log.addHandler(h); log.setLevel(logging.INFO)
print("pid", os.getpid(), flush=True)
log.info("Received request cmpl-1: prompt: 'SECRET'")
try:
    raise ValueError("input 'SECRET' was rejected")
except ValueError:
    log.exception("Error in preprocessing prompt inputs: SECRET")
raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB while serving 'SECRET'")
`

func TestCaptureSendsErrorsNotPrompts(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	const prompt = "TURQUOISE-OTTER-PROMPT-0042"
	srv, addr := startOTLP(t)
	script := filepath.Join(t.TempDir(), "engine.py")
	require.NoError(t, os.WriteFile(script, []byte(strings.ReplaceAll(fakeEngine, "SECRET", prompt)), 0o600))
	cmd := exec.Command(launcherBin, "-quiet", "-no-hook", "-no-cupti", "-service-name", "vllm-test",
		"-logs-endpoint", addr, "python3", script)
	cmd.Env = append(os.Environ(), "OTEL_RESOURCE_ATTRIBUTES=inferprof.model.name=tiny")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	assert.Equal(t, 1, exitOf(t, err).ExitCode())
	assert.Contains(t, stdout.String(), prompt, "the engine's own output is unchanged")

	// The launcher flushes before it exits: everything is there now.
	recs, raw := srv.records()
	assert.NotContains(t, raw, prompt, "no prompt in any record, resource or attribute")
	assert.NotContains(t, raw, "Received request", "no INFO line")
	k := byKind(recs)
	require.Len(t, k[kindTraceback], 1, raw)
	require.Len(t, k[kindCUDAOOM], 1, raw)
	require.Len(t, k[kindExit], 1, raw)
	assert.Len(t, recs, 3, raw)

	tb := k[kindTraceback][0]
	assert.Equal(t, "ValueError", tb.attrs[attrExcType])
	assert.Equal(t, "engine.py", tb.attrs[attrCodeFile])
	assert.Equal(t, "stdout", tb.attrs[attrIOStream])
	assert.Equal(t, plog.SeverityNumberError, tb.sev)
	assert.Contains(t, tb.body, `File "`+script+`", line 13, in <module>`)

	oom := k[kindCUDAOOM][0]
	assert.Equal(t, "RuntimeError", oom.attrs[attrExcType])
	assert.Equal(t, "stderr", oom.attrs[attrIOStream])

	exit := k[kindExit][0]
	assert.Equal(t, int64(1), exit.attrs[attrExitCode])
	assert.Equal(t, "engine exited with code 1", exit.body)
	assert.Equal(t, plog.SeverityNumberError, exit.sev)

	pid, err := strconv.Atoi(strings.Fields(strings.SplitN(stdout.String(), "\n", 2)[0])[1])
	require.NoError(t, err)
	for _, r := range recs {
		assert.Equal(t, "vllm-test", r.res["service.name"])
		assert.Equal(t, "tiny", r.res["inferprof.model.name"])
		assert.NotEmpty(t, r.res["service.instance.id"])
		assert.Equal(t, int64(pid), r.res["process.pid"], "the engine's pid, not the launcher's")
	}
}

func TestCaptureKillAndBadFlag(t *testing.T) {
	t.Parallel()
	srv, addr := startOTLP(t)
	err := launcher(t, addr, nil, "kill -KILL $$").Run()
	require.Error(t, err)
	recs, raw := srv.records()
	k := byKind(recs)
	require.Len(t, k[kindSignal], 1, raw)
	assert.Equal(t, "SIGKILL", k[kindSignal][0].attrs[attrExitSignal])
	assert.Equal(t, "engine killed by signal SIGKILL (9)", k[kindSignal][0].body)

	srv2, addr2 := startOTLP(t)
	err = launcher(t, addr2, nil, `echo "usage: vllm serve [model_tag] [options]" >&2; echo "vllm serve: error: unrecognized arguments: --bogus" >&2; exit 2`).Run()
	assert.Equal(t, 2, exitOf(t, err).ExitCode())
	recs, raw = srv2.records()
	k = byKind(recs)
	require.Len(t, k[kindArgument], 1, raw)
	assert.Equal(t, "vllm serve: error: unrecognized arguments: --bogus", k[kindArgument][0].body)
	assert.Equal(t, int64(2), k[kindExit][0].attrs[attrExitCode])
}

// TestCaptureStoppedOnRequest: a signal the launcher forwarded is a stop,
// a warning, not an error.
func TestCaptureStoppedOnRequest(t *testing.T) {
	t.Parallel()
	srv, addr := startOTLP(t)
	cmd := launcher(t, addr, nil, "echo ready; while :; do sleep 0.05; done")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	b := make([]byte, 6)
	_, err = out.Read(b)
	require.NoError(t, err)
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	require.Error(t, cmd.Wait())
	recs, raw := srv.records()
	sig := byKind(recs)[kindSignal]
	require.Len(t, sig, 1, raw)
	assert.Equal(t, plog.SeverityNumberWarn, sig[0].sev)
	assert.Contains(t, sig[0].body, "forwarded")
}

// TestCaptureDeadCollector: a collector that accepts connections and never
// answers. The engine's output still flows in full, the exit code is its
// own, and the launcher ends within its flush window.
func TestCaptureDeadCollector(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // never read, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	const n = 20000
	script := `i=0; while [ $i -lt ` + strconv.Itoa(n) + ` ]; do echo "(APIServer pid=1) ERROR 12-01 10:00:00 [x.py:1] failure $i"; i=$((i+1)); done; echo END; exit 3`
	cmd := launcher(t, ln.Addr().String(), nil, script)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	start := time.Now()
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		assert.Equal(t, 3, exitOf(t, err).ExitCode())
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the launcher hung on a collector that never answers")
	}
	assert.Equal(t, n+1, strings.Count(stdout.String(), "\n"))
	assert.True(t, strings.HasSuffix(stdout.String(), "END\n"))
	t.Logf("%d error lines through a dead collector in %v", n, time.Since(start))
}

func TestLogSinkRateLimit(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	s := &logSink{tokens: logsBurst, now: func() time.Time { return now }}
	allowed := 0
	for range 3 * logsBurst {
		if s.allow() {
			allowed++
		}
	}
	assert.Equal(t, logsBurst, allowed, "a burst passes up to logsBurst")
	now = now.Add(time.Second)
	allowed = 0
	for range 3 * logsBurst {
		if s.allow() {
			allowed++
		}
	}
	assert.Equal(t, logsRate, allowed, "then logsRate a second")
}

func TestEngineResource(t *testing.T) {
	t.Parallel()
	res := engineResource(map[string]string{
		envResourceAttrs: "service.instance.id=abc, inferprof.model.name=m%20x,k8s.pod.name=p",
		envServiceName:   "vllm",
	}, 42)
	got := map[string]any{}
	for _, kv := range res.Attributes() {
		got[string(kv.Key)] = kv.Value.AsInterface()
	}
	assert.Equal(t, "abc", got["service.instance.id"])
	assert.Equal(t, "m x", got["inferprof.model.name"])
	assert.Equal(t, "p", got["k8s.pod.name"])
	assert.Equal(t, "vllm", got["service.name"])
	assert.Equal(t, int64(42), got["process.pid"])
	assert.NotEmpty(t, got["host.name"])
}

func TestLogsTarget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flag     string
		args     []string
		vars     map[string]string
		ep       string
		insecure bool
	}{
		{ep: "127.0.0.1:4317", insecure: true},
		{args: []string{"vllm", "serve", "m", "--otlp-traces-endpoint", "http://localhost:5317"}, ep: "localhost:5317", insecure: true},
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "https://col:4317"}, ep: "col:4317"},
		{flag: "collector.svc:4317", ep: "collector.svc:4317"},
		{flag: "http://collector.svc:4317/", ep: "collector.svc:4317", insecure: true},
	} {
		ep, insecure := logsTarget(options{logsEndpoint: tc.flag}, tc.args, tc.vars)
		assert.Equal(t, tc.ep, ep)
		assert.Equal(t, tc.insecure, insecure, tc.ep)
	}
}
