// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package gpuwindow // import "github.com/inferprof/inferprof/internal/gpuwindow"

import (
	"cmp"
	"slices"
)

// Kernel is one kernel execution as the window needs it. Times are Unix ns.
type Kernel struct {
	Correlation uint32
	Device      uint16 // CUDA ordinal in the launching process
	Start, End  uint64
	Series      uint32 // the source's kernel series (resolved to a name with its Resolver)
	Category    uint8  // a category id from Window.CategoryID (or Categories.ID)
	// Graph marks a record that belongs to a CUDA graph launch: a kernel
	// node (node mode) or a whole graph (graph mode, GraphRecord).
	Graph       bool
	GraphRecord bool
}

// Categories interns kernel category names into small ids, so the hot path
// sums into an array. It is not safe for concurrent use on its own; Window
// guards its own.
type Categories struct {
	ids   map[string]uint8
	names []string
}

// MaxCategories bounds the distinct categories; later ones share the last id.
const MaxCategories = 64

// ID returns the id of category name, assigning one the first time.
func (c *Categories) ID(name string) uint8 {
	if id, ok := c.ids[name]; ok {
		return id
	}
	if c.ids == nil {
		c.ids = map[string]uint8{}
	}
	if len(c.names) >= MaxCategories {
		return MaxCategories - 1
	}
	id := uint8(len(c.names))
	c.ids[name] = id
	c.names = append(c.names, name)
	return id
}

// Name returns the name of id.
func (c *Categories) Name(id uint8) string {
	if int(id) < len(c.names) {
		return c.names[id]
	}
	return ""
}

// Figures are a step's GPU figures, in nanoseconds. Kernel time sums kernel
// durations over every device (GPU-seconds, so concurrent kernels count
// each); busy time is the union of the kernels' intervals per device,
// summed over devices.
type Figures struct {
	KernelNS    uint64
	KernelCount uint64 // kernel records; in graph mode one per graph launch
	GraphCount  uint64 // distinct graph launches among them
	BusyNS      uint64
	// IdleBeforeNS is the GPU idle time before the step's first kernel: from
	// the later of the device's previous kernel end and the step's start,
	// to the step's first kernel. The largest over the step's devices.
	IdleBeforeNS uint64
	// IdleNS adds the gaps between the step's own kernels to IdleBeforeNS:
	// the time the GPU waited on this step's CPU work. Largest over devices.
	IdleNS     uint64
	Categories []CategoryTime // by time, largest first
	Top        []KernelTime   // the step's longest kernels, largest first
}

// CategoryTime is the kernel time of one category.
type CategoryTime struct {
	Category string
	NS       uint64
}

// KernelTime is the time of one kernel series in a step.
type KernelTime struct {
	Name     string
	Category string
	NS       uint64
	Count    uint64
}

// Resolver names a source's kernel series.
type Resolver interface {
	KernelName(series uint32) string
}

type seriesKey struct {
	src    uint32 // resolver slot
	series uint32
}

type seriesAcc struct {
	ns, count uint64
	cat       uint8
}

type devKey struct {
	src    uint32
	device uint16
}

// devAcc is one device's share of a step.
type devAcc struct {
	busy, end           uint64 // sweep over the step's kernels in arrival order
	firstStart, lastEnd uint64
	idleBefore          uint64
}

// Accumulator sums the kernels of one step. The zero value is ready; Reset
// keeps its maps for the next step.
type Accumulator struct {
	kernelNS, count uint64
	graphs          []uint64 // graph launches seen: source slot << 32 | correlation id
	cats            [MaxCategories]uint64
	series          map[seriesKey]*seriesAcc
	devs            map[devKey]*devAcc
	spare           []*seriesAcc
	// A direct-mapped cache in front of series and the last device: a
	// step's kernels repeat a few dozen names, so most lookups skip the
	// hash.
	hot     [64]hotSeries
	lastDev *devAcc
	lastKey devKey
}

type hotSeries struct {
	k seriesKey
	v *seriesAcc
}

// Reset empties a for reuse.
func (a *Accumulator) Reset() {
	for _, v := range a.series {
		a.spare = append(a.spare, v)
	}
	clear(a.series)
	clear(a.devs)
	a.hot = [64]hotSeries{}
	a.lastDev = nil
	a.kernelNS, a.count = 0, 0
	a.graphs = a.graphs[:0]
	a.cats = [MaxCategories]uint64{}
}

// Empty reports whether no kernel was added since Reset.
func (a *Accumulator) Empty() bool { return a.count == 0 }

