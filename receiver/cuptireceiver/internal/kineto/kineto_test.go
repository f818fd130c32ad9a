// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package kineto

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/cuptiwire"
)

// FixtureDir holds real Kineto traces recorded on GPUs (see its README).
var FixtureDir = filepath.Join("..", "..", "testdata", "kineto")

func fixtures(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(FixtureDir, "*.json.gz"))
	require.NoError(t, err)
	if len(files) == 0 {
		t.Fatalf("no Kineto fixtures under %s", FixtureDir)
	}
	return files
}

// collected is everything a Handler saw, copied.
type collected struct {
	names    map[uint32]string
	records  []cuptiwire.Record
	relative int // records handed over before the base time was known
}

func (c *collected) Kernel(id uint32, name []byte) {
	if c.names == nil {
		c.names = map[uint32]string{}
	}
	c.names[id] = string(name)
}

func (c *collected) Records(recs []cuptiwire.Record, absolute bool) {
	c.records = append(c.records, recs...)
	if !absolute {
		c.relative += len(recs)
	}
}

func read(t testing.TB, in string, lim Limits) (*collected, Summary) {
	t.Helper()
	c := &collected{}
	sum, err := Read(strings.NewReader(in), c, lim)
	require.NoError(t, err)
	return c, sum
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
			c := &collected{}
			sum, err := ReadFile(path, c, DefaultLimits)
			require.NoError(t, err)
			wantDur, wantCount, wantBytes := direct(t, path)
			require.NotEmpty(t, wantDur, "fixture has kernels")
			gotDur, gotCount := map[string]uint64{}, map[string]int{}
			var gotBytes uint64
			for _, r := range c.records {
				switch r.Kind {
				case cuptiwire.RecordKindKernel:
					name := c.names[r.Name]
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
			assert.Equal(t, uint64(len(c.records)), sum.Records)
			assert.Zero(t, c.relative, "fixtures fit one batch: base time applied before they leave")
		})
	}
}

// normal is a record with its kernel name resolved, comparable across readers.
type normal struct {
	cuptiwire.Record
	name string
}

func normalize(recs []cuptiwire.Record, name func(uint32) string) []normal {
	out := make([]normal, len(recs))
	for i, r := range recs {
		out[i] = normal{Record: r}
		if r.Kind == cuptiwire.RecordKindKernel {
			out[i].name = name(r.Name)
			out[i].Name = 0
		}
	}
	slices.SortFunc(out, func(a, b normal) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.End, b.End), cmp.Compare(a.Kind, b.Kind),
			cmp.Compare(a.Device, b.Device), cmp.Compare(a.Stream, b.Stream), cmp.Compare(a.Correlation, b.Correlation),
			cmp.Compare(a.name, b.name))
	})
	return out
}

// The streaming reader yields exactly the records the previous reader
// (encoding/json, oldreader_test.go) did on every real trace, in small
// batches too: the same kernels, durations, devices, streams, correlation
// ids, copies and syncs.
func TestSameRecordsAsPreviousReader(t *testing.T) {
	t.Parallel()
	for _, path := range fixtures(t) {
		for _, lim := range []Limits{DefaultLimits, {Batch: 97, Intervals: 1 << 20, NameBytes: 16 << 20}} {
			old, err := oldReadFile(path)
			require.NoError(t, err)
			c := &collected{}
			sum, err := ReadFile(path, c, lim)
			require.NoError(t, err)
			if c.relative > 0 {
				// Batches that left before baseTimeNanoseconds was read are
				// relative; shift them as the summary's range is.
				base := sum.Lo - slices.MinFunc(c.records, func(a, b cuptiwire.Record) int { return cmp.Compare(a.Start, b.Start) }).Start
				for i := range c.records {
					c.records[i].Start += base
					c.records[i].End += base
				}
			}
			want := normalize(old.Records, func(id uint32) string { return old.Names[id-1] })
			got := normalize(c.records, func(id uint32) string { return c.names[id] })
			require.Equal(t, len(want), len(got), path)
			assert.Equal(t, want, got, "%s batch %d", filepath.Base(path), lim.Batch)
		}
	}
}

