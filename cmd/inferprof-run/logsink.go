// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	"google.golang.org/grpc/grpclog"
)

// Names on the records (docs/names.md).
const (
	attrErrorKind   = "inferprof.engine.error.kind"
	attrExitSignal  = "inferprof.engine.exit.signal"
	attrDropped     = "inferprof.engine.errors.dropped"
	attrSkipped     = "inferprof.engine.output.skipped_chunks"
	attrExitCode    = "process.exit.code"
	attrExcType     = "exception.type"
	attrCodeFile    = "code.file.path"
	attrCodeLine    = "code.line.number"
	attrIOStream    = "log.iostream"
	scopeName       = "github.com/inferprof/inferprof/cmd/inferprof-run"
	logsRate        = 10  // records a second, sustained
	logsBurst       = 100 // records at once
	logsQueue       = 512 // records waiting for the exporter; the oldest go first
	logsTimeout     = 2 * time.Second
	logsFlushWindow = time.Second // the longest the launcher waits to send at exit
)

// logSink sends events as OTLP log records through the OpenTelemetry SDK's
// batch processor, which holds them in memory only and never blocks the
// caller: when the collector is dead or slow, its queue drops the oldest.
// Before that, a token bucket bounds how many a crash loop can send.
type logSink struct {
	provider *sdklog.LoggerProvider
	logger   otellog.Logger

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	now     func() time.Time
	dropped atomic.Uint64
}

// newLogSink dials nothing yet: gRPC connects in the background, so a
// collector that is not up costs the engine nothing.
func newLogSink(endpoint string, insecure bool, res *resource.Resource) (*logSink, error) {
	// The SDK reports export failures on the standard logger, which is
	// stderr: the engine's stream. Records lost to a dead collector are
	// the queue's to drop, quietly.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	otel.SetLogger(logr.Discard())
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, io.Discard))
	opts := []otlploggrpc.Option{
		otlploggrpc.WithEndpoint(endpoint),
		otlploggrpc.WithTimeout(logsTimeout),
		otlploggrpc.WithRetry(otlploggrpc.RetryConfig{
			Enabled: true, InitialInterval: 500 * time.Millisecond,
			MaxInterval: 2 * time.Second, MaxElapsedTime: 10 * time.Second,
		}),
	}
	if insecure {
		opts = append(opts, otlploggrpc.WithInsecure())
	}
	exp, err := otlploggrpc.New(context.Background(), opts...)
	if err != nil {
		return nil, err
	}
	bp := sdklog.NewBatchProcessor(exp,
		sdklog.WithMaxQueueSize(logsQueue),
		sdklog.WithExportInterval(200*time.Millisecond),
		sdklog.WithExportTimeout(logsTimeout))
	lp := sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(bp))
	return &logSink{provider: lp, logger: lp.Logger(scopeName), tokens: logsBurst, now: time.Now}, nil
}

// allow takes a token, refilled at logsRate a second up to logsBurst.
func (s *logSink) allow() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if !s.last.IsZero() {
		s.tokens = min(logsBurst, s.tokens+now.Sub(s.last).Seconds()*logsRate)
	}
	s.last = now
	if s.tokens < 1 {
		return false
	}
	s.tokens--
	return true
}

func (s *logSink) emit(ev event) {
	if !s.allow() {
		s.dropped.Add(1)
		return
	}
	s.send(ev, nil)
}

// final sends the exit record, past the rate limit, with the count of
// records the limit dropped.
func (s *logSink) final(ev event, extra ...attribute.KeyValue) {
	extra = append(extra, attribute.Int64(attrDropped, int64(s.dropped.Load())))
	s.send(ev, extra)
}

func (s *logSink) send(ev event, extra []attribute.KeyValue) {
	var r otellog.Record
	now := time.Now()
	r.SetTimestamp(now)
	r.SetObservedTimestamp(now)
	r.SetSeverity(otellog.Severity(ev.severity))
	r.SetSeverityText(severityText(ev.severity))
	r.SetBody(attribute.StringValue(ev.body))
	r.AddAttributes(attribute.String(attrErrorKind, ev.kind))
	if ev.stream != "" {
		r.AddAttributes(attribute.String(attrIOStream, ev.stream))
	}
	if ev.excType != "" {
		r.AddAttributes(attribute.String(attrExcType, ev.excType))
	}
	if ev.file != "" {
		r.AddAttributes(attribute.String(attrCodeFile, ev.file), attribute.Int(attrCodeLine, ev.line))
	}
	r.AddAttributes(extra...)
	s.logger.Emit(context.Background(), r)
}

// shutdown sends what is queued, waiting at most logsFlushWindow.
func (s *logSink) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), logsFlushWindow)
	defer cancel()
	_ = s.provider.Shutdown(ctx)
}

func severityText(n int) string {
	switch {
	case n >= sevFatal:
		return "CRITICAL"
	case n >= sevError:
		return "ERROR"
	case n >= sevWarn:
		return "WARNING"
	}
	return "INFO"
}

// engineResource is the engine's own resource: the OTEL_RESOURCE_ATTRIBUTES
// and OTEL_SERVICE_NAME inferprof-run gave it (service.instance.id and
// inferprof.model.name included), its pid and the host, so its error
// records join its spans and steps.
func engineResource(vars map[string]string, pid int) *resource.Resource {
	var kvs []attribute.KeyValue
	seen := map[string]int{}
	add := func(k, v string) {
		if i, ok := seen[k]; ok {
			kvs[i] = attribute.String(k, v)
			return
		}
		seen[k] = len(kvs)
		kvs = append(kvs, attribute.String(k, v))
	}
	for _, item := range strings.Split(vars[envResourceAttrs], ",") {
		k, _, ok := strings.Cut(item, "=")
		if k = strings.TrimSpace(k); ok && k != "" {
			add(k, resourceAttribute(item, k))
		}
	}
	if name := vars[envServiceName]; name != "" {
		add("service.name", name)
	}
	if h, err := os.Hostname(); err == nil {
		if _, ok := seen["host.name"]; !ok {
			add("host.name", h)
		}
	}
	kvs = append(kvs, attribute.Int("process.pid", pid))
	return resource.NewSchemaless(kvs...)
}

// logsTarget is where the records go: -logs-endpoint, else the standard
// OTLP logs variable, else the engine's traces endpoint (the collector's
// OTLP gRPC receiver), else the shipped configs' 127.0.0.1:4317. A
// loopback or http:// endpoint is plaintext, as the shipped receiver.
func logsTarget(o options, args []string, vars map[string]string) (endpoint string, insecure bool) {
	ep := o.logsEndpoint
	if ep == "" {
		ep = vars["OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"]
	}
	if ep == "" {
		ep, _ = tracesEndpoint(args, vars)
	}
	if ep == "" {
		ep = "127.0.0.1:4317"
	}
	scheme, host := splitEndpoint(ep)
	hp, _, _ := strings.Cut(hostPort(ep), "/")
	return hp, scheme == "http" || (scheme != "https" && isLoopback(host))
}
