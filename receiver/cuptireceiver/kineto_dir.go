// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver // import "github.com/inferprof/inferprof/receiver/cuptireceiver"

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto"
)

// scanKineto reads trace files whose size and modification time held still
// since the previous scan, so a file still being written is left alone.
func (r *cuptiReceiver) scanKineto(ctx context.Context) {
	dir := r.cfg.Kineto.Directory
	if dir == "" {
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		r.badLog.Warn("cannot read kineto.directory", zap.String("directory", dir), zap.Error(err))
		return
	}
	var paths []string
	for _, e := range entries {
		n := e.Name()
		if e.Type().IsRegular() && (strings.HasSuffix(n, ".json") || strings.HasSuffix(n, ".json.gz")) {
			paths = append(paths, filepath.Join(dir, n))
		}
	}
	sort.Strings(paths)
	present := make(map[string]struct{}, len(paths))
	for _, p := range paths {
		present[p] = struct{}{}
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		prev, seen := r.files[p]
		cur := fileState{size: fi.Size(), mtime: fi.ModTime()}
		switch {
		case seen && prev.done && prev.size == cur.size && prev.mtime.Equal(cur.mtime):
			continue
		case !seen || prev.size != cur.size || !prev.mtime.Equal(cur.mtime):
			if len(r.files) < maxTrackedFiles || seen {
				r.files[p] = cur
			} else {
				r.tb.ReceiverCuptiUntrackedTraceFiles.Add(ctx, 1)
			}
			continue
		}
		cur.done = true
		r.files[p] = cur
		r.readTrace(ctx, p)
		r.saveKinetoFiles(ctx)
		if ctx.Err() != nil {
			return
		}
	}
	removed := false
	for p := range r.files {
		if _, ok := present[p]; !ok {
			delete(r.files, p)
			removed = true
		}
	}
	if removed {
		r.saveKinetoFiles(ctx)
	}
}

func (r *cuptiReceiver) readTrace(ctx context.Context, path string) {
	lim := kineto.DefaultLimits
	if r.nextTraces != nil {
		lim.StepEvents = kineto.DefaultStepEvents
	}
	sum, err := readTraceFile(r.agg, path, lim)
	if err != nil {
		r.tb.ReceiverCuptiBadTraceFiles.Add(ctx, 1)
		if sum.Records > 0 {
			// Only a file past one batch (kineto.Limits.Batch GPU events)
			// can fail after records left; smaller files count whole or not.
			r.badLog.Warn("kineto trace cut short: records before the error were counted",
				zap.String("file", path), zap.Uint64("records", sum.Records), zap.Error(err))
			return
		}
		r.badLog.Warn("kineto trace skipped: not a valid trace", zap.String("file", path), zap.Error(err))
		return
	}
	r.tb.ReceiverCuptiTraceFiles.Add(ctx, 1)
	r.emitSteps(ctx, path, sum.Steps)
	if sum.BusyOverstated > 0 || sum.Overflow > 0 {
		r.set.Logger.Info("kineto trace past the reader's limits",
			zap.String("file", path), zap.Duration("busy_time_overstated", time.Duration(sum.BusyOverstated)),
			zap.Uint64("kernels_as_other", sum.Overflow))
	}
}

// traceSink feeds a Kineto trace into the aggregator as it is read, in
// batches, so neither the lock nor the records of a whole file are held.
type traceSink struct {
	agg     *aggregate.Aggregator
	src     uint32
	kernels []uint32 // name id → series; 0 (overflow) for id 0
	cache   *aggregate.Cache
}

func (t *traceSink) Kernel(id uint32, name []byte) {
	if int(id) >= len(t.kernels) {
		t.kernels = append(t.kernels, make([]uint32, int(id)+1-len(t.kernels))...)
	}
	t.kernels[id] = t.agg.Kernel(name)
}

func (t *traceSink) Records(recs []cuptiwire.Record, absolute bool) {
	const batch = 4096
	for i := 0; i < len(recs); i += batch {
		t.agg.AddTrace(t.src, recs[i:min(i+batch, len(recs))], t.kernels, t.cache, absolute)
	}
}

// KernelName and Category let the Kineto reader name and classify kernels
// for step figures with the aggregator's own table (user rules included).
func (t *traceSink) KernelName(id uint32) string { return t.agg.KernelName(t.series(id)) }

// Category is the kernel category of a trace's kernel name id.
func (t *traceSink) Category(id uint32) string { return t.agg.Category(t.series(id)) }

func (t *traceSink) series(id uint32) uint32 {
	if int(id) < len(t.kernels) {
		return t.kernels[id]
	}
	return 0
}

// readTraceFile reads one trace file into the aggregator, then adds its
// time range and per-device busy time.
func readTraceFile(agg *aggregate.Aggregator, path string, lim kineto.Limits) (kineto.Summary, error) {
	src, ok := agg.Source(aggregate.Source{Kind: aggregate.SourceKindKineto})
	if !ok {
		return kineto.Summary{}, errSourcesFull
	}
	defer agg.Release(src)
	sink := &traceSink{agg: agg, src: src, kernels: []uint32{0}, cache: aggregate.NewCache()}
	sum, err := kineto.ReadFile(path, sink, lim)
	if sum.Records > 0 {
		agg.AddTraceRange(src, sum.Lo, sum.Hi)
	}
	for _, b := range sum.Busy {
		agg.AddBusy(src, b.Device, b.NS)
	}
	return sum, err
}