func TestBaseTimeIsAdded(t *testing.T) {
	t.Parallel()
	ev := `{"ph":"X","cat":"kernel","name":"k","ts":1.5,"dur":2.25,"args":{"device":3,"stream":7}}`
	for _, in := range []string{
		`{"traceEvents":[` + ev + `],"baseTimeNanoseconds":1000000000}`, // PyTorch 2.x: after the events
		`{"baseTimeNanoseconds":1000000000,"traceEvents":[` + ev + `]}`, // Kineto now: before
	} {
		c, sum := read(t, in, DefaultLimits)
		require.Len(t, c.records, 1)
		r := c.records[0]
		assert.Equal(t, uint64(1_000_001_500), r.Start)
		assert.Equal(t, uint64(2250), r.End-r.Start)
		assert.Equal(t, uint16(3), r.Device)
		assert.Equal(t, uint32(7), r.Stream)
		assert.Equal(t, "k", c.names[r.Name])
		assert.Equal(t, uint64(1_000_001_500), sum.Lo)
		assert.Equal(t, uint64(1_000_003_750), sum.Hi)
		assert.Equal(t, []DeviceBusy{{Device: 3, NS: 2250}}, sum.Busy)
	}
}

// A file with more GPU events than one batch, base time after the events:
// the early batches leave relative, the summary's range is still in Unix
// time, and the busy union does not care.
func TestBaseTimeAfterManyEvents(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"traceEvents":[`)
	for i := range 10 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"ph":"X","cat":"kernel","name":"k","ts":` + itoa(10*i) + `,"dur":5,"args":{"device":0}}`)
	}
	b.WriteString(`],"baseTimeNanoseconds":7000000}`)
	c, sum := read(t, b.String(), Limits{Batch: 4, Intervals: 100, NameBytes: 100})
	assert.True(t, sum.Unordered)
	assert.Equal(t, 10, c.relative)
	assert.Equal(t, uint64(7_000_000), sum.Lo)
	assert.Equal(t, uint64(7_000_000+95_000), sum.Hi)
	assert.Equal(t, []DeviceBusy{{Device: 0, NS: 10 * 5000}}, sum.Busy)
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// The busy union is exact whatever the order and batching: two streams
// overlapping, given stream by stream as Kineto writes them.
func TestBusyUnion(t *testing.T) {
	t.Parallel()
	type iv struct{ s, e int }
	streams := [][]iv{
		{{0, 10}, {20, 30}, {40, 50}, {60, 70}},
		{{5, 25}, {45, 46}, {80, 90}},
	}
	var b strings.Builder
	b.WriteString(`{"traceEvents":[`)
	n := 0
	for si, st := range streams {
		for _, x := range st {
			if n > 0 {
				b.WriteByte(',')
			}
			n++
			b.WriteString(`{"ph":"X","cat":"kernel","name":"k","ts":` + itoa(x.s) + `,"dur":` + itoa(x.e-x.s) + `,"args":{"device":1,"stream":` + itoa(si) + `}}`)
		}
	}
	b.WriteString(`,{"ph":"X","cat":"cuda_sync","name":"Stream Sync","ts":90,"dur":100,"args":{"device":1}}]}`)
	// Union: [0,30) [40,50) [60,70) [80,90) = 60 µs; the sync is host time.
	for _, batch := range []int{1, 2, 3, 100} {
		_, sum := read(t, b.String(), Limits{Batch: batch, Intervals: 100, NameBytes: 100})
		assert.Equal(t, []DeviceBusy{{Device: 1, NS: 60_000}}, sum.Busy, "batch %d", batch)
		assert.Zero(t, sum.BusyOverstated)
	}
	// Past the interval limit the smallest gaps are merged, and the summary
	// says by how much busy time is overstated.
	_, sum := read(t, b.String(), Limits{Batch: 1, Intervals: 2, NameBytes: 100})
	require.Len(t, sum.Busy, 1)
	assert.Positive(t, sum.BusyOverstated)
	assert.Greater(t, sum.Busy[0].NS, uint64(60_000))
	assert.LessOrEqual(t, sum.Busy[0].NS, uint64(60_000)+sum.BusyOverstated)
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
	c, sum := read(t, in, DefaultLimits)
	require.Len(t, c.records, 3)
	assert.Equal(t, cuptiwire.RecordKindMemcpy, c.records[0].Kind)
	assert.Equal(t, uint8(2), c.records[0].Sub)
	assert.Equal(t, uint64(8), c.records[0].Bytes)
	assert.Equal(t, uint8(3), c.records[1].Sub)
	assert.Equal(t, uint8(3), c.records[2].Sub)
	assert.Equal(t, uint64(5), sum.Events)
}

