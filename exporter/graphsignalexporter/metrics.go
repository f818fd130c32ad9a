// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignalexporter // import "github.com/inferprof/inferprof/exporter/graphsignalexporter"

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"
	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
	"github.com/inferprof/inferprof/internal/delta"
	"github.com/inferprof/inferprof/internal/sharedcomponent"
)

func helperOptions(cfg *Config) []exporterhelper.Option {
	return []exporterhelper.Option{
		// The http.Client from confighttp carries the per-attempt timeout.
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{Timeout: 0}),
		exporterhelper.WithRetry(cfg.RetryConfig),
		exporterhelper.WithQueue(cfg.QueueConfig),
	}
}

// metricsExporter turns metrics into deltas before the sending queue, so
// that what is queued, persisted and retried is exactly one upload's worth.
// It only reads the pipeline's data: the queue gets the converter's own
// copy, so the exporter does not mutate what other exporters share.
type metricsExporter struct {
	lifecycle
	conv  *delta.Converter
	inner exporter.Metrics
	// consumeMu makes convert, enqueue and commit one step: a batch the
	// queue refuses leaves the delta state as it was.
	consumeMu sync.Mutex
}

func newMetricsExporter(sc *sharedcomponent.Component[*shared], set exporter.Settings) (*metricsExporter, error) {
	s := sc.Unwrap()
	e := &metricsExporter{conv: delta.New(s.now(), s.now)}
	e.s, e.sc = s, sc
	if s.up != nil {
		inner, err := exporterhelper.NewMetrics(context.Background(), set, s.cfg, e.push, helperOptions(s.cfg)...)
		if err != nil {
			return nil, err
		}
		e.inner = inner
		e.lifecycle.inner = inner
	}
	return e, nil
}

func (*metricsExporter) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

func (e *metricsExporter) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	e.consumeMu.Lock()
	defer e.consumeMu.Unlock()
	out, tx, st := e.conv.Convert(md)
	if n := st.Unsupported + st.Overflow; n > 0 {
		e.s.tb.GraphsignalUnsupportedDatapoints.Add(ctx, int64(n))
	}
	if out.DataPointCount() == 0 {
		e.conv.Commit(tx)
		return nil
	}
	// Encode for the local store first: once queued, out belongs to the
	// queue and its batcher, which may move it into another request.
	var req *encodedMetrics
	if e.s.store != nil {
		r, est := e.s.enc.Metrics(out)
		req = &encodedMetrics{req: r, st: est}
		req.exp, req.badExp = e.s.enc.Exponential(out)
	}
	if e.inner != nil {
		if err := e.inner.ConsumeMetrics(ctx, out); err != nil {
			return err
		}
	}
	e.conv.Commit(tx)
	if req != nil {
		e.s.record(ctx, req.st)
		if n := e.s.store.Apply(req.req); n > 0 {
			e.s.tb.GraphsignalLocalDroppedSeries.Add(ctx, int64(n))
		}
		for _, p := range req.exp {
			e.s.store.ApplyExponential(p.Name, p.Tags, p.Hist)
		}
		if req.badExp > 0 {
			e.s.tb.GraphsignalUnsupportedDatapoints.Add(ctx, int64(req.badExp))
		}
	}
	return nil
}

type encodedMetrics struct {
	req    *signalsv1.UploadRequest
	st     encode.Stats
	exp    []encode.ExpPoint // exponential twins, for the local store only
	badExp int
}

// push runs after the queue: encode and upload one batch of deltas.
func (e *metricsExporter) push(ctx context.Context, md pmetric.Metrics) error {
	req, st := e.s.enc.Metrics(md)
	if e.s.store == nil {
		// With a local store, the same counts were recorded before the queue.
		e.s.record(ctx, st)
	}
	if len(req.Metrics) == 0 {
		return nil
	}
	return e.s.up.send(ctx, ingestPath, req, md.DataPointCount())
}
