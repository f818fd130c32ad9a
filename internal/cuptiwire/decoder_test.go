// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptiwire

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// collect is a Handler that keeps copies of what it is handed.
type collect struct {
	hello   Hello
	host    string
	strings map[uint32]string
	recs    []Record
	stats   []Stats
	live    []Liveness
	clocks  []Clock
}

func (c *collect) Hello(h Hello) error {
	c.hello, c.host = h, string(h.Host)
	return nil
}

func (c *collect) String(id uint32, s []byte) error {
	if c.strings == nil {
		c.strings = map[uint32]string{}
	}
	c.strings[id] = string(s)
	return nil
}

func (c *collect) Records(recs []Record) error {
	c.recs = append(c.recs, recs...)
	return nil
}

func (c *collect) Stats(s Stats) error {
	c.stats = append(c.stats, s)
	return nil
}

func (c *collect) Liveness(l Liveness) error {
	c.live = append(c.live, l)
	return nil
}

func (c *collect) Clock(k Clock) error {
	c.clocks = append(c.clocks, k)
	return nil
}

func kernel(name uint32, start, dur uint64) Record {
	return Record{Kind: RecordKindKernel, Device: 1, Stream: 7, Start: start, End: start + dur, Name: name, Correlation: 42, GraphID: 3}
}

// v1Stream is what libraries before sized records sent: version-1 records
// and 24-byte stats.
func v1Stream() []byte {
	b := AppendHello(nil, 4242, 1_700_000_000_000_000_000, "gpu-node-1")
	b = AppendString(b, 1, "void flash::flash_fwd_kernel<128>(Flash_fwd_params)")
	b = AppendRecords(b, []Record{
		kernel(1, 1000, 500),
		{Kind: RecordKindMemcpy, Sub: 1, Device: 1, Start: 2000, End: 2100, Bytes: 4096},
		{Kind: RecordKindSync, Sub: 3, Device: DeviceUnknown, Start: 2200, End: 2300},
	})
	return AppendStatsV1(b, Stats{DroppedRecords: 3, CUPTIDropped: 1, NamesOverflow: 0})
}

// validStream is what the library sends now.
func validStream() []byte {
	b := AppendHelloFlags(nil, 4242, HelloGraphMode, 1_700_000_000_000_000_000, "gpu-node-1")
	b = AppendString(b, 1, "void flash::flash_fwd_kernel<128>(Flash_fwd_params)")
	k := kernel(1, 1000, 500)
	k.GraphNode = 1 << 40
	b = AppendRecords2(b, []Record{k, {Kind: RecordKindGraph, Device: 1, Start: 1000, End: 3000, GraphID: 3}})
	b = AppendStats(b, Stats{DroppedRecords: 3, CUPTIDropped: 1, PoolExhausted: 4, OverflowDropped: 5, RateLimited: 6, GraphTableResets: 7})
	b = AppendLiveness(b, Liveness{LastBufferUnixNS: 9, Launches: 10, BuffersCompleted: 11, FreeBuffers: 7, TotalBuffers: 8, State: LiveEnabled | LiveDisplaced, Resumes: 2, CUPTIVersion: 130000})
	return AppendClock(b, Clock{OffsetNS: -12345, ErrorNS: 250, SampledUnixNS: 99})
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	var c collect
	d := NewDecoder(bytes.NewReader(validStream()), &c)
	require.NoError(t, d.Run())
	assert.Equal(t, uint64(6), d.Frames())
	assert.Equal(t, HelloGraphMode, c.hello.Flags)
	require.Len(t, c.recs, 2)
	want := kernel(1, 1000, 500)
	want.GraphNode = 1 << 40
	assert.Equal(t, want, c.recs[0])
	assert.Equal(t, RecordKindGraph, c.recs[1].Kind)
	assert.Equal(t, []Stats{{DroppedRecords: 3, CUPTIDropped: 1, PoolExhausted: 4, OverflowDropped: 5, RateLimited: 6, GraphTableResets: 7}}, c.stats)
	assert.Equal(t, []Liveness{{LastBufferUnixNS: 9, Launches: 10, BuffersCompleted: 11, FreeBuffers: 7, TotalBuffers: 8, State: LiveEnabled | LiveDisplaced, Resumes: 2, CUPTIVersion: 130000}}, c.live)
	assert.Equal(t, []Clock{{OffsetNS: -12345, ErrorNS: 250, SampledUnixNS: 99}}, c.clocks)
}

