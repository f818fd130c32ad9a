// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2etest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Sink is a real OTLP/gRPC server on loopback that keeps what the collector
// under test exports to it. It is core's otlp receiver feeding test sinks.
type Sink struct {
	Endpoint     string // OTLP/gRPC
	HTTPEndpoint string // OTLP/HTTP
	Traces       *consumertest.TracesSink
	Metrics      *consumertest.MetricsSink
	Logs         *consumertest.LogsSink
}

// NewSink starts a sink on a free loopback port; it stops when the test ends.
func NewSink(tb testing.TB) *Sink {
	tb.Helper()
	s := &Sink{
		Endpoint:     "127.0.0.1:" + itoa(FreePort(tb)),
		HTTPEndpoint: "127.0.0.1:" + itoa(FreePort(tb)),
		Traces:       new(consumertest.TracesSink),
		Metrics:      new(consumertest.MetricsSink),
		Logs:         new(consumertest.LogsSink),
	}
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.GRPC.GetOrInsertDefault().NetAddr.Endpoint = s.Endpoint
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = s.HTTPEndpoint
	set := receivertest.NewNopSettings(f.Type())
	ctx := context.Background()
	// The otlp receiver shares one server per config across signals.
	tr, err := f.CreateTraces(ctx, set, cfg, s.Traces)
	require.NoError(tb, err)
	mr, err := f.CreateMetrics(ctx, set, cfg, s.Metrics)
	require.NoError(tb, err)
	lr, err := f.CreateLogs(ctx, set, cfg, s.Logs)
	require.NoError(tb, err)
	host := componenttest.NewNopHost()
	require.NoError(tb, tr.Start(ctx, host))
	require.NoError(tb, mr.Start(ctx, host))
	require.NoError(tb, lr.Start(ctx, host))
	tb.Cleanup(func() {
		require.NoError(tb, tr.Shutdown(context.Background()))
		require.NoError(tb, mr.Shutdown(context.Background()))
		require.NoError(tb, lr.Shutdown(context.Background()))
	})
	return s
}

// SpanSpec describes one span to send, with explicit timestamps so that tests
// can compute what must come out.
type SpanSpec struct {
	Name       string
	Kind       trace.SpanKind
	Start, End time.Time
	Attributes []attribute.KeyValue
	Error      string // non-empty sets status Error with this description
	Children   []SpanSpec
}

// Tracer sends spans over OTLP/gRPC with the OpenTelemetry Go SDK, the way
// vLLM's Python SDK does: a BatchSpanProcessor and the gRPC exporter.
type Tracer struct {
	tp   *sdktrace.TracerProvider
	errs *exportErrors // NewSDKTracer's
}

// NewTracer returns a tracer exporting to endpoint (host:port) with the given
// resource attributes.
func NewTracer(tb testing.TB, endpoint string, res ...attribute.KeyValue) *Tracer {
	tb.Helper()
	exp, err := otlptracegrpc.New(context.Background(),
		otlptracegrpc.WithEndpoint(endpoint), otlptracegrpc.WithInsecure())
	require.NoError(tb, err)
	r := resource.NewWithAttributes("", res...)
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(r))
	t := &Tracer{tp: tp}
	tb.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return t
}

// Send records spec (and its children) in a new trace and returns the
// span context of its root.
func (t *Tracer) Send(ctx context.Context, scope string, spec SpanSpec) trace.SpanContext {
	return t.send(ctx, t.tp.Tracer(scope), spec)
}

func (t *Tracer) send(ctx context.Context, tr trace.Tracer, spec SpanSpec) trace.SpanContext {
	ctx, span := tr.Start(ctx, spec.Name, trace.WithTimestamp(spec.Start),
		trace.WithSpanKind(spec.Kind), trace.WithAttributes(spec.Attributes...))
	for _, c := range spec.Children {
		t.send(ctx, tr, c)
	}
	if spec.Error != "" {
		span.SetStatus(codes.Error, spec.Error)
	}
	span.End(trace.WithTimestamp(spec.End))
	return span.SpanContext()
}

// Tracer returns the provider's tracer for scope, for tests that build a
// trace span by span (spans of one trace from two processes' tracers).
func (t *Tracer) Tracer(scope string) trace.Tracer { return t.tp.Tracer(scope) }

// Flush exports everything recorded so far.
func (t *Tracer) Flush(tb testing.TB) {
	tb.Helper()
	require.NoError(tb, t.tp.ForceFlush(context.Background()))
}
