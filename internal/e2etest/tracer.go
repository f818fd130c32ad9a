// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2etest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

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

type spanExporter struct {
	sdktrace.SpanExporter
	errs *exportErrors
}

func (s spanExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := s.SpanExporter.ExportSpans(ctx, spans)
	s.errs.record(len(spans), err)
	return err
}

// NewSDKTracer returns a tracer on the Go SDK's BatchSpanProcessor and its
// OTLP exporter (otlptracegrpc or otlptracehttp). The processor exports
// only on Flush or when a batch is full, and blocks rather than drops when
// its queue is full, so a test knows what each export held.
func NewSDKTracer(tb testing.TB, o SDKOptions) *Tracer {
	tb.Helper()
	ctx := context.Background()
	var exp sdktrace.SpanExporter
	var err error
	if o.HTTP {
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(o.Endpoint), otlptracehttp.WithInsecure()}
		if o.Gzip {
			opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	} else {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(o.Endpoint), otlptracegrpc.WithInsecure()}
		if o.Gzip {
			opts = append(opts, otlptracegrpc.WithCompressor("gzip"))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	}
	require.NoError(tb, err)
	errs := &exportErrors{}
	bsp := sdktrace.NewBatchSpanProcessor(spanExporter{exp, errs},
		sdktrace.WithMaxExportBatchSize(o.batch()), sdktrace.WithMaxQueueSize(4*o.batch()),
		sdktrace.WithBatchTimeout(time.Hour), sdktrace.WithBlocking())
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(bsp), sdktrace.WithResource(o.resource(tb)))
	tb.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &Tracer{tp: tp, errs: errs}
}

// FlushErr exports everything recorded so far and returns every export
// error since the last call (nil: the collector accepted each export).
func (t *Tracer) FlushErr(ctx context.Context) error {
	err := t.tp.ForceFlush(ctx)
	if t.errs != nil {
		err = errors.Join(err, t.errs.take())
	}
	return err
}

// Exported is how many spans the collector has accepted from this tracer
// (NewSDKTracer only).
func (t *Tracer) Exported() int {
	if t.errs == nil {
		return 0
	}
	return t.errs.count()
}