// Add sums kernel k of source slot src into the step. prevEnd is the device's
// previous kernel end before k (0: none), from the source's
// per-device state, and stepStart the step's launch start; both Unix ns.
func (a *Accumulator) Add(src uint32, k *Kernel, prevEnd, stepStart uint64) {
	d := k.End - k.Start
	a.kernelNS += d
	a.count++
	a.cats[k.Category] += d
	// Correlation ids are per process: a graph is its source and its id.
	if g := uint64(src)<<32 | uint64(k.Correlation); k.Graph && (len(a.graphs) == 0 || a.graphs[len(a.graphs)-1] != g) && !slices.Contains(a.graphs, g) {
		a.graphs = append(a.graphs, g)
	}
	if a.series == nil {
		a.series = map[seriesKey]*seriesAcc{}
		a.devs = map[devKey]*devAcc{}
	}
	sk := seriesKey{src: src, series: k.Series}
	h := &a.hot[(k.Series^src*31)&63]
	s := h.v
	if s == nil || h.k != sk {
		s = a.series[sk]
	}
	if s == nil {
		if n := len(a.spare); n > 0 {
			s = a.spare[n-1]
			a.spare = a.spare[:n-1]
			*s = seriesAcc{}
		} else {
			s = &seriesAcc{}
		}
		s.cat = k.Category
		a.series[sk] = s
	}
	*h = hotSeries{sk, s}
	s.ns += d
	s.count++
	dk := devKey{src: src, device: k.Device}
	dv := a.lastDev
	if dv == nil || a.lastKey != dk {
		dv = a.devs[dk]
	}
	if dv == nil {
		dv = &devAcc{firstStart: k.Start}
		dv.idleBefore = idleGap(k.Start, prevEnd, stepStart)
		a.devs[dk] = dv
	} else if k.Start < dv.firstStart {
		dv.firstStart = k.Start
		dv.idleBefore = idleGap(k.Start, prevEnd, stepStart)
	}
	a.lastDev, a.lastKey = dv, dk
	dv.lastEnd = max(dv.lastEnd, k.End)
	switch {
	case k.Start >= dv.end:
		dv.busy += d
		dv.end = k.End
	case k.End > dv.end:
		dv.busy += k.End - dv.end
		dv.end = k.End
	}
}

// idleGap is how long the device idled before start: since the later of its
// previous kernel's end and the step's start.
func idleGap(start, prevEnd, stepStart uint64) uint64 {
	from := max(prevEnd, stepStart)
	if from == 0 || start <= from {
		return 0
	}
	return start - from
}

// Figures returns a's figures with at most top kernels; names come from
// the resolvers by source slot and cats names the category ids.
func (a *Accumulator) Figures(top int, resolve func(src uint32) Resolver, cats *Categories) Figures {
	f := Figures{KernelNS: a.kernelNS, KernelCount: a.count, GraphCount: uint64(len(a.graphs))}
	for _, dv := range a.devs {
		f.BusyNS += dv.busy
		f.IdleBeforeNS = max(f.IdleBeforeNS, dv.idleBefore)
		within := uint64(0)
		if span := dv.lastEnd - dv.firstStart; span > dv.busy {
			within = span - dv.busy
		}
		f.IdleNS = max(f.IdleNS, dv.idleBefore+within)
	}
	for id, ns := range a.cats {
		if ns > 0 {
			f.Categories = append(f.Categories, CategoryTime{Category: cats.Name(uint8(id)), NS: ns})
		}
	}
	slices.SortFunc(f.Categories, func(x, y CategoryTime) int {
		return cmp.Or(cmp.Compare(y.NS, x.NS), cmp.Compare(x.Category, y.Category))
	})
	if top <= 0 || len(a.series) == 0 {
		return f
	}
	// The same kernel from several processes (tensor-parallel workers) is
	// one kernel.
	type ranked struct {
		name  string
		cat   uint8
		ns, n uint64
	}
	byName := make(map[string]*ranked, len(a.series))
	for k, v := range a.series {
		name := ""
		if res := resolve(k.src); res != nil {
			name = res.KernelName(k.series)
		}
		r := byName[name]
		if r == nil {
			r = &ranked{name: name, cat: v.cat}
			byName[name] = r
		}
		r.ns += v.ns
		r.n += v.count
	}
	best := make([]*ranked, 0, len(byName))
	for _, r := range byName {
		best = append(best, r)
	}
	slices.SortFunc(best, func(x, y *ranked) int {
		return cmp.Or(cmp.Compare(y.ns, x.ns), cmp.Compare(x.name, y.name))
	})
	for _, r := range best[:min(top, len(best))] {
		f.Top = append(f.Top, KernelTime{Name: r.name, Category: cats.Name(r.cat), NS: r.ns, Count: r.n})
	}
	return f
}
