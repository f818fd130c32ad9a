// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver

import (
	"cmp"
	"compress/gzip"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/inferprof/inferprof/internal/kernelclass"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadata"
)

// traceEvent is a Kineto event as encoding/json reads it; times stay
// decimal strings so they convert to nanoseconds exactly.
type traceEvent struct {
	Ph   string          `json:"ph"`
	Cat  string          `json:"cat"`
	Name string          `json:"name"`
	Pid  json.RawMessage `json:"pid"`
	Tid  json.RawMessage `json:"tid"`
	Ts   json.Number     `json:"ts"`
	Dur  json.Number     `json:"dur"`
	Args struct {
		Device      *int64 `json:"device"`
		Correlation int64  `json:"correlation"`
	} `json:"args"`
}

// usToNS converts Kineto's microseconds to nanoseconds as written: digits
// past the third decimal do not exist in these files.
func usToNS(t *testing.T, n json.Number) uint64 {
	t.Helper()
	s := string(n)
	whole, frac, _ := strings.Cut(s, ".")
	frac = (frac + "000")[:3]
	v, err := strconv.ParseUint(whole+frac, 10, 64)
	require.NoError(t, err, s)
	return v
}

type wantStep struct {
	kernelNS, busyNS, idleBeforeNS uint64
	count                          int64
	cats                           map[string]uint64
	top                            []string
}

// directSteps computes every ProfilerStep#N's figures straight from the
// file: a kernel is a step's when the cuda_runtime or cuda_driver event with
// its correlation id ran within it on any thread of the annotation's process.
func directSteps(t *testing.T, path string) map[uint64]wantStep {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	dec := json.NewDecoder(zr)
	dec.UseNumber()
	var doc struct {
		TraceEvents []traceEvent `json:"traceEvents"`
	}
	require.NoError(t, dec.Decode(&doc))
	type ann struct {
		index      uint64
		pid, tid   string
		start, end uint64
	}
	var anns []ann
	for _, e := range doc.TraceEvents {
		if n, ok := strings.CutPrefix(e.Name, "ProfilerStep#"); ok && e.Cat == "user_annotation" && e.Ph == "X" {
			i, err := strconv.ParseUint(n, 10, 64)
			require.NoError(t, err)
			s := usToNS(t, e.Ts)
			anns = append(anns, ann{i, string(e.Pid), string(e.Tid), s, s + usToNS(t, e.Dur)})
		}
	}
	// In the annotation's process; in a file where no launch is in any
	// annotation's process, by time alone.
	stepOf := map[int64]int{}
	for _, samePID := range []bool{true, false} {
		for _, e := range doc.TraceEvents {
			if (e.Cat == "cuda_runtime" || e.Cat == "cuda_driver") && e.Args.Correlation > 0 {
				ts := usToNS(t, e.Ts)
				for i, a := range anns {
					if (!samePID || a.pid == string(e.Pid)) && a.start <= ts && ts <= a.end {
						stepOf[e.Args.Correlation] = i
					}
				}
			}
		}
		if len(stepOf) > 0 {
			break
		}
	}
	type kern struct {
		start, end uint64
		dev        int64
		corr       int64
		name       string
	}
	var ks []kern
	for _, e := range doc.TraceEvents {
		if e.Cat == "kernel" && e.Ph == "X" {
			dev := int64(0)
			if e.Args.Device != nil {
				dev = *e.Args.Device
			}
			s := usToNS(t, e.Ts)
			ks = append(ks, kern{s, s + usToNS(t, e.Dur), dev, e.Args.Correlation, e.Name})
		}
	}
	slices.SortStableFunc(ks, func(a, b kern) int { return cmp.Or(cmp.Compare(a.dev, b.dev), cmp.Compare(a.start, b.start)) })
	out := map[uint64]wantStep{}
	type devState struct{ first, last, busy, end, idle uint64 }
	perStep := map[int]map[int64]*devState{}
	byName := map[int]map[string]uint64{}
	var prevEnd uint64
	for i, k := range ks {
		if i == 0 || k.dev != ks[i-1].dev {
			prevEnd = 0
		}
		s, ok := stepOf[k.corr]
		if ok {
			w := out[anns[s].index]
			if w.cats == nil {
				w.cats = map[string]uint64{}
				perStep[s] = map[int64]*devState{}
				byName[s] = map[string]uint64{}
			}
			d := k.end - k.start
			w.kernelNS += d
			w.count++
			w.cats[kernelclass.Default.Classify(k.name)] += d
			byName[s][kernelclass.Shorten(k.name)] += d
			ds := perStep[s][k.dev]
			if ds == nil {
				from := max(prevEnd, anns[s].start)
				ds = &devState{first: k.start}
				if k.start > from {
					ds.idle = k.start - from
				}
				perStep[s][k.dev] = ds
			}
			if k.start >= ds.end {
				ds.busy += d
			} else if k.end > ds.end {
				ds.busy += k.end - ds.end
			}
			ds.end = max(ds.end, k.end)
			out[anns[s].index] = w
		}
		prevEnd = max(prevEnd, k.end)
	}
	for s, devs := range perStep {
		w := out[anns[s].index]
		for _, ds := range devs {
			w.busyNS += ds.busy
			w.idleBeforeNS = max(w.idleBeforeNS, ds.idle)
		}
		top := slices.Collect(maps.Keys(byName[s]))
		slices.SortFunc(top, func(a, b string) int { return cmp.Or(cmp.Compare(byName[s][b], byName[s][a]), cmp.Compare(a, b)) })
		w.top = top[:min(3, len(top))]
		out[anns[s].index] = w
	}
	for _, a := range anns {
		if _, ok := out[a.index]; !ok {
			out[a.index] = wantStep{}
		}
	}
	return out
}

