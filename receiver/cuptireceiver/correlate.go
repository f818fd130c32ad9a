// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver // import "github.com/inferprof/inferprof/receiver/cuptireceiver"

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/gpuwindow"
	"github.com/inferprof/inferprof/internal/kernelclass"
	"github.com/inferprof/inferprof/internal/stepstore"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"
)

// Identity notes who the process is: its parent serves to find the engine
// an executor worker runs for, its instance id to tell replicas apart.
func (h *connHandler) Identity(id cuptiwire.Identity) error {
	h.corr.ppid, h.corr.instance = id.PPID, string(id.InstanceID)
	next := h.src
	next.Instance, next.Service = string(id.InstanceID), string(id.ServiceName)
	if next == h.src {
		return nil
	}
	idx, ok := h.agg.Source(next)
	if !ok {
		return errSourcesFull
	}
	if h.held {
		h.agg.Release(h.srcIdx)
	}
	h.src, h.srcIdx, h.held = next, idx, true
	if h.src.Flags&cuptiwire.HelloLaunches != 0 {
		// A library that sends launches is a source from now on, so steps
		// arriving before its first launches wait for them.
		h.openWindowSource()
	}
	return nil
}

// Device records the UUID of a CUDA ordinal, which becomes hw.id.
func (h *connHandler) Device(d cuptiwire.Device) error {
	id := aggregate.DeviceID{UUID: cuptiwire.UUIDString("GPU-", d.UUID)}
	if d.Flags&cuptiwire.DeviceFlagMIG != 0 {
		id.MIG = cuptiwire.UUIDString("MIG-", d.MIGUUID)
	}
	h.agg.SetDevice(h.srcIdx, d.Ordinal, id)
	return nil
}

// Launches hands a batch of launches to the window, opening the
// connection's window source first if the identity frame did not.
func (h *connHandler) Launches(ls []cuptiwire.Launch) error {
	if !h.openWindowSource() {
		return nil
	}
	h.corr.src.Launches(ls, h.now())
	h.reportCorrelation()
	return nil
}

// openWindowSource registers the connection with the window once; false
// when there is no window or it is full.
func (h *connHandler) openWindowSource() bool {
	cc := &h.corr
	if cc.c == nil {
		return false
	}
	if cc.src != nil {
		return true
	}
	cc.src = cc.c.win.OpenSource(gpuwindow.SourceInfo{
		Host: h.src.Host, PID: h.src.PID, PPID: cc.ppid, Instance: cc.instance,
		Sampled: h.src.Flags&(cuptiwire.HelloRateLimited|cuptiwire.HelloDutyCycle) != 0,
	}, seriesResolver{agg: h.agg})
	if cc.src == nil {
		cc.c = nil // the window is full: this connection's kernels stay uncorrelated
		return false
	}
	cc.graphCat = cc.c.win.CategoryID(kernelclass.CategoryCUDAGraph)
	cc.c.mu.Lock()
	cc.c.sources[h.srcIdx] = cc.src
	cc.c.mu.Unlock()
	return true
}

// correlate hands the batch's kernel and graph records to the window.
func (h *connHandler) correlate(recs []cuptiwire.Record) {
	cc := &h.corr
	if cc.src == nil {
		return
	}
	ks := cc.kbuf[:0]
	for i := range recs {
		r := &recs[i]
		var k gpuwindow.Kernel
		switch r.Kind {
		case cuptiwire.RecordKindKernel:
			series := uint32(0)
			if int(r.Name) < len(h.kernels) {
				series = h.kernels[r.Name]
			}
			k = gpuwindow.Kernel{Series: series, Category: h.categoryOf(series), Graph: r.GraphID != 0}
		case cuptiwire.RecordKindGraph:
			k = gpuwindow.Kernel{Series: graphSeries, Category: cc.graphCat, Graph: true, GraphRecord: true}
		default:
			continue
		}
		k.Correlation, k.Device, k.Start, k.End = r.Correlation, r.Device, r.Start, r.End
		ks = append(ks, k)
	}
	cc.kbuf = ks
	if len(ks) > 0 {
		cc.src.Kernels(ks, h.now())
		h.reportCorrelation()
	}
}

// categoryOf is the window's category id of an aggregator series, looked up
// once per series and connection.
func (h *connHandler) categoryOf(series uint32) uint8 {
	cc := &h.corr
	if int(series) >= len(cc.seriesCat) {
		cc.seriesCat = append(cc.seriesCat, make([]uint8, int(series)+1-len(cc.seriesCat))...)
	}
	if v := cc.seriesCat[series]; v != 0 {
		return v - 1
	}
	id := cc.c.win.CategoryID(h.agg.Category(series))
	cc.seriesCat[series] = id + 1
	return id
}

// reportCorrelation adds what the window could not tie to a step since the
// last report to the receiver's counters.
func (h *connHandler) reportCorrelation() {
	cc := &h.corr
	if h.tb == nil {
		return
	}
	now := cc.src.Counts()
	last := cc.counts
	cc.counts = now
	add := func(c metric.Int64Counter, d uint64, reason string) {
		if d > 0 {
			c.Add(h.ctx, int64(d), cc.c.reason[reason]...)
		}
	}
	add(h.tb.ReceiverCuptiKernelsUnattributed, now.KernelsOutside-last.KernelsOutside, "outside")
	add(h.tb.ReceiverCuptiKernelsUnattributed, now.KernelsUnmatched-last.KernelsUnmatched, "unmatched")
	add(h.tb.ReceiverCuptiKernelsUnattributed, now.KernelsLate-last.KernelsLate, "late")
	add(h.tb.ReceiverCuptiCorrelationDropped, now.LaunchesDropped-last.LaunchesDropped, "launch")
	add(h.tb.ReceiverCuptiCorrelationDropped, now.KernelsDropped-last.KernelsDropped, "kernel")
}

// reportEngineLaunchDrops counts the launch records the library lost.
func (h *connHandler) reportEngineLaunchDrops(prev, now uint64) {
	if h.tb == nil || now <= prev || h.corr.c == nil {
		return
	}
	h.tb.ReceiverCuptiCorrelationDropped.Add(h.ctx, int64(now-prev), h.corr.c.reason["engine_launch"]...)
}

// closeCorrelation closes the connection's window source.
func (h *connHandler) closeCorrelation() {
	cc := &h.corr
	if cc.src == nil {
		return
	}
	cc.src.Close()
	cc.c.mu.Lock()
	if cc.c.sources[h.srcIdx] == cc.src {
		delete(cc.c.sources, h.srcIdx)
	}
	cc.c.mu.Unlock()
}

// windowStart finds the window of the step_store the config names;
// without one the receiver's kernels stay uncorrelated.
func (r *cuptiReceiver) windowStart(host component.Host) error {
	win, err := stepstore.Lookup(host, r.cfg.StepStore, "step_store")
	if err != nil || win == nil {
		return err
	}
	r.corr = newCorrelation(win)
	return nil
}
