// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignalexporter // import "github.com/inferprof/inferprof/exporter/graphsignalexporter"

import (
	"context"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"
	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
	"github.com/inferprof/inferprof/internal/sharedcomponent"
)

// logsExporter feeds the local store, then hands the logs to
// exporterhelper's queue.
type logsExporter struct {
	lifecycle
	inner exporter.Logs
}

func newLogsExporter(sc *sharedcomponent.Component[*shared], set exporter.Settings) (*logsExporter, error) {
	s := sc.Unwrap()
	e := &logsExporter{}
	e.s, e.sc = s, sc
	if s.up != nil {
		inner, err := exporterhelper.NewLogs(context.Background(), set, s.cfg, e.push, helperOptions(s.cfg)...)
		if err != nil {
			return nil, err
		}
		e.inner = inner
		e.lifecycle.inner = inner
	}
	return e, nil
}

// Capabilities are exporterhelper's when uploading: with batching on, its
// batcher merges requests in place, so the fan-out must give this exporter
// its own copy of data other exporters also read.
func (e *logsExporter) Capabilities() consumer.Capabilities {
	if e.inner != nil {
		return e.inner.Capabilities()
	}
	return consumer.Capabilities{MutatesData: false}
}

func (e *logsExporter) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	// Encode for the local store before queueing: after that, ld is the
	// queue's.
	var req *encodedLogs
	if e.s.store != nil {
		r, st := e.s.enc.Logs(ld)
		req = &encodedLogs{req: r, st: st}
	}
	if e.inner != nil {
		if err := e.inner.ConsumeLogs(ctx, ld); err != nil {
			return err
		}
	}
	if req != nil {
		e.s.record(ctx, req.st)
		e.s.store.Apply(req.req)
	}
	return nil
}

type encodedLogs struct {
	req *signalsv1.UploadRequest
	st  encode.Stats
}

func (e *logsExporter) push(ctx context.Context, ld plog.Logs) error {
	req, st := e.s.enc.Logs(ld)
	if e.s.store == nil {
		e.s.record(ctx, st)
	}
	if len(req.LogBatches) == 0 {
		return nil
	}
	return e.s.up.send(ctx, ingestPath, req, ld.LogRecordCount())
}
