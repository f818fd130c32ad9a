// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"

import (
	"cmp"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadata"
)

func (a *Aggregator) emitSource(start, now pcommon.Timestamp, src uint32, keys []key) {
	lo, _ := slices.BinarySearchFunc(keys, src, func(k key, s uint32) int { return cmp.Compare(k.src, s) })
	hi := lo
	for hi < len(keys) && keys[hi].src == src {
		hi++
	}
	busy := map[uint16]uint64{}
	for k, i := range a.busyIx {
		if s := a.busyVals[i]; k.src == src && s.busy > 0 {
			busy[k.device] = s.busy
		}
	}
	devs := make([]uint16, 0, len(busy)+2)
	for d := range busy {
		devs = append(devs, d)
	}
	for i := lo; i < hi; i++ {
		if len(devs) == 0 || !slices.Contains(devs, keys[i].device) {
			devs = append(devs, keys[i].device)
		}
	}
	slices.Sort(devs)
	// One resource per device: the GPU's UUID (hw.id) is a resource
	// attribute, as in the nvml receiver, so the two join on it.
	for _, dev := range devs {
		i := lo
		for i < hi && keys[i].device < dev {
			i++
		}
		j := i
		for j < hi && keys[j].device == dev {
			j++
		}
		if i < j {
			a.emitDevice(now, src, dev, keys[i:j])
		}
		if b := busy[dev]; b > 0 {
			a.mb.RecordInferprofGpuBusyTimeDataPoint(now, seconds(b), deviceOrdinal(dev))
		}
		a.mb.EmitForResource(metadata.WithResource(a.resourceOf(src, dev)), metadata.WithStartTimeOverride(start))
	}
}

// resourceOf is the resource of one device of one source.
func (a *Aggregator) resourceOf(src uint32, dev uint16) pcommon.Resource {
	rb := a.mb.NewResourceBuilder()
	s := a.srcList[src]
	switch s.Kind {
	case SourceKindCUPTI:
		rb.SetInferprofActivitySourceCupti()
		rb.SetProcessPid(int64(s.PID))
		if s.Host != "" {
			rb.SetHostName(s.Host)
		}
		if s.Instance != "" {
			rb.SetServiceInstanceID(s.Instance)
		}
		if s.Service != "" {
			rb.SetServiceName(s.Service)
		}
		if s.Flags&cuptiwire.HelloGraphMode != 0 {
			rb.SetInferprofCuptiGraphModeGraph()
		} else {
			rb.SetInferprofCuptiGraphModeNode()
		}
		rb.SetInferprofCuptiSampled(s.Flags&(cuptiwire.HelloRateLimited|cuptiwire.HelloDutyCycle) != 0)
	case SourceKindKineto:
		rb.SetInferprofActivitySourceKineto()
	}
	if id, ok := a.srcDevs[src][dev]; ok {
		if id.UUID != "" {
			rb.SetHwID(id.UUID)
		}
		if id.MIG != "" {
			rb.SetInferprofGpuMigUUID(id.MIG)
		}
	}
	return rb.Emit()
}

func (a *Aggregator) emitDevice(now pcommon.Timestamp, src uint32, dev uint16, keys []key) {
	devName := deviceOrdinal(dev)
	a.scratch = a.scratch[:0]
	for _, k := range keys {
		v := a.vals[a.slots[k]]
		switch k.kind {
		case cuptiwire.RecordKindKernel:
			a.scratch = append(a.scratch, seriesTotal{series: k.series, v: v})
		case cuptiwire.RecordKindMemcpy:
			kind := memcpyKind(k.sub)
			a.mb.RecordInferprofGpuMemcpyDurationDataPoint(now, seconds(v.dur), kind, devName)
			a.mb.RecordInferprofGpuMemcpyBytesDataPoint(now, int64(v.bytes), kind, devName)
		case cuptiwire.RecordKindMemset:
			kind := memoryKind(k.sub)
			a.mb.RecordInferprofGpuMemsetDurationDataPoint(now, seconds(v.dur), kind, devName)
			a.mb.RecordInferprofGpuMemsetBytesDataPoint(now, int64(v.bytes), kind, devName)
		case cuptiwire.RecordKindSync:
			a.mb.RecordInferprofGpuSyncDurationDataPoint(now, seconds(v.dur), syncKind(k.sub), devName)
		case cuptiwire.RecordKindGraph:
			sig := a.signatureName(k.series)
			a.mb.RecordInferprofGpuGraphDurationDataPoint(now, seconds(v.dur), sig, devName)
			a.mb.RecordInferprofGpuGraphCountDataPoint(now, int64(v.count), sig, devName)
		}
	}
	// The longest kernels keep their own series; the rest are summed per
	// category so category totals stay exact. Kernels chosen at the last
	// flush stay chosen while they still rank within twice top_kernels, so
	// one near the cut keeps one series instead of flipping to "other".
	slices.SortFunc(a.scratch, func(x, y seriesTotal) int {
		return cmp.Or(cmp.Compare(y.v.dur, x.v.dur), cmp.Compare(x.series, y.series))
	})
	ck := chosenKey{src: src, device: dev}
	prev := a.chosen[ck]
	next := make(map[uint32]struct{}, a.top)
	for i, st := range a.scratch {
		if len(next) >= a.top || i >= 2*a.top {
			break
		}
		if _, ok := prev[st.series]; ok && st.series != overflowSeries {
			next[st.series] = struct{}{}
		}
	}
	for _, st := range a.scratch {
		if len(next) >= a.top {
			break
		}
		if st.series != overflowSeries {
			next[st.series] = struct{}{}
		}
	}
	if a.top > 0 {
		if a.chosen == nil {
			a.chosen = map[chosenKey]map[uint32]struct{}{}
		}
		a.chosen[ck] = next
	}
	var other map[string]value
	for _, st := range a.scratch {
		s := a.series[st.series]
		if _, ok := next[st.series]; ok {
			a.mb.RecordInferprofGpuKernelDurationDataPoint(now, seconds(st.v.dur), s.name, s.category, devName)
			a.mb.RecordInferprofGpuKernelCountDataPoint(now, int64(st.v.count), s.name, s.category, devName)
			continue
		}
		if other == nil {
			other = map[string]value{}
		}
		o := other[s.category]
		o.dur += st.v.dur
		o.count += st.v.count
		other[s.category] = o
	}
	cats := make([]string, 0, len(other))
	for c := range other {
		cats = append(cats, c)
	}
	slices.Sort(cats)
	for _, c := range cats {
		o := other[c]
		a.mb.RecordInferprofGpuKernelDurationDataPoint(now, seconds(o.dur), OtherKernel, c, devName)
		a.mb.RecordInferprofGpuKernelCountDataPoint(now, int64(o.count), OtherKernel, c, devName)
	}
}

func seconds(ns uint64) float64 { return float64(ns) / 1e9 }

// The generated enums are CUPTI's numbering plus one; values a newer CUPTI
// adds fall back to unknown.
func memcpyKind(sub uint8) metadata.AttributeMemcpyKind {
	if sub > 10 {
		return metadata.AttributeMemcpyKindUnknown
	}
	return metadata.AttributeMemcpyKind(sub + 1)
}

func memoryKind(sub uint8) metadata.AttributeMemoryKind {
	if sub > 7 {
		return metadata.AttributeMemoryKindUnknown
	}
	return metadata.AttributeMemoryKind(sub + 1)
}

func syncKind(sub uint8) metadata.AttributeSyncKind {
	if sub > 4 {
		return metadata.AttributeSyncKindUnknown
	}
	return metadata.AttributeSyncKind(sub + 1)
}
