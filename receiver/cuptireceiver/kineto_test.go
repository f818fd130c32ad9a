// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver

import (
	"compress/gzip"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
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

			tr, err := kineto.ReadFile(path)
			require.NoError(t, err)
			mb := metadata.NewMetricsBuilder(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type))
			agg := aggregate.New(kernelclass.Default, aggregate.DefaultLimits, 100000, mb, 0)
			addTrace(agg, tr)
			md := agg.Flush(pcommon.Timestamp(1))
			got := map[k]float64{}
			rm := md.ResourceMetrics().At(0)
			ms := rm.ScopeMetrics().At(0).Metrics()
			for i := 0; i < ms.Len(); i++ {
				if ms.At(i).Name() != names.MetricKernelDuration {
					continue
				}
				dps := ms.At(i).Sum().DataPoints()
				for j := 0; j < dps.Len(); j++ {
					a := dps.At(j).Attributes()
					n, _ := a.Get(names.AttrKernelName)
					c, _ := a.Get(names.AttrKernelCategory)
					d, _ := a.Get(names.AttrDeviceID)
					got[k{n.Str(), c.Str(), d.Str()}] += dps.At(j).DoubleValue()
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