// Kernel names past the name-table limit go to the overflow id 0 and are
// counted, instead of growing the table.
func TestNameLimit(t *testing.T) {
	t.Parallel()
	in := `{"traceEvents":[
	 {"ph":"X","cat":"kernel","name":"aaaa","ts":1,"dur":1},
	 {"ph":"X","cat":"kernel","name":"bbbb","ts":2,"dur":1},
	 {"ph":"X","cat":"kernel","name":"aaaa","ts":3,"dur":1}]}`
	c, sum := read(t, in, Limits{Batch: 10, Intervals: 10, NameBytes: 5})
	require.Len(t, c.records, 3)
	assert.Equal(t, []uint32{1, 0, 1}, []uint32{c.records[0].Name, c.records[1].Name, c.records[2].Name})
	assert.Equal(t, uint64(1), sum.Overflow)
	assert.Equal(t, map[uint32]string{1: "aaaa"}, c.names)
}

// The decoder surfaces what issue 13 will join: runtime launches with the
// correlation ids of the kernels they launched, and ProfilerStep#N ranges.
func TestDecoderSurfacesLaunchesAndAnnotations(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"nccl_parser_config-nccl_data.json.gz", "triton_example-triton_example.json.gz"} {
		f, err := os.Open(filepath.Join(FixtureDir, name))
		require.NoError(t, err)
		zr, err := gzip.NewReader(f)
		require.NoError(t, err)
		d := NewDecoder(zr, AllCategories)
		kernels, launches := map[int64]bool{}, map[int64]bool{}
		var steps []string
		var ev Event
		for {
			ok, err := d.Next(&ev)
			require.NoError(t, err)
			if !ok {
				break
			}
			switch ev.Cat {
			case CatKernel:
				kernels[ev.Corr] = true
			case CatRuntime, CatDriver:
				require.True(t, ev.HasTS && ev.HasDur)
				launches[ev.Corr] = true
			case CatUserAnnotation:
				if bytes.HasPrefix(ev.Name, []byte("ProfilerStep#")) {
					require.True(t, ev.HasTS && ev.HasDur && ev.Dur > 0)
					steps = append(steps, string(ev.Name))
				}
			}
		}
		f.Close()
		require.NotEmpty(t, kernels, name)
		for corr := range kernels {
			assert.True(t, launches[corr], "%s: kernel correlation %d has its launch", name, corr)
		}
		assert.NotEmpty(t, steps, name)
	}
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
		{"no dur", `{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1}]}`},
		{"negative dur", `{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":-1}]}`},
		{"bad args", `{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":{"device":}}]}`},
		{"bad number", `{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":01,"dur":1}]}`},
		{"trailing comma", `{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1},]}`},
		{"unterminated string", `{"traceEvents":[{"ph":"X","cat":"kernel","name":"k`},
		{"control char", "{\"traceEvents\":[{\"name\":\"a\x01b\"}]}"},
		{"deep nesting", `{"x":` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `,"traceEvents":[]}`},
		{"base not integer", `{"baseTimeNanoseconds":1.5,"traceEvents":[]}`},
		{"empty", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Read(strings.NewReader(tt.in), &collected{}, DefaultLimits)
			require.Error(t, err)
		})
	}
}

// Strings with escapes, split across the scanner's buffer at every point.
func TestEscapesAcrossReads(t *testing.T) {
	t.Parallel()
	in := `{"traceEvents":[{"ph":"X","cat":"kernel","name":"a\"b\\c\u00e9\ud83d\ude00\/","ts":1,"dur":2,"args":{"device":0}}]}`
	for i := 1; i < len(in); i++ {
		c := &collected{}
		_, err := Read(&chunked{data: []byte(in), n: i}, c, DefaultLimits)
		require.NoError(t, err, "chunk %d", i)
		require.Len(t, c.records, 1)
		assert.Equal(t, "a\"b\\cé😀/", c.names[1], "chunk %d", i)
	}
}

// chunked returns at most n bytes per Read.
type chunked struct {
	data []byte
	n    int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), c.n)], c.data)
	c.data = c.data[k:]
	return k, nil
}

func TestParseMicros(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]uint64{"12": 12000, "41.407": 41407, "1.76": 1760, "1695835572943613": 1695835572943613000, "0.0005": 0, "1e3": 1_000_000} {
		got, err := parseMicros([]byte(in))
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
		old, err := oldMicros(json.Number(in))
		require.NoError(t, err, in)
		assert.Equal(t, old, got, "same as the previous reader: %s", in)
	}
	for _, in := range []string{"", "-1", "1.x", "99999999999999999999"} {
		_, err := parseMicros([]byte(in))
		assert.Error(t, err, in)
	}
}

