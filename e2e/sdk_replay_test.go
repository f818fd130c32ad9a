// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	otellog "go.opentelemetry.io/otel/log"
	otelmetric "go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// The replays below send telemetry built in the shapes of the
// instrumentations (privacytest's builders, shared with the processors'
// tests) through the OpenTelemetry Go SDK: each span, record or point goes
// through the SDK's API, so what reaches the collector is the SDK's own
// encoding (its ids, its resource, its batching), not hand-marshalled bytes.

// sdkValue is v as an attribute value; the Go SDK carries maps and slices
// of any value, as OTLP does.
func sdkValue(v pcommon.Value) attribute.Value {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return attribute.StringValue(v.Str())
	case pcommon.ValueTypeInt:
		return attribute.Int64Value(v.Int())
	case pcommon.ValueTypeDouble:
		return attribute.Float64Value(v.Double())
	case pcommon.ValueTypeBool:
		return attribute.BoolValue(v.Bool())
	case pcommon.ValueTypeBytes:
		return attribute.ByteSliceValue(v.Bytes().AsRaw())
	case pcommon.ValueTypeMap:
		return attribute.MapValue(sdkAttrs(v.Map())...)
	case pcommon.ValueTypeSlice:
		vals := make([]attribute.Value, 0, v.Slice().Len())
		for _, e := range v.Slice().All() {
			vals = append(vals, sdkValue(e))
		}
		return attribute.SliceValue(vals...)
	default:
		return attribute.Value{}
	}
}

func sdkAttrs(m pcommon.Map) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, m.Len())
	for k, v := range m.All() {
		out = append(out, attribute.KeyValue{Key: attribute.Key(k), Value: sdkValue(v)})
	}
	return out
}

// sdkSendTraces sends td's spans with one Go SDK tracer per resource over
// OTLP/HTTP (sdkRecordSpans) and requires the collector to accept every
// export.
func sdkSendTraces(t *testing.T, addr string, td ptrace.Traces) {
	t.Helper()
	for _, rs := range td.ResourceSpans().All() {
		tp := e2etest.NewSDKTracer(t, e2etest.SDKOptions{Endpoint: addr, HTTP: true, Resource: sdkAttrs(rs.Resource().Attributes())})
		for _, ss := range rs.ScopeSpans().All() {
			sdkRecordSpans(t.Context(), tp, ss)
		}
		require.NoError(t, tp.FlushErr(t.Context()), "the collector refused the SDK's spans")
	}
}

// sdkRecordSpans records ss's spans on tp, keeping names, kinds, times,
// attributes, events, status and parent links (the SDK draws new ids); they
// leave on tp's next flush.
func sdkRecordSpans(ctx context.Context, tp *e2etest.Tracer, ss ptrace.ScopeSpans) {
	tracer := tp.Tracer(ss.Scope().Name())
	started := map[pcommon.SpanID]trace.Span{}
	var order []ptrace.Span
	for _, s := range ss.Spans().All() {
		pctx := ctx
		if parent, ok := started[s.ParentSpanID()]; ok {
			pctx = trace.ContextWithSpan(ctx, parent)
		}
		_, span := tracer.Start(pctx, s.Name(), trace.WithSpanKind(trace.SpanKind(s.Kind())),
			trace.WithTimestamp(s.StartTimestamp().AsTime()), trace.WithAttributes(sdkAttrs(s.Attributes())...))
		for _, ev := range s.Events().All() {
			span.AddEvent(ev.Name(), trace.WithTimestamp(ev.Timestamp().AsTime()), trace.WithAttributes(sdkAttrs(ev.Attributes())...))
		}
		switch s.Status().Code() {
		case ptrace.StatusCodeError:
			span.SetStatus(codes.Error, s.Status().Message())
		case ptrace.StatusCodeOk:
			span.SetStatus(codes.Ok, "")
		}
		started[s.SpanID()] = span
		order = append(order, s)
	}
	for _, s := range order {
		started[s.SpanID()].End(trace.WithTimestamp(s.EndTimestamp().AsTime()))
	}
}

// sdkSendLogs emits ld's records with one Go SDK logger per resource over
// OTLP/HTTP (time, severity, event name, body, attributes) and requires the
// collector to accept every export.
func sdkSendLogs(t *testing.T, addr string, ld plog.Logs) {
	t.Helper()
	for _, rl := range ld.ResourceLogs().All() {
		lp := e2etest.NewSDKLogger(t, e2etest.SDKOptions{Endpoint: addr, HTTP: true, Resource: sdkAttrs(rl.Resource().Attributes())})
		for _, sl := range rl.ScopeLogs().All() {
			logger := lp.Logger(sl.Scope().Name())
			for _, lr := range sl.LogRecords().All() {
				var r otellog.Record
				r.SetTimestamp(lr.Timestamp().AsTime())
				r.SetSeverity(otellog.Severity(lr.SeverityNumber()))
				r.SetSeverityText(lr.SeverityText())
				r.SetEventName(lr.EventName())
				r.SetBody(sdkValue(lr.Body()))
				r.AddAttributes(sdkAttrs(lr.Attributes())...)
				logger.Emit(t.Context(), r)
			}
		}
		lp.Flush(t)
	}
}