// Every ProfilerStep#N of the real traces becomes a step with exactly the
// figures a direct reading of the file gives.
func TestKinetoStepsFromRealTraces(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "kineto", "*.json.gz"))
	require.NotEmpty(t, files)
	total := 0
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			want := directSteps(t, path)
			mb := metadata.NewMetricsBuilder(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type))
			agg := aggregate.New(kernelclass.Default, aggregate.DefaultLimits, 30, mb, 0)
			lim := kineto.DefaultLimits
			lim.StepEvents = kineto.DefaultStepEvents
			sum, err := readTraceFile(agg, path, lim)
			require.NoError(t, err)
			require.Len(t, sum.Steps, len(want))
			total += len(want)
			td := stepSpans(sum.Steps)
			require.Equal(t, len(want), td.SpanCount())
			for _, rs := range td.ResourceSpans().All() {
				for _, sp := range rs.ScopeSpans().At(0).Spans().All() {
					a := sp.Attributes()
					idx, _ := a.Get(names.AttrStepIndex)
					w, ok := want[uint64(idx.Int())]
					require.True(t, ok, idx.Int())
					if w.count == 0 {
						_, missing := a.Get(names.AttrStepGPUMissing)
						assert.True(t, missing, "step %d launched no kernel", idx.Int())
						continue
					}
					got := func(k string) pcommon.Value { v, _ := a.Get(k); return v }
					t.Logf("ProfilerStep#%d: %d kernels, %.4f s kernel time (direct: %d, %.4f s)", idx.Int(),
						got(names.AttrStepGPUKernelCount).Int(), got(names.AttrStepGPUKernelTime).Double(), w.count, float64(w.kernelNS)/1e9)
					assert.InDelta(t, float64(w.kernelNS)/1e9, got(names.AttrStepGPUKernelTime).Double(), 1e-12, "step %d", idx.Int())
					assert.Equal(t, w.count, got(names.AttrStepGPUKernelCount).Int(), "step %d", idx.Int())
					assert.InDelta(t, float64(w.busyNS)/1e9, got(names.AttrStepGPUBusyTime).Double(), 1e-12, "step %d", idx.Int())
					assert.InDelta(t, float64(w.idleBeforeNS)/1e9, got(names.AttrStepGPUIdleBefore).Double(), 1e-12, "step %d", idx.Int())
					cats, times := got(names.AttrStepGPUCategories).Slice(), got(names.AttrStepGPUCategoryTimes).Slice()
					require.Equal(t, len(w.cats), cats.Len(), "step %d", idx.Int())
					for i := 0; i < cats.Len(); i++ {
						assert.InDelta(t, float64(w.cats[cats.At(i).Str()])/1e9, times.At(i).Double(), 1e-12, "step %d %s", idx.Int(), cats.At(i).Str())
					}
					top := got(names.AttrStepGPUTopKernels).Slice().AsRaw()
					assert.Equal(t, toAny(w.top), top, "step %d", idx.Int())
					src, _ := a.Get(names.AttrStepSource)
					assert.Equal(t, "kineto", src.Str())
				}
			}
		})
	}
	assert.Positive(t, total, "the fixtures hold ProfilerStep annotations")
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// In a traces pipeline, a trace folder's ProfilerStep annotations come out
// as engine.step spans, counted.
func TestKinetoStepSpansFromDirectory(t *testing.T) {
	t.Parallel()
	fixture := filepath.Join("testdata", "kineto", "nccl_parser_config-nccl_data.json.gz")
	want := directSteps(t, fixture)
	data, err := os.ReadFile(fixture)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rank0.pt.trace.json.gz"), data, 0o600))
	spans := new(consumertest.TracesSink)
	h := startWithSpans(t, func(c *Config) { c.Endpoint = ""; c.Kineto.Directory = dir }, spans)
	require.Eventually(t, func() bool { return h.counter(t, "receiver_cupti_step_spans") == int64(len(want)) }, 10*time.Second, 5*time.Millisecond)
	steps := 0
	for _, td := range spans.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, sp := range rs.ScopeSpans().At(0).Spans().All() {
				if sp.Name() == names.SpanEngineStep {
					steps++
					n, _ := sp.Attributes().Get(names.AttrStepGPUKernelCount)
					idx, _ := sp.Attributes().Get(names.AttrStepIndex)
					assert.Equal(t, want[uint64(idx.Int())].count, n.Int())
					assert.Greater(t, sp.StartTimestamp(), pcommon.Timestamp(1_600_000_000_000_000_000), "Unix time")
				}
			}
		}
	}
	assert.Equal(t, len(want), steps)
}
