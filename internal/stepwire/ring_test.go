// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func unsafeBytes(words []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
}

// newMem returns zeroed memory for a ring of capacity c, 8-byte aligned as
// a mapping is.
func newMem(c int) []byte {
	words := make([]uint64, (RingHeaderBytes+c)/8)
	return unsafeBytes(words)
}

func readAll(t *testing.T, r *Ring, final bool) [][]byte {
	t.Helper()
	var got [][]byte
	buf := make([]byte, MaxDatagram)
	_, err := r.Read(buf, final, func(b []byte) { got = append(got, bytes.Clone(b)) })
	require.NoError(t, err)
	return got
}

// record returns an encoded step of a size that varies with i, so records
// land at every offset and some straddle the ring's end.
func record(i int) []byte {
	s := validStep()
	s.Index = uint64(i + 1)
	s.RequestIDs = s.RequestIDs[:0]
	s.RequestTokens = s.RequestTokens[:0]
	for k := range i % 7 {
		s.RequestIDs = append(s.RequestIDs, string(rune('a'+k)))
		s.RequestTokens = append(s.RequestTokens, 1)
	}
	return Encode(s)
}

func TestRingCarriesRecordsInOrderAcrossTheEnd(t *testing.T) {
	for _, lag := range []bool{false, true} {
		mem := newMem(1024)
		w := NewRingWriter(mem, 42, 7)
		r, err := NewRing(mem)
		require.NoError(t, err)
		r.SetLag(lag)
		assert.Equal(t, RingHeader{Capacity: 1024, PID: 7, ID: 42}, r.Header)
		var want, got [][]byte
		next := 0
		for round := range 200 {
			for range round % 5 {
				rec := record(next)
				if !w.Write(rec) {
					break
				}
				want = append(want, rec)
				next++
			}
			got = append(got, readAll(t, r, false)...)
		}
		got = append(got, readAll(t, r, true)...)
		require.Equal(t, len(want), len(got), "lag %v", lag)
		for i := range want {
			require.Equal(t, want[i], got[i], "record %d, lag %v", i, lag)
		}
		assert.Greater(t, w.w, uint64(10*1024), "wrapped many times")
		assert.Equal(t, uint64(len(want)), r.records)
		assert.Equal(t, w.w, binary.LittleEndian.Uint64(mem[ringOffRead:]), "the read index is shared")
		assert.Equal(t, uint64(len(want)), binary.LittleEndian.Uint64(mem[ringOffReadRecords:]))
	}
}

func TestRingLagReadsOnlyWhatThePreviousPollSaw(t *testing.T) {
	mem := newMem(1024)
	w := NewRingWriter(mem, 1, 1)
	r, err := NewRing(mem)
	require.NoError(t, err)
	r.SetLag(true)
	require.True(t, w.Write(record(1)))
	assert.Empty(t, readAll(t, r, false), "published after the previous poll")
	require.True(t, w.Write(record(2)))
	assert.Equal(t, [][]byte{record(1)}, readAll(t, r, false))
	assert.Equal(t, [][]byte{record(2)}, readAll(t, r, true), "a finished writer's records are all visible")
}

func TestRingFullRefusesAndRecovers(t *testing.T) {
	mem := newMem(256)
	w := NewRingWriter(mem, 1, 1)
	r, err := NewRing(mem)
	require.NoError(t, err)
	r.SetLag(false)
	n := 0
	for w.Write(record(0)) {
		n++
	}
	require.Positive(t, n)
	assert.Len(t, readAll(t, r, false), n)
	assert.True(t, w.Write(record(0)), "room again once read")
}

func TestRingSecondReaderGoesOnWhereTheFirstStopped(t *testing.T) {
	mem := newMem(1024)
	w := NewRingWriter(mem, 1, 1)
	for i := range 3 {
		require.True(t, w.Write(record(i)))
	}
	r1, err := NewRing(mem)
	require.NoError(t, err)
	r1.SetLag(false)
	require.Len(t, readAll(t, r1, false), 3)
	for i := 3; i < 6; i++ {
		require.True(t, w.Write(record(i)))
	}
	// A restarted collector maps the same ring again.
	r2, err := NewRing(mem)
	require.NoError(t, err)
	r2.SetLag(false)
	assert.Equal(t, [][]byte{record(3), record(4), record(5)}, readAll(t, r2, false), "nothing twice, nothing lost")
}