// Frames of libraries built before sized records still decode.
func TestVersion1FramesDecode(t *testing.T) {
	t.Parallel()
	var c collect
	d := NewDecoder(bytes.NewReader(v1Stream()), &c)
	require.NoError(t, d.Run())
	assert.Equal(t, uint64(4), d.Frames())
	assert.Equal(t, uint32(4242), c.hello.PID)
	assert.Equal(t, "gpu-node-1", c.host)
	assert.Equal(t, "void flash::flash_fwd_kernel<128>(Flash_fwd_params)", c.strings[1])
	require.Len(t, c.recs, 3)
	assert.Equal(t, kernel(1, 1000, 500), c.recs[0])
	assert.Equal(t, uint64(4096), c.recs[1].Bytes)
	assert.Equal(t, []Stats{{DroppedRecords: 3, CUPTIDropped: 1}}, c.stats)
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	hello := AppendHello(nil, 1, 0, "h")
	withName := AppendString(append([]byte(nil), hello...), 1, "k")
	rec := func(r Record) []byte { return AppendRecords(append([]byte(nil), withName...), []Record{r}) }
	badMagic := append([]byte(nil), hello...)
	badMagic[0] = 'X'
	badVersion := append([]byte(nil), hello...)
	badVersion[4] = 9
	hugeLen := append([]byte(nil), hello...)
	binary.LittleEndian.PutUint32(hugeLen[8:], MaxPayload+1)
	unknownFrame := append([]byte(nil), hello...)
	unknownFrame = append(unknownFrame, AppendHeader(nil, FrameType(77), 0)...)
	oddRecords := append(AppendHeader(append([]byte(nil), withName...), FrameTypeRecords, 47), make([]byte, 47)...)

	tests := []struct {
		name  string
		input []byte
		want  error
	}{
		{"truncated header", hello[:7], io.ErrUnexpectedEOF},
		{"truncated payload", hello[:len(hello)-1], io.ErrUnexpectedEOF},
		{"bad magic", badMagic, ErrBadMagic},
		{"bad version", badVersion, ErrBadVersion},
		{"absurd length", hugeLen, ErrFrameTooLarge},
		{"unknown frame type", unknownFrame, ErrUnknownFrame},
		{"records before hello", AppendRecords(nil, []Record{kernel(1, 0, 1)}), ErrHelloMissing},
		{"second hello", AppendHello(append([]byte(nil), hello...), 2, 0, ""), ErrBadPayload},
		{"unknown record kind", rec(Record{Kind: 9}), ErrUnknownRecord},
		{"zero record kind", rec(Record{}), ErrUnknownRecord},
		{"undefined name", rec(kernel(2, 0, 1)), ErrUndefinedName},
		{"name id zero", rec(kernel(0, 0, 1)), ErrUndefinedName},
		{"end before start", rec(Record{Kind: RecordKindMemcpy, Start: 10, End: 5}), ErrBadTimestamps},
		{"records not a multiple of 48", oddRecords, ErrBadPayload},
		{"string id zero", AppendString(append([]byte(nil), hello...), 0, "x"), ErrStringIDBounds},
		{"string id too large", AppendString(append([]byte(nil), hello...), MaxStringID, "x"), ErrStringIDBounds},
		{"stats wrong size", append(AppendHeader(append([]byte(nil), hello...), FrameTypeStats, 8), make([]byte, 8)...), ErrBadPayload},
		{"stats between versions", append(AppendHeader(append([]byte(nil), hello...), FrameTypeStats, 32), make([]byte, 32)...), ErrBadPayload},
		{"sized records without size", append(AppendHeader(append([]byte(nil), withName...), FrameTypeRecords2, 2), 0, 0), ErrBadPayload},
		{"record size under 48", sized(withName, 40, 40), ErrBadPayload},
		{"record size not whole words", sized(withName, 60, 60), ErrBadPayload},
		{"record size over limit", sized(withName, 264, 264), ErrBadPayload},
		{"sized records not a multiple", sized(withName, 56, 60), ErrBadPayload},
		{"liveness too short", append(AppendHeader(append([]byte(nil), hello...), FrameTypeLiveness, 40), make([]byte, 40)...), ErrBadPayload},
		{"clock too short", append(AppendHeader(append([]byte(nil), hello...), FrameTypeClock, 16), make([]byte, 16)...), ErrBadPayload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := NewDecoder(bytes.NewReader(tt.input), &collect{}).Run()
			require.ErrorIs(t, err, tt.want)
		})
	}
}

// sized builds a records frame of type 5 with record size size and n bytes
// of (zero) records after the size prefix.
func sized(prefix []byte, size uint16, n int) []byte {
	b := AppendHeader(append([]byte(nil), prefix...), FrameTypeRecords2, 4+n)
	b = binary.LittleEndian.AppendUint16(b, size)
	b = binary.LittleEndian.AppendUint16(b, 0)
	return append(b, make([]byte, n)...)
}

func TestCleanEOFBetweenFrames(t *testing.T) {
	t.Parallel()
	require.NoError(t, NewDecoder(bytes.NewReader(nil), &collect{}).Run())
}

