// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package kineto

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/cuptiwire"
)

// FixtureDir holds real Kineto traces recorded on GPUs (see its README).
var FixtureDir = filepath.Join("..", "..", "testdata", "kineto")

func fixtures(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(FixtureDir, "*.json.gz"))
	require.NoError(t, err)
	if len(files) == 0 {
		t.Fatalf("no Kineto fixtures under %s", FixtureDir)
	}
	return files
}

// direct computes per-kernel-name total ns and counts straight from the
// file with a generic JSON decode, independently of the streaming reader.
func direct(t *testing.T, path string) (dur map[string]uint64, count map[string]int, memcpyBytes uint64) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	var doc struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	require.NoError(t, json.NewDecoder(zr).Decode(&doc))
	dur, count = map[string]uint64{}, map[string]int{}
	for _, ev := range doc.TraceEvents {
		switch ev["cat"] {
		case "kernel":
			name := ev["name"].(string)
			dur[name] += uint64(math.Round(ev["dur"].(float64) * 1000))
			count[name]++
		case "gpu_memcpy":
			memcpyBytes += uint64(ev["args"].(map[string]any)["bytes"].(float64))
		}
	}
	return dur, count, memcpyBytes
}

func TestFixturesMatchDirectComputation(t *testing.T) {
	t.Parallel()
	for _, path := range fixtures(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			tr, err := ReadFile(path)
			require.NoError(t, err)
			wantDur, wantCount, wantBytes := direct(t, path)
			require.NotEmpty(t, wantDur, "fixture has kernels")
			gotDur, gotCount := map[string]uint64{}, map[string]int{}
			var gotBytes uint64
			for i, r := range tr.Records {
				if i > 0 {
					require.LessOrEqual(t, tr.Records[i-1].Start, r.Start, "records sorted by start")
				}
				switch r.Kind {
				case cuptiwire.RecordKindKernel:
					name := tr.Names[r.Name-1]
					gotDur[name] += r.End - r.Start
					gotCount[name]++
					assert.NotEqual(t, cuptiwire.DeviceUnknown, r.Device)
				case cuptiwire.RecordKindMemcpy:
					gotBytes += r.Bytes
					assert.NotZero(t, r.Sub, "memcpy kind parsed")
				}
			}
			assert.Equal(t, wantCount, gotCount)
			assert.Equal(t, wantBytes, gotBytes)
			require.Len(t, gotDur, len(wantDur))
			for name, want := range wantDur {
				// The direct sum rounds float µs per event; allow 1 ns per event.
				assert.InDelta(t, want, gotDur[name], float64(wantCount[name]), name)
			}
		})
	}
}

func TestBaseTimeIsAdded(t *testing.T) {
	t.Parallel()
	in := `{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1.5,"dur":2.25,"args":{"device":3,"stream":7}}],"baseTimeNanoseconds":1000000000}`
	tr, err := Read(strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, tr.Records, 1)
	r := tr.Records[0]
	assert.Equal(t, uint64(1_000_001_500), r.Start)
	assert.Equal(t, uint64(2250), r.End-r.Start)
	assert.Equal(t, uint16(3), r.Device)
	assert.Equal(t, []string{"k"}, tr.Names)
}

func TestKinds(t *testing.T) {
	t.Parallel()
	in := `{"traceEvents":[
	 {"ph":"X","cat":"gpu_memcpy","name":"Memcpy DtoH (Device -> Pageable)","ts":1,"dur":1,"args":{"device":0,"bytes":8}},
	 {"ph":"X","cat":"gpu_memset","name":"Memset (Device)","ts":2,"dur":1,"args":{"device":0,"bytes":4}},
	 {"ph":"X","cat":"cuda_sync","name":"Stream Sync","ts":3,"dur":1,"args":{"device":0,"cuda_sync_kind":"Stream Sync"}},
	 {"ph":"X","cat":"cpu_op","name":"aten::mm","ts":4,"dur":1,"args":{"device":"not a number"}},
	 {"ph":"i","cat":"kernel","name":"instant","ts":5}
	]}`
	tr, err := Read(strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, tr.Records, 3)
	assert.Equal(t, cuptiwire.RecordKindMemcpy, tr.Records[0].Kind)
	assert.Equal(t, uint8(2), tr.Records[0].Sub)
	assert.Equal(t, uint8(3), tr.Records[1].Sub)
	assert.Equal(t, uint8(3), tr.Records[2].Sub)
}

func TestBadTraces(t *testing.T) {
	t.Parallel()
	whole, err := os.ReadFile(filepath.Join(FixtureDir, "triton_example-triton_example.json.gz"))
	require.NoError(t, err, "the Kineto fixtures are in testdata/kineto")
	zr, err := gzip.NewReader(bytes.NewReader(whole))
	require.NoError(t, err)
	plain, err := io.ReadAll(zr)
	require.NoError(t, err)
	tests := []struct {
		name string
		in   string
	}{
		{"not json", "hello"},
		{"array", "[1,2]"},
		{"no traceEvents", `{"schemaVersion":1}`},
		{"half written", string(plain[:len(plain)/2])},
		{"traceEvents not array", `{"traceEvents":{}}`},
		{"bad ts", `{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":"x","dur":1}]}`},
		{"negative dur", `{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":-1}]}`},
		{"bad args", `{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":{"device":"x"}}]}`},
		{"empty", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Read(strings.NewReader(tt.in))
			require.Error(t, err)
		})
	}
}

func TestMicros(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]uint64{"12": 12000, "41.407": 41407, "1.76": 1760, "1695835572943613": 1695835572943613000, "0.0005": 0, "1e3": 1_000_000} {
		got, err := micros(json.Number(in))
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "-1", "1.x", "99999999999999999999"} {
		_, err := micros(json.Number(in))
		assert.Error(t, err, in)
	}
}

// FuzzRead feeds arbitrary bytes to the reader: an error or a trace whose
// records are well-formed, never a panic.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1.5,"dur":2,"args":{"device":0}}],"baseTimeNanoseconds":5}`))
	f.Add([]byte(`{"traceEvents":[{"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pinned -> Device)","ts":1,"dur":1,"args":{"bytes":9}}]}`))
	f.Add([]byte(`{"traceEvents":[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := Read(bytes.NewReader(b))
		if err != nil {
			return
		}
		for _, r := range tr.Records {
			if r.End < r.Start {
				t.Fatalf("record ends before it starts: %+v", r)
			}
			if r.Kind == cuptiwire.RecordKindKernel && (r.Name == 0 || int(r.Name) > len(tr.Names)) {
				t.Fatalf("kernel name id %d of %d", r.Name, len(tr.Names))
			}
		}
	})
}