func TestRingHostileWriter(t *testing.T) {
	buf := make([]byte, MaxDatagram)
	setup := func(t *testing.T) ([]byte, *RingWriter, *Ring) {
		mem := newMem(1024)
		w := NewRingWriter(mem, 1, 1)
		r, err := NewRing(mem)
		require.NoError(t, err)
		r.SetLag(false)
		return mem, w, r
	}
	le := binary.LittleEndian
	first := uint64(ringFrame + len(record(2))) // where the second record starts
	for _, tc := range []struct {
		name    string
		corrupt func(mem []byte, w *RingWriter)
	}{
		{"write index beyond capacity", func(mem []byte, _ *RingWriter) { le.PutUint64(mem[ringOffWrite:], 5000) }},
		{"write index behind the reader", func(mem []byte, _ *RingWriter) { le.PutUint64(mem[ringOffWrite:], 8) }},
		{"zero-length frame", func(mem []byte, w *RingWriter) { le.PutUint32(mem[RingHeaderBytes+first:], 0) }},
		{"frame longer than published", func(mem []byte, w *RingWriter) { le.PutUint32(mem[RingHeaderBytes+first:], 900) }},
		{"frame over the datagram limit", func(mem []byte, w *RingWriter) { le.PutUint32(mem[RingHeaderBytes+first:], 1<<31) }},
		{"index inside a frame", func(mem []byte, w *RingWriter) { le.PutUint64(mem[ringOffWrite:], first+2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem, w, r := setup(t)
			require.True(t, w.Write(record(2)))
			require.Len(t, readAll(t, r, false), 1)
			require.True(t, w.Write(record(3)))
			tc.corrupt(mem, w)
			n, err := r.Read(buf, false, func([]byte) { t.Fatal("a corrupt record was handed over") })
			require.ErrorIs(t, err, ErrRingIndex)
			assert.Zero(t, n)
			// The reader skipped to the writer's position and goes on.
			w.w = le.Uint64(mem[ringOffWrite:])
			if w.w < r.read {
				w.w = r.read
			}
			require.True(t, w.Write(record(4)))
			assert.Equal(t, [][]byte{record(4)}, readAll(t, r, false))
		})
	}
	t.Run("record garbled, frame sound", func(t *testing.T) {
		mem, w, r := setup(t)
		require.True(t, w.Write(record(3)))
		mem[RingHeaderBytes+ringFrame] = 'X' // the record's magic
		got := readAll(t, r, false)
		require.Len(t, got, 1, "the frame is sound: the record is handed over")
		var s Step
		assert.ErrorIs(t, Decode(got[0], &s), ErrMagic, "and the decoder refuses it")
	})
}

func TestRingHeaderErrors(t *testing.T) {
	good := func() []byte {
		mem := newMem(1024)
		NewRingWriter(mem, 9, 9)
		return mem
	}
	le := binary.LittleEndian
	for name, mem := range map[string][]byte{
		"short":            make([]byte, 100),
		"magic":            func() []byte { m := good(); m[0] = 'X'; return m }(),
		"version":          func() []byte { m := good(); le.PutUint16(m[4:], 2); return m }(),
		"header size":      func() []byte { m := good(); le.PutUint32(m[8:], 8192); return m }(),
		"not a power of 2": func() []byte { m := good(); le.PutUint32(m[12:], 1000); return m }(),
		"too small":        func() []byte { m := good(); le.PutUint32(m[12:], 8); return m }(),
		"size mismatch":    func() []byte { m := good(); le.PutUint32(m[12:], 512); return m }(),
		"too large":        func() []byte { m := good(); le.PutUint32(m[12:], 1<<31); return m }(),
	} {
		_, err := NewRing(mem)
		assert.ErrorIs(t, err, ErrRingHeader, name)
	}
	mem := good()
	le.PutUint64(mem[ringOffRead:], 10_000)
	r, err := NewRing(mem)
	require.ErrorIs(t, err, ErrRingIndex, "a read index past the writer's")
	require.NotNil(t, r, "is replaced by the write index; the ring stays usable")
	assert.Zero(t, r.read)
}

func TestRingSleepRefusesWhileRecordsWait(t *testing.T) {
	mem := newMem(1024)
	w := NewRingWriter(mem, 1, 1)
	r, err := NewRing(mem)
	require.NoError(t, err)
	r.SetLag(false)
	assert.True(t, r.Sleep(1), "nothing to read: the reader may sleep")
	assert.Equal(t, uint64(1), binary.LittleEndian.Uint64(mem[ringOffSleep:]))
	require.True(t, w.Write(record(0)))
	assert.False(t, r.Sleep(3), "a record waits")
	assert.True(t, r.Sleep(4), "awake")
	r.Beat()
	r.Beat()
	assert.Equal(t, uint64(2), binary.LittleEndian.Uint64(mem[ringOffBeat:]))
}

// TestPythonRing reads a ring the real hook wrote (its emitter's own write
// path; see integrations/python/tools/gen_step_fixture.py): the records a
// reader had not consumed, one of them across the ring's end, must decode
// to what Python's decoder read from them.
func TestPythonRing(t *testing.T) {
	mem := newMem(1024)
	img, err := os.ReadFile(filepath.Join("testdata", "ring", "vllm_wrapped.bin"))
	require.NoError(t, err)
	require.Len(t, img, len(mem))
	copy(mem, img)
	js, err := os.ReadFile(filepath.Join("testdata", "ring", "vllm_wrapped.json"))
	require.NoError(t, err)
	var want []pyStep
	require.NoError(t, json.Unmarshal(js, &want))

	r, err := NewRing(mem)
	require.NoError(t, err)
	got := readAll(t, r, true)
	require.Len(t, got, len(want))
	for i, b := range got {
		var s Step
		require.NoError(t, Decode(b, &s))
		assert.Equal(t, want[i].Step, s.Index)
		assert.Equal(t, want[i].RequestIDs, nilIfEmpty(s.RequestIDs))
		assert.Equal(t, want[i].InstanceID, s.InstanceID)
		assert.Equal(t, want[i].EndNs, s.EndUnixNs)
	}
}

// FuzzRing lays fuzzed indexes and records under a valid header: the
// reader must never panic, never hand over more than was published, and
// whatever it hands over is decoded without a panic. The input is the write
// index, the read index, then the records area (its length, rounded up to
// a power of two, is the capacity).
func FuzzRing(f *testing.F) {
	for i := range 4 {
		mem := newMem(256)
		w := NewRingWriter(mem, 1, 1)
		for k := range 3 + i {
			w.Write(record(k))
		}
		f.Add(append(append(bytes.Clone(mem[ringOffWrite:ringOffWrite+8]), mem[ringOffRead:ringOffRead+8]...), mem[RingHeaderBytes:]...))
	}
	buf := make([]byte, MaxDatagram)
	big := newMem(1 << 16)
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 16+RingMinCapacity || len(in) > 16+(1<<16) {
			return
		}
		c := 1
		for c < len(in)-16 {
			c <<= 1
		}
		mem := big[:RingHeaderBytes+c]
		clear(mem)
		NewRingWriter(mem, 1, 1)
		copy(mem[ringOffWrite:], in[:8])
		copy(mem[ringOffRead:], in[8:16])
		copy(mem[RingHeaderBytes:], in[16:])
		r, _ := NewRing(mem)
		require.NotNil(t, r)
		r.SetLag(false)
		var s Step
		total := uint64(0)
		start := r.read
		n, _ := r.Read(buf, true, func(b []byte) {
			if len(b) == 0 || len(b) > MaxDatagram {
				t.Fatalf("record of %d bytes", len(b))
			}
			total += uint64(len(b)) + ringFrame
			_ = Decode(b, &s)
		})
		if total > uint64(c) || (n > 0 && total > r.read-start) {
			t.Fatalf("handed over %d bytes of a %d-byte ring", total, c)
		}
	})
}
