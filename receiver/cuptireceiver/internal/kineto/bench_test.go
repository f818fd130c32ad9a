// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package kineto

import (
	"bufio"
	"bytes"
	stdgzip "compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto/kinetotest"
)

var benchOnce struct {
	sync.Once
	gz     []byte
	events int
	err    error
}

// benchTrace is the gzipped trace the benchmarks read: KINETO_BENCH_TRACE
// names one (make bench-kineto writes it, so Python reads the same file),
// else the real NCCL trace repeated KINETO_BENCH_COPIES times (default 3).
func benchTrace(b *testing.B) ([]byte, int) {
	benchOnce.Do(func() {
		tr, err := kinetotest.Load(filepath.Join(FixtureDir, kinetotest.Fixture))
		if err != nil {
			benchOnce.err = err
			return
		}
		copies := 3
		if v, err := strconv.Atoi(os.Getenv("KINETO_BENCH_COPIES")); err == nil && v > 0 {
			copies = v
		}
		benchOnce.events = tr.Events() * copies
		if p := os.Getenv("KINETO_BENCH_TRACE"); p != "" {
			benchOnce.gz, benchOnce.err = os.ReadFile(p)
			return
		}
		benchOnce.gz, benchOnce.err = tr.Gzip(copies)
	})
	if benchOnce.err != nil {
		b.Fatal(benchOnce.err)
	}
	return benchOnce.gz, benchOnce.events
}

type countSink struct{ n int }

func (c *countSink) Kernel(uint32, []byte)                {}
func (c *countSink) Records(r []cuptiwire.Record, _ bool) { c.n += len(r) }

// cpuTime is this process's user plus system CPU time so far. On a shared
// machine wall time says how much of a core the run got; CPU time says
// what the work cost.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportRates adds events per wall second and per CPU second.
func reportRates(b *testing.B, events int, cpu0 time.Duration) {
	n := float64(events) * float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(n/(cpuTime()-cpu0).Seconds(), "events/cpu-s")
}

// BenchmarkRead is one trace file, gzip included, read to records on one
// core: the previous reader (encoding/json, stdlib gzip) against the
// streaming one. Run with -cpu 1.
func BenchmarkRead(b *testing.B) {
	gz, events := benchTrace(b)
	b.Run("impl=previous", func(b *testing.B) {
		b.SetBytes(int64(len(gz)))
		cpu0 := cpuTime()
		for b.Loop() {
			zr, err := stdgzip.NewReader(bytes.NewReader(gz))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := oldRead(bufio.NewReaderSize(zr, 256<<10)); err != nil {
				b.Fatal(err)
			}
		}
		reportRates(b, events, cpu0)
	})
	b.Run("impl=stream", func(b *testing.B) {
		b.SetBytes(int64(len(gz)))
		b.ReportAllocs()
		cpu0 := cpuTime()
		for b.Loop() {
			zr, err := gzipReader(bytes.NewReader(gz))
			if err != nil {
				b.Fatal(err)
			}
			var c countSink
			if _, err := Read(zr, &c, DefaultLimits); err != nil {
				b.Fatal(err)
			}
		}
		reportRates(b, events, cpu0)
	})
	// gunzip alone: the floor under the streaming reader.
	b.Run("impl=gunzip_only", func(b *testing.B) {
		b.SetBytes(int64(len(gz)))
		cpu0 := cpuTime()
		for b.Loop() {
			zr, err := gzipReader(bytes.NewReader(gz))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, zr); err != nil {
				b.Fatal(err)
			}
		}
		reportRates(b, events, cpu0)
	})
}
