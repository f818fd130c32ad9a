// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignalexporter

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/proto"

	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"
	"github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/local"
	signalsv0 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v0"
	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
	"github.com/inferprof/inferprof/internal/delta"
)

// The exporter's external input is whatever OTLP a receiver accepted; these
// fuzz the whole path (delta, encode, local store) over arbitrary OTLP and
// check the result always decodes with Graphsignal's schema.

func fuzzSeeds() (metrics, logs, traces [][]byte) {
	start := time.Unix(1_700_000_000, 0)
	c := cumulative{
		start: start, ts: start.Add(time.Second), counter: 10,
		histCounts: []uint64{1, 2, 0, 1}, histSum: 2, histMin: 0.05, hisMax: 1.5, gauge: 1,
		kernelNs: map[string]int64{"k": 5}, kernelCount: map[string]int64{"k": 1},
	}
	m, _ := (&pmetric.ProtoMarshaler{}).MarshalMetrics(c.build())
	l, _ := (&plog.ProtoMarshaler{}).MarshalLogs(newLogs())
	tr, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(spansWithPrompt())
	return [][]byte{m, {}}, [][]byte{l, {}}, [][]byte{tr, {}}
}

// TestWriteFuzzSeeds refreshes testdata/fuzz when GRAPHSIGNAL_WRITE_SEEDS=1.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("GRAPHSIGNAL_WRITE_SEEDS") != "1" {
		t.Skip("set GRAPHSIGNAL_WRITE_SEEDS=1 to rewrite the seed corpus")
	}
	m, l, tr := fuzzSeeds()
	for name, seeds := range map[string][][]byte{"FuzzEncodeMetrics": m, "FuzzEncodeLogs": l, "FuzzEncodeSpans": tr} {
		dir := filepath.Join("testdata", "fuzz", name)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for i, s := range seeds {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
			require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%d", i)), []byte(body), 0o644))
		}
	}
}

// newFuzzEncoder encodes with the default names, Graphsignal's, which run
// the name map as well as the generic mapping.
func newFuzzEncoder() *encode.Encoder {
	return encode.New(nil, map[string]string{"k": "v"}, "0123456789ab", time.Now, encode.WithNames(encode.NamesGraphsignal))
}

func FuzzEncodeMetrics(f *testing.F) {
	m, _, _ := fuzzSeeds()
	for _, s := range m {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		md, err := (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(data)
		if err != nil {
			return
		}
		conv := delta.New(time.Unix(0, 0), time.Now)
		enc := newFuzzEncoder()
		store := local.New("fuzz", enc.GlobalTags(), time.Now)
		for range 2 {
			out, tx, _ := conv.Convert(md)
			conv.Commit(tx)
			req, _ := enc.Metrics(out)
			b, err := proto.Marshal(req)
			require.NoError(t, err)
			require.NoError(t, proto.Unmarshal(b, &signalsv1.UploadRequest{}))
			store.Apply(req)
		}
		_ = store.Snapshot()
	})
}

func FuzzEncodeLogs(f *testing.F) {
	_, l, _ := fuzzSeeds()
	for _, s := range l {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(data)
		if err != nil {
			return
		}
		enc := newFuzzEncoder()
		req, _ := enc.Logs(ld)
		b, err := proto.Marshal(req)
		require.NoError(t, err)
		require.NoError(t, proto.Unmarshal(b, &signalsv1.UploadRequest{}))
		local.New("fuzz", enc.GlobalTags(), time.Now).Apply(req)
	})
}

func FuzzEncodeSpans(f *testing.F) {
	_, _, tr := fuzzSeeds()
	for _, s := range tr {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(data)
		if err != nil {
			return
		}
		req, _ := newFuzzEncoder().Spans(td)
		b, err := proto.Marshal(req)
		require.NoError(t, err)
		require.NoError(t, proto.Unmarshal(b, &signalsv0.UploadRequest{}))
	})
}
