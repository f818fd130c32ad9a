// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2etest

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
)

// SDKOptions says how a test's OpenTelemetry Go SDK client sends: the way
// an engine or an application configures its OTLP exporter.
type SDKOptions struct {
	Endpoint string // host:port of the collector's OTLP listener
	HTTP     bool   // OTLP/HTTP protobuf (otlp*http); gRPC otherwise
	Gzip     bool   // the exporter's gzip compression (OTEL_EXPORTER_OTLP_COMPRESSION=gzip)
	// Resource attributes, over the SDK's own default resource
	// (telemetry.sdk.*), as an engine's SDK sets them.
	Resource []attribute.KeyValue
	// BatchSize is the most spans or log records one export carries (the
	// batch processors' max export batch size); 512, the SDK default, when 0.
	BatchSize int
}

// EngineResource is the resource an engine process puts on its signals:
// its service name, one instance id per process, and its pid.
func EngineResource(service, instance string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("service.name", service),
		attribute.String("service.instance.id", instance),
		attribute.Int("process.pid", os.Getpid()),
	}
}

func (o SDKOptions) resource(tb testing.TB) *resource.Resource {
	tb.Helper()
	r, err := resource.Merge(resource.Default(), resource.NewSchemaless(o.Resource...))
	require.NoError(tb, err)
	return r
}

func (o SDKOptions) batch() int {
	if o.BatchSize > 0 {
		return o.BatchSize
	}
	return 512
}

// exportErrors keeps every export error: the batch processors hand the
// errors of the exports they start themselves to the global handler.
type exportErrors struct {
	mu   sync.Mutex
	errs []error
	sent int
}

func (e *exportErrors) record(n int, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.errs = append(e.errs, err)
		return
	}
	e.sent += n
}

// take returns the errors since the last call.
func (e *exportErrors) take() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	err := errors.Join(e.errs...)
	e.errs = nil
	return err
}

func (e *exportErrors) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sent
}

// Logger sends log records with the Go SDK's BatchProcessor and its OTLP
// exporter, as an application's OpenTelemetry logging bridge does.
type Logger struct {
	lp   *sdklog.LoggerProvider
	errs *exportErrors
}

type logExporter struct {
	sdklog.Exporter
	errs *exportErrors
}

func (l logExporter) Export(ctx context.Context, records []sdklog.Record) error {
	err := l.Exporter.Export(ctx, records)
	l.errs.record(len(records), err)
	return err
}

// NewSDKLogger returns a logger provider exporting over OTLP/HTTP (the
// Go SDK's log exporters are otlploghttp and otlploggrpc; the tests that
// send logs use the collector's HTTP listener).
func NewSDKLogger(tb testing.TB, o SDKOptions) *Logger {
	tb.Helper()
	require.True(tb, o.HTTP, "NewSDKLogger: OTLP/HTTP only")
	opts := []otlploghttp.Option{otlploghttp.WithEndpoint(o.Endpoint), otlploghttp.WithInsecure()}
	if o.Gzip {
		opts = append(opts, otlploghttp.WithCompression(otlploghttp.GzipCompression))
	}
	exp, err := otlploghttp.New(context.Background(), opts...)
	require.NoError(tb, err)
	errs := &exportErrors{}
	bp := sdklog.NewBatchProcessor(logExporter{exp, errs},
		sdklog.WithExportMaxBatchSize(o.batch()), sdklog.WithMaxQueueSize(4*o.batch()),
		sdklog.WithExportInterval(time.Hour))
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(bp), sdklog.WithResource(o.resource(tb)))
	tb.Cleanup(func() { _ = lp.Shutdown(context.Background()) })
	return &Logger{lp: lp, errs: errs}
}

// Logger returns the provider's logger for scope.
func (l *Logger) Logger(scope string) otellog.Logger { return l.lp.Logger(scope) }

// Flush exports every record emitted so far and requires the collector to
// have accepted each export.
func (l *Logger) Flush(tb testing.TB) {
	tb.Helper()
	require.NoError(tb, errors.Join(l.lp.ForceFlush(context.Background()), l.errs.take()))
}

// NewSDKMeter returns a meter provider whose periodic reader exports only
// on ForceFlush (its interval is an hour), over OTLP/gRPC or HTTP.
func NewSDKMeter(tb testing.TB, o SDKOptions) *sdkmetric.MeterProvider {
	tb.Helper()
	ctx := context.Background()
	var exp sdkmetric.Exporter
	var err error
	if o.HTTP {
		opts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpoint(o.Endpoint), otlpmetrichttp.WithInsecure()}
		if o.Gzip {
			opts = append(opts, otlpmetrichttp.WithCompression(otlpmetrichttp.GzipCompression))
		}
		exp, err = otlpmetrichttp.New(ctx, opts...)
	} else {
		opts := []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpoint(o.Endpoint), otlpmetricgrpc.WithInsecure()}
		if o.Gzip {
			opts = append(opts, otlpmetricgrpc.WithCompressor("gzip"))
		}
		exp, err = otlpmetricgrpc.New(ctx, opts...)
	}
	require.NoError(tb, err)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(o.resource(tb)),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(time.Hour))))
	tb.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp
}
