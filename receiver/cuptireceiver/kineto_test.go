// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver

import (
	"compress/gzip"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/inferprof/inferprof/internal/kernelclass"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadata"
)

// The real Kineto traces, read and aggregated as the receiver does, give
// the same per-kernel totals (by shortened name, category and device) as a
// direct computation over the file.
func TestKinetoFixturesThroughAggregation(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join("testdata", "kineto", "*.json.gz"))
	if len(files) == 0 {
		t.Fatal("no Kineto fixtures in testdata/kineto")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			type k struct{ name, cat, dev string }
			want := map[k]float64{}
			f, err := os.Open(path)
			require.NoError(t, err)
			defer f.Close()
			zr, err := gzip.NewReader(f)
			require.NoError(t, err)
			var doc struct {
				TraceEvents []struct {
					Cat  string  `json:"cat"`
					Name string  `json:"name"`
					Dur  float64 `json:"dur"`
					Args struct {
						Device int `json:"device"`
					} `json:"args"`
				} `json:"traceEvents"`
			}
			require.NoError(t, json.NewDecoder(zr).Decode(&doc))
			classified := map[string][2]string{} // classifying is slow; names repeat
			for _, ev := range doc.TraceEvents {
				if ev.Cat == "kernel" {
					nc, ok := classified[ev.Name]
					if !ok {
						nc = [2]string{kernelclass.Shorten(ev.Name), kernelclass.Default.Classify(ev.Name)}
						classified[ev.Name] = nc
					}
					key := k{nc[0], nc[1], deviceString(ev.Args.Device)}
					want[key] += math.Round(ev.Dur*1000) / 1e9
				}
			}

			mb := metadata.NewMetricsBuilder(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type))
			agg := aggregate.New(kernelclass.Default, aggregate.DefaultLimits, 100000, mb, 0)
			_, err = readTraceFile(agg, path, kineto.DefaultLimits)
			require.NoError(t, err)
			md := agg.Flush(pcommon.Timestamp(1))
			got := map[k]float64{}
			for r := 0; r < md.ResourceMetrics().Len(); r++ { // one resource per device
				ms := md.ResourceMetrics().At(r).ScopeMetrics().At(0).Metrics()
				for i := 0; i < ms.Len(); i++ {
					if ms.At(i).Name() != names.MetricKernelDuration {
						continue
					}
					dps := ms.At(i).Sum().DataPoints()
					for j := 0; j < dps.Len(); j++ {
						a := dps.At(j).Attributes()
						n, _ := a.Get(names.AttrKernelName)
						c, _ := a.Get(names.AttrKernelCategory)
						d, _ := a.Get(names.AttrCUDADeviceOrdinal)
						got[k{n.Str(), c.Str(), d.AsString()}] += dps.At(j).DoubleValue()
					}
				}
			}
			require.Len(t, got, len(want))
			for key, w := range want {
				assert.InDelta(t, w, got[key], 1e-9, "%+v", key)
			}
		})
	}
}

func deviceString(d int) string {
	b, _ := json.Marshal(d)
	return string(b)
}

// A real trace's busy time per device, read in small batches, is the union
// of its kernel, copy and memset intervals as a direct computation over the
// whole file finds it; its points span the trace's own range.
func TestKinetoBusyTimeIsTheUnion(t *testing.T) {
	t.Parallel()
	path := filepath.Join("testdata", "kineto", "nccl_parser_config-nccl_data.json.gz")
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	var doc struct {
		TraceEvents []struct {
			Ph   string  `json:"ph"`
			Cat  string  `json:"cat"`
			Ts   float64 `json:"ts"`
			Dur  float64 `json:"dur"`
			Args struct {
				Device *int `json:"device"`
			} `json:"args"`
		} `json:"traceEvents"`
		Base uint64 `json:"baseTimeNanoseconds"`
	}
	require.NoError(t, json.NewDecoder(zr).Decode(&doc))
	type iv struct{ lo, hi int64 }
	perDev := map[string][]iv{}
	lo, hi := int64(math.MaxInt64), int64(0)
	for _, ev := range doc.TraceEvents {
		if ev.Ph != "X" || (ev.Cat != "kernel" && ev.Cat != "gpu_memcpy" && ev.Cat != "gpu_memset") || ev.Args.Device == nil {
			continue
		}
		s := int64(math.Round(ev.Ts * 1000))
		e := s + int64(math.Round(ev.Dur*1000))
		perDev[deviceString(*ev.Args.Device)] = append(perDev[deviceString(*ev.Args.Device)], iv{s, e})
		lo, hi = min(lo, s), max(hi, e)
	}
	want := map[string]float64{}
	for d, ivs := range perDev {
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].lo < ivs[j].lo })
		var total, end int64
		for _, x := range ivs {
			switch {
			case x.lo >= end:
				total += x.hi - x.lo
				end = x.hi
			case x.hi > end:
				total += x.hi - end
				end = x.hi
			}
		}
		want[d] = float64(total) / 1e9
	}
	require.NotEmpty(t, want)

	mb := metadata.NewMetricsBuilder(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type))
	agg := aggregate.New(kernelclass.Default, aggregate.DefaultLimits, 30, mb, 0)
	_, err = readTraceFile(agg, path, kineto.Limits{Batch: 100, Intervals: 1 << 20, NameBytes: 1 << 20})
	require.NoError(t, err)
	md := agg.Flush(pcommon.Timestamp(1))
	got := map[string]float64{}
	for r := 0; r < md.ResourceMetrics().Len(); r++ { // one resource per device
		ms := md.ResourceMetrics().At(r).ScopeMetrics().At(0).Metrics()
		for i := 0; i < ms.Len(); i++ {
			if ms.At(i).Name() != names.MetricGPUBusyTime {
				continue
			}
			dps := ms.At(i).Sum().DataPoints()
			for j := 0; j < dps.Len(); j++ {
				d, _ := dps.At(j).Attributes().Get(names.AttrCUDADeviceOrdinal)
				got[d.AsString()] += dps.At(j).DoubleValue()
				// The trace's own range, in Unix ns (the base time comes after the events).
				// (Float µs in the direct computation: a nanosecond either way.)
				assert.InDelta(t, 0, int64(dps.At(j).Timestamp())-int64(doc.Base+uint64(hi)), 1)
				assert.InDelta(t, 0, int64(dps.At(j).StartTimestamp())-int64(doc.Base+uint64(lo)), 1)
			}
		}
	}
	require.Len(t, got, len(want))
	for d, w := range want {
		// Float µs rounded per event in the direct computation: 1 ns per interval at most.
		assert.InDelta(t, w, got[d], float64(len(perDev[d]))*1e-9, d)
	}
}
