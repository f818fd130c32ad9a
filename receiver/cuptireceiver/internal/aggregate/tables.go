// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"

import (
	"github.com/inferprof/inferprof/internal/kernelclass"
)

// Source returns the index of src, registering it, and holds it until
// Release; ok is false when the source table is full. A source no one holds
// is forgotten at the flush after its last data, so engines that restart
// (new pids) do not fill the table.
func (a *Aggregator) Source(src Source) (idx uint32, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if i, found := a.sources[src]; found {
		a.srcRefs[i]++
		return i, true
	}
	var i uint32
	switch {
	case len(a.srcFree) > 0:
		i = a.srcFree[len(a.srcFree)-1]
		a.srcFree = a.srcFree[:len(a.srcFree)-1]
		a.srcList[i], a.srcRefs[i], a.srcLive[i], a.srcSpan[i], a.srcDevs[i] = src, 1, true, span{}, nil
	case len(a.srcList) < a.limits.MaxSources:
		i = uint32(len(a.srcList))
		a.srcList = append(a.srcList, src)
		a.srcRefs = append(a.srcRefs, 1)
		a.srcLive = append(a.srcLive, true)
		a.srcSpan = append(a.srcSpan, span{})
		a.srcDevs = append(a.srcDevs, nil)
	default:
		return 0, false
	}
	a.sources[src] = i
	return i, true
}

// Release drops one hold on a source taken with Source.
func (a *Aggregator) Release(idx uint32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if int(idx) < len(a.srcRefs) && a.srcRefs[idx] > 0 {
		a.srcRefs[idx]--
	}
}

// SetDevice records what the library told of a device ordinal of src.
func (a *Aggregator) SetDevice(src uint32, ordinal uint16, id DeviceID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if int(src) >= len(a.srcDevs) {
		return
	}
	if a.srcDevs[src] == nil {
		a.srcDevs[src] = map[uint16]DeviceID{}
	}
	if len(a.srcDevs[src]) < maxDevices {
		a.srcDevs[src][ordinal] = id
	}
}

// maxDevices bounds the devices a source may name; a process sees at most a
// few dozen GPUs.
const maxDevices = 1024

// KernelName returns the shortened name of a kernel series.
func (a *Aggregator) KernelName(series uint32) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if int(series) < len(a.series) {
		return a.series[series].name
	}
	return OtherKernel
}

// Category returns the category of a kernel series.
func (a *Aggregator) Category(series uint32) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if int(series) < len(a.series) {
		return a.series[series].category
	}
	return kernelclass.CategoryOther
}

// Sources returns how many sources are registered.
func (a *Aggregator) Sources() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.sources)
}

// prune forgets sources no one holds; called at the end of a flush, when
// their data has been emitted.
func (a *Aggregator) prune() {
	for i, live := range a.srcLive {
		if !live || a.srcRefs[i] > 0 {
			continue
		}
		src := uint32(i)
		delete(a.sources, a.srcList[i])
		a.srcLive[i] = false
		for k := range a.chosen {
			if k.src == src {
				delete(a.chosen, k)
			}
		}
		a.srcFree = append(a.srcFree, src)
		for k, b := range a.busyIx {
			if k.src == src {
				delete(a.busyIx, k)
				a.busyVals[b] = busyState{}
				a.busyFree = append(a.busyFree, b)
			}
		}
	}
}

// Kernel returns the series index of a raw kernel name, classifying and
// shortening it the first time it is seen. Past MaxNames every new name maps
// to the overflow series ("other"/"other").
func (a *Aggregator) Kernel(raw []byte) uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if i, ok := a.names[string(raw)]; ok {
		return i
	}
	if len(a.names) >= a.limits.MaxNames {
		return overflowSeries
	}
	name := string(raw)
	s := series{name: kernelclass.Shorten(name), category: a.classes.Classify(name)}
	i, ok := a.seriesIx[s]
	if !ok {
		i = uint32(len(a.series))
		a.series = append(a.series, s)
		a.seriesIx[s] = i
	}
	a.names[name] = i
	return i
}
