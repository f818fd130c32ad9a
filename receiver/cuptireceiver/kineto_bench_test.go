// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/inferprof/inferprof/internal/kernelclass"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/aggregate"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto/kinetotest"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadata"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkKinetoFileToMetrics is what the receiver does with a trace file
// dropped in kineto.directory: open, gunzip, decode, aggregate, flush to
// pdata metrics. It reads KINETO_BENCH_TRACE (make bench-kineto writes it
// and times Python's json.load on the same file in the same run, the first
// thing HTA does with a trace), else the real NCCL trace repeated 3 times.
func BenchmarkKinetoFileToMetrics(b *testing.B) {
	path := os.Getenv("KINETO_BENCH_TRACE")
	tr, err := kinetotest.Load(filepath.Join("testdata", "kineto", kinetotest.Fixture))
	if err != nil {
		b.Fatal(err)
	}
	copies := 3
	if v, err := strconv.Atoi(os.Getenv("KINETO_BENCH_COPIES")); err == nil && v > 0 {
		copies = v
	}
	if path == "" {
		gz, err := tr.Gzip(copies)
		if err != nil {
			b.Fatal(err)
		}
		path = filepath.Join(b.TempDir(), "trace.json.gz")
		if err := os.WriteFile(path, gz, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	events := tr.Events() * copies
	// One core is the like-for-like comparison with Python's json.load; two
	// let the gunzip goroutine overlap decoding, as in the collector.
	for _, procs := range []int{1, 2} {
		b.Run(fmt.Sprintf("impl=ours_%dcpu", procs), func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			mb := metadata.NewMetricsBuilder(metadata.DefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type))
			agg := aggregate.New(kernelclass.Default, aggregate.DefaultLimits, 30, mb, 0)
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				sum, err := readTraceFile(agg, path, kineto.DefaultLimits)
				if err != nil {
					b.Fatal(err)
				}
				if sum.Events != uint64(events) {
					b.Fatalf("read %d events, want %d", sum.Events, events)
				}
				if agg.Flush(pcommon.NewTimestampFromTime(time.Now())).DataPointCount() == 0 {
					b.Fatal("no metrics")
				}
			}
			n := float64(events) * float64(b.N)
			b.ReportMetric(n/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(n/(cpuTime()-cpu0).Seconds(), "events/cpu-s")
		})
	}
}