// FuzzRead feeds arbitrary bytes to the reader: an error or records that
// are well-formed, never a panic; and where the previous reader
// (encoding/json) accepts the input too, both yield the same records.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1.5,"dur":2,"args":{"device":0}}],"baseTimeNanoseconds":5}`))
	f.Add([]byte(`{"traceEvents":[{"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pinned -> Device)","ts":1,"dur":1,"args":{"bytes":9}}]}`))
	f.Add([]byte(`{"traceEvents":[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := &collected{}
		sum, err := Read(bytes.NewReader(b), c, Limits{Batch: 3, Intervals: 4, NameBytes: 64})
		if err != nil {
			return
		}
		for _, r := range c.records {
			if r.End < r.Start {
				t.Fatalf("record ends before it starts: %+v", r)
			}
			if _, ok := c.names[r.Name]; r.Kind == cuptiwire.RecordKindKernel && r.Name != 0 && !ok {
				t.Fatalf("kernel name id %d never defined", r.Name)
			}
		}
		if sum.Records != uint64(len(c.records)) {
			t.Fatalf("summary says %d records, handler got %d", sum.Records, len(c.records))
		}
		old, err := oldRead(bytes.NewReader(b))
		if err != nil || c.relative > 0 || sum.Overflow > 0 || caseVariantKeys(b) || duplicateKeys(b) {
			return
		}
		want := normalize(old.Records, func(id uint32) string { return old.Names[id-1] })
		got := normalize(c.records, func(id uint32) string { return c.names[id] })
		if len(want) != len(got) {
			t.Fatalf("previous reader: %d records, this one %d", len(want), len(got))
		}
		for i := range want {
			if want[i] != got[i] {
				t.Fatalf("record %d: previous reader %+v, this one %+v", i, want[i], got[i])
			}
		}
	})
}

// caseVariantKeys reports whether an event or its args has a key that
// matches one the readers use only without regard to case ("CAt"):
// encoding/json takes those, Kineto never writes them, and the streaming
// reader does not.
func caseVariantKeys(b []byte) bool {
	var doc struct {
		TraceEvents []map[string]json.RawMessage `json:"traceEvents"`
	}
	if json.Unmarshal(b, &doc) != nil {
		return true
	}
	known := []string{"ph", "cat", "name", "ts", "dur", "args", "device", "stream", "correlation", "bytes", "cuda_sync_kind", "traceEvents", "baseTimeNanoseconds"}
	variant := func(m map[string]json.RawMessage) bool {
		for k := range m {
			for _, kn := range known {
				if strings.EqualFold(k, kn) && k != kn {
					return true
				}
			}
		}
		return false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil || variant(top) {
		return true
	}
	for _, ev := range doc.TraceEvents {
		if variant(ev) {
			return true
		}
		var args map[string]json.RawMessage
		if a, ok := ev["args"]; ok && json.Unmarshal(a, &args) == nil && variant(args) {
			return true
		}
	}
	return false
}

// The pipelined gunzip stops with the reader: a file whose JSON is bad
// early ends the read, and the decompressing goroutine with it.
func TestReadFileStopsGunzipOnError(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write([]byte(`{"traceEvents":[{"ph":"X",` + strings.Repeat(" ", 4<<20) + `}`))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	path := filepath.Join(t.TempDir(), "bad.json.gz")
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o600))
	_, err = ReadFile(path, &collected{}, DefaultLimits)
	require.ErrorIs(t, err, ErrSyntax)
}

// duplicateKeys reports whether some object repeats a key: encoding/json
// keeps the last value, the streaming reader may have acted on the first
// (a second "cat" after a first one it skips), and Kineto never repeats one.
func duplicateKeys(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	type level struct {
		obj  bool
		keys map[string]bool
		key  bool // the next string token is a key
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if top != nil && top.obj {
					top.key = true
				}
				stack = append(stack, &level{obj: v == '{', keys: map[string]bool{}, key: v == '{'})
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].obj {
					stack[len(stack)-1].key = true
				}
			}
		case string:
			if top != nil && top.obj && top.key {
				if top.keys[v] {
					return true
				}
				top.keys[v] = true
				top.key = false
				continue
			}
			if top != nil && top.obj {
				top.key = true
			}
		default:
			if top != nil && top.obj {
				top.key = true
			}
		}
	}
}