func TestResetForgetsNames(t *testing.T) {
	t.Parallel()
	var c collect
	d := NewDecoder(bytes.NewReader(validStream()), &c)
	require.NoError(t, d.Run())
	// A new connection must define its names again.
	next := AppendRecords(AppendHello(nil, 1, 0, ""), []Record{kernel(1, 0, 1)})
	d.Reset(bytes.NewReader(next))
	require.ErrorIs(t, d.Run(), ErrUndefinedName)
}

func TestDecodeAllocatesNothingPerFrame(t *testing.T) {
	recs := make([]Record, 1000)
	for i := range recs {
		recs[i] = kernel(1, uint64(i)*10, 5)
	}
	body := AppendRecords(nil, recs)
	stream := AppendString(AppendHello(nil, 1, 0, ""), 1, "k")
	r := bytes.NewReader(nil)
	d := NewDecoder(r, nopHandler{})
	var frames []byte
	for range 10 {
		frames = append(frames, body...)
	}
	all := append(stream, frames...)
	r.Reset(all)
	require.NoError(t, d.Run()) // warm the buffers
	allocs := testing.AllocsPerRun(20, func() {
		r.Reset(frames)
		if err := d.Run(); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

type nopHandler struct{}

func (nopHandler) Hello(Hello) error           { return nil }
func (nopHandler) String(uint32, []byte) error { return nil }
func (nopHandler) Records([]Record) error      { return nil }
func (nopHandler) Stats(Stats) error           { return nil }
func (nopHandler) Liveness(Liveness) error     { return nil }
func (nopHandler) Clock(Clock) error           { return nil }

// A newer library's longer records and counters decode with the fields known
// here; the rest is skipped.
func TestLongerRecordsAndCountersDecode(t *testing.T) {
	t.Parallel()
	b := AppendString(AppendHello(nil, 1, 0, "h"), 1, "k")
	const size = 64
	b = AppendHeader(b, FrameTypeRecords2, 4+2*size)
	b = binary.LittleEndian.AppendUint16(b, size)
	b = binary.LittleEndian.AppendUint16(b, 0)
	for i := range 2 {
		r := kernel(1, uint64(i)*10, 5)
		b = AppendRecord(b, &r)
		b = binary.LittleEndian.AppendUint64(b, uint64(100+i)) // graph node
		b = binary.LittleEndian.AppendUint64(b, 0xdeadbeef)    // a field from the future
	}
	b = AppendHeader(b, FrameTypeStats, 72)
	for i := range 9 {
		b = binary.LittleEndian.AppendUint64(b, uint64(i+1))
	}
	var c collect
	require.NoError(t, NewDecoder(bytes.NewReader(b), &c).Run())
	require.Len(t, c.recs, 2)
	assert.Equal(t, uint64(101), c.recs[1].GraphNode)
	assert.Equal(t, uint64(10), c.recs[1].Start)
	assert.Equal(t, Stats{DroppedRecords: 1, CUPTIDropped: 2, NamesOverflow: 3, PoolExhausted: 4, OverflowDropped: 5, RateLimited: 6, LaunchesDropped: 7, GraphTableResets: 8}, c.stats[0])
}

// FuzzDecoder feeds arbitrary bytes to the decoder: it must return an error
// or nil, never panic, and never hand a kernel with an undefined name on.
func FuzzDecoder(f *testing.F) {
	f.Add(validStream())
	f.Add(v1Stream())
	f.Add(AppendHello(nil, 1, 0, ""))
	f.Add(AppendRecords(AppendString(AppendHello(nil, 1, 0, "h"), 3, "k"), []Record{kernel(3, 1, 2), kernel(4, 1, 2)}))
	f.Add([]byte("IPCU\x01\x03\x00\x00\xff\xff\xff\xff"))
	f.Add(correlationStream())
	f.Add(graphStream())
	f.Fuzz(func(t *testing.T, b []byte) {
		c := &checking{defined: map[uint32]bool{}}
		_ = NewDecoder(bytes.NewReader(b), c).Run()
		if c.bad != "" {
			t.Fatal(c.bad)
		}
	})
}

type checking struct {
	defined map[uint32]bool
	bad     string
}

func (c *checking) Hello(Hello) error { return nil }
func (c *checking) String(id uint32, s []byte) error {
	if len(s) > MaxStringLen {
		c.bad = "string over limit"
	}
	c.defined[id] = true
	return nil
}

func (c *checking) Records(recs []Record) error {
	for _, r := range recs {
		if r.Kind == RecordKindKernel && !c.defined[r.Name] {
			c.bad = "kernel with undefined name passed on"
		}
		if r.End < r.Start {
			c.bad = "negative duration passed on"
		}
	}
	return nil
}
func (c *checking) Graph(Graph) error       { return nil }
func (c *checking) Stats(Stats) error       { return nil }
func (c *checking) Liveness(Liveness) error { return nil }
func (c *checking) Clock(Clock) error       { return nil }