// sdkSendGauges records md's gauges with one Go SDK meter per resource
// over OTLP/HTTP (the SDK stamps the times) and requires the collector to
// accept every export. Only gauges: the tests send nothing else this way.
func sdkSendGauges(t *testing.T, addr string, md pmetric.Metrics) {
	t.Helper()
	for _, rm := range md.ResourceMetrics().All() {
		mp := e2etest.NewSDKMeter(t, e2etest.SDKOptions{Endpoint: addr, HTTP: true, Resource: sdkAttrs(rm.Resource().Attributes())})
		for _, sm := range rm.ScopeMetrics().All() {
			meter := mp.Meter(sm.Scope().Name())
			for _, m := range sm.Metrics().All() {
				require.Equal(t, pmetric.MetricTypeGauge, m.Type(), "%s: sdkSendGauges sends gauges only", m.Name())
				g, err := meter.Float64Gauge(m.Name(), otelmetric.WithUnit(m.Unit()))
				require.NoError(t, err)
				for _, dp := range m.Gauge().DataPoints().All() {
					v := dp.DoubleValue()
					if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
						v = float64(dp.IntValue())
					}
					g.Record(t.Context(), v, otelmetric.WithAttributes(sdkAttrs(dp.Attributes())...))
				}
			}
		}
		require.NoError(t, mp.ForceFlush(t.Context()), "the collector refused the SDK's metrics")
	}
}

// TestSDKReplayKeepsContent: what the replays send is what the privacy
// test built, content included, as a real OTLP receiver decodes it, so a
// prompt the SDK dropped on the way cannot pass for one the privacy
// processor removed.
func TestSDKReplayKeepsContent(t *testing.T) {
	sink := e2etest.NewSink(t)
	start := time.Now().Add(-2 * time.Second)
	want := contentSpan(start)
	sdkSendTraces(t, sink.HTTPEndpoint, want)
	wantLogs := contentLogs()
	sdkSendLogs(t, sink.HTTPEndpoint, wantLogs)
	wantMetrics := contentMetrics()
	sdkSendGauges(t, sink.HTTPEndpoint, wantMetrics)
	require.Eventually(t, func() bool {
		return sink.Traces.SpanCount() == want.SpanCount() && sink.Logs.LogRecordCount() == wantLogs.LogRecordCount() &&
			sink.Metrics.DataPointCount() == wantMetrics.DataPointCount()
	}, 10*time.Second, 20*time.Millisecond, "the sink got every span, record and point")

	type spanView struct {
		Resource, Attributes map[string]any
		Kind, Status, Parent string
		Start, End           time.Time
		Events               []map[string]any
	}
	view := func(tds ...ptrace.Traces) map[string]spanView {
		out := map[string]spanView{}
		for _, td := range tds {
			for _, rs := range td.ResourceSpans().All() {
				names := map[pcommon.SpanID]string{}
				for _, ss := range rs.ScopeSpans().All() {
					for _, s := range ss.Spans().All() {
						names[s.SpanID()] = s.Name()
					}
				}
				res := rs.Resource().Attributes().AsRaw()
				for k := range res {
					if strings.HasPrefix(k, "telemetry.sdk.") {
						delete(res, k) // the SDK's own
					}
				}
				for _, ss := range rs.ScopeSpans().All() {
					for _, s := range ss.Spans().All() {
						v := spanView{Resource: res, Attributes: s.Attributes().AsRaw(), Kind: s.Kind().String(),
							Status: s.Status().Code().String() + ": " + s.Status().Message(), Parent: names[s.ParentSpanID()],
							Start: s.StartTimestamp().AsTime(), End: s.EndTimestamp().AsTime()}
						for _, ev := range s.Events().All() {
							v.Events = append(v.Events, map[string]any{"name": ev.Name(), "attributes": ev.Attributes().AsRaw()})
						}
						out[s.Name()] = v
					}
				}
			}
		}
		return out
	}
	got := view(sink.Traces.AllTraces()...)
	for name, w := range view(want) {
		require.Contains(t, got, name)
		assert.Equal(t, w, got[name], "span %s", name)
	}

	type logView struct {
		Body, Attributes map[string]any
		Event, Severity  string
		Time             time.Time
	}
	logs := func(lds ...plog.Logs) []logView {
		var out []logView
		for _, ld := range lds {
			for _, rl := range ld.ResourceLogs().All() {
				for _, sl := range rl.ScopeLogs().All() {
					for _, lr := range sl.LogRecords().All() {
						out = append(out, logView{Body: map[string]any{"body": lr.Body().AsRaw()}, Attributes: lr.Attributes().AsRaw(),
							Event: lr.EventName(), Severity: lr.SeverityNumber().String() + " " + lr.SeverityText(), Time: lr.Timestamp().AsTime()})
					}
				}
			}
		}
		return out
	}
	assert.Equal(t, logs(wantLogs), logs(sink.Logs.AllLogs()...))

	points := func(mds ...pmetric.Metrics) []map[string]any {
		var out []map[string]any
		for _, md := range mds {
			for _, rm := range md.ResourceMetrics().All() {
				res := rm.Resource().Attributes().AsRaw()
				for k := range res {
					if strings.HasPrefix(k, "telemetry.sdk.") {
						delete(res, k)
					}
				}
				for _, sm := range rm.ScopeMetrics().All() {
					for _, m := range sm.Metrics().All() {
						for _, dp := range m.Gauge().DataPoints().All() {
							out = append(out, map[string]any{"resource": res, "name": m.Name(), "value": dp.DoubleValue(), "attributes": dp.Attributes().AsRaw()})
						}
					}
				}
			}
		}
		return out
	}
	assert.Equal(t, points(wantMetrics), points(sink.Metrics.AllMetrics()...))
}
