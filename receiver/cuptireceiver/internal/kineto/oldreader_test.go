// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package kineto

// The reader this package had before the streaming decoder (git history:
// receiver/cuptireceiver/internal/kineto/kineto.go at ad81a40), kept as the
// reference the new reader is tested and benchmarked against: encoding/json
// over traceEvents, every GPU record held and sorted.

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/inferprof/inferprof/internal/cuptiwire"
)

// oldMaxRecords bounds the GPU events taken from one file, so a huge or hostile
// file cannot exhaust memory.
const oldMaxRecords = 4 << 20

// Trace is what a file held: GPU activity records in start order, and the
// kernel names their Name ids point at (Names[id-1]).
type oldTrace struct {
	Names   []string
	Records []cuptiwire.Record
}

// ReadFile reads a .json or .json.gz trace file.
func oldReadFile(path string) (*oldTrace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = bufio.NewReaderSize(f, 256<<10)
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("gunzip: %w", err)
		}
		defer zr.Close()
		r = zr
	}
	return oldRead(r)
}

type oldEvent struct {
	Ph   string          `json:"ph"`
	Cat  string          `json:"cat"`
	Name string          `json:"name"`
	Ts   json.Number     `json:"ts"`
	Dur  json.Number     `json:"dur"`
	Args json.RawMessage `json:"args"`
}

type oldGPUArgs struct {
	Device   *int64 `json:"device"`
	Stream   int64  `json:"stream"`
	Corr     int64  `json:"correlation"`
	Bytes    int64  `json:"bytes"`
	SyncKind string `json:"cuda_sync_kind"`
}

// Read decodes one trace, streaming over traceEvents so that memory grows
// with the GPU events kept, not with the file.
func oldRead(r io.Reader) (*oldTrace, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	if err := oldExpectDelim(dec, '{'); err != nil {
		return nil, err
	}
	t := &oldTrace{}
	names := map[string]uint32{}
	var base uint64
	seenEvents := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("read key: %w", err)
		}
		k, _ := tok.(string)
		switch k {
		case "traceEvents":
			seenEvents = true
			if err := oldReadEvents(dec, t, names); err != nil {
				return nil, err
			}
		case "baseTimeNanoseconds":
			var n json.Number
			if err := dec.Decode(&n); err != nil {
				return nil, fmt.Errorf("baseTimeNanoseconds: %w", err)
			}
			v, err := strconv.ParseUint(n.String(), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("baseTimeNanoseconds %q: %w", n, err)
			}
			base = v
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, fmt.Errorf("value of %q: %w", k, err)
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("end of trace: %w", err)
	}
	if !seenEvents {
		return nil, fmt.Errorf("no traceEvents: %w", ErrNotTrace)
	}
	// Kineto writes ts relative to baseTimeNanoseconds when it is present.
	for i := range t.Records {
		if t.Records[i].End+base < t.Records[i].End {
			return nil, fmt.Errorf("baseTimeNanoseconds %d overflows timestamps: %w", base, ErrNotTrace)
		}
		t.Records[i].Start += base
		t.Records[i].End += base
	}
	slices.SortStableFunc(t.Records, func(a, b cuptiwire.Record) int {
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	return t, nil
}

func oldExpectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("read trace: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("expected %q, got %v: %w", want, tok, ErrNotTrace)
	}
	return nil
}

func oldReadEvents(dec *json.Decoder, t *oldTrace, names map[string]uint32) error {
	if err := oldExpectDelim(dec, '['); err != nil {
		return fmt.Errorf("traceEvents: %w", err)
	}
	var ev oldEvent
	for i := 0; dec.More(); i++ {
		ev = oldEvent{}
		if err := dec.Decode(&ev); err != nil {
			return fmt.Errorf("traceEvents[%d]: %w", i, err)
		}
		kind := oldKindOf(ev.Cat)
		if kind == 0 || ev.Ph != "X" {
			continue
		}
		if len(t.Records) >= oldMaxRecords {
			return fmt.Errorf("more than %d GPU events: %w", oldMaxRecords, ErrNotTrace)
		}
		rec, err := oldConvert(&ev, kind, t, names)
		if err != nil {
			return fmt.Errorf("traceEvents[%d] (%s %q): %w", i, ev.Cat, ev.Name, err)
		}
		t.Records = append(t.Records, rec)
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("end of traceEvents: %w", err)
	}
	return nil
}

func oldKindOf(cat string) cuptiwire.RecordKind {
	switch cat {
	case "kernel":
		return cuptiwire.RecordKindKernel
	case "gpu_memcpy":
		return cuptiwire.RecordKindMemcpy
	case "gpu_memset":
		return cuptiwire.RecordKindMemset
	case "cuda_sync":
		return cuptiwire.RecordKindSync
	}
	return 0
}

func oldConvert(ev *oldEvent, kind cuptiwire.RecordKind, t *oldTrace, names map[string]uint32) (cuptiwire.Record, error) {
	start, err := oldMicros(ev.Ts)
	if err != nil {
		return cuptiwire.Record{}, fmt.Errorf("ts: %w", err)
	}
	dur, err := oldMicros(ev.Dur)
	if err != nil {
		return cuptiwire.Record{}, fmt.Errorf("dur: %w", err)
	}
	if start+dur < start {
		return cuptiwire.Record{}, errors.New("ts plus dur overflows")
	}
	var a oldGPUArgs
	if len(ev.Args) > 0 {
		if err := json.Unmarshal(ev.Args, &a); err != nil {
			return cuptiwire.Record{}, fmt.Errorf("args: %w", err)
		}
	}
	rec := cuptiwire.Record{
		Kind:        kind,
		Device:      cuptiwire.DeviceUnknown,
		Stream:      uint32(a.Stream),
		Start:       start,
		End:         start + dur,
		Correlation: uint32(a.Corr),
	}
	if a.Device != nil && *a.Device >= 0 && *a.Device < int64(cuptiwire.DeviceUnknown) {
		rec.Device = uint16(*a.Device)
	}
	if a.Bytes > 0 {
		rec.Bytes = uint64(a.Bytes)
	}
	switch kind {
	case cuptiwire.RecordKindKernel:
		id, ok := names[ev.Name]
		if !ok {
			if len(names) >= cuptiwire.MaxStringID-1 {
				return rec, fmt.Errorf("more than %d kernel names", cuptiwire.MaxStringID-1)
			}
			t.Names = append(t.Names, ev.Name)
			id = uint32(len(t.Names))
			names[ev.Name] = id
		}
		rec.Name = id
	case cuptiwire.RecordKindMemcpy:
		rec.Sub = MemcpyKind([]byte(ev.Name))
	case cuptiwire.RecordKindMemset:
		rec.Sub = MemsetKind([]byte(ev.Name))
	case cuptiwire.RecordKindSync:
		s := a.SyncKind
		if s == "" {
			s = ev.Name
		}
		rec.Sub = SyncKind([]byte(s))
	}
	return rec, nil
}

// micros parses a non-negative microsecond number ("12", "41.407") into
// nanoseconds exactly: float64 would lose nanoseconds on epoch timestamps.
func oldMicros(n json.Number) (uint64, error) {
	s := n.String()
	if s == "" {
		return 0, errors.New("missing")
	}
	if strings.ContainsAny(s, "eE-") {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 0 || f > 1.8e13 {
			return 0, fmt.Errorf("bad microseconds %q", s)
		}
		return uint64(f*1000 + 0.5), nil
	}
	intPart, frac, _ := strings.Cut(s, ".")
	whole, err := strconv.ParseUint(intPart, 10, 64)
	if err != nil || whole > 1<<63/1000 {
		return 0, fmt.Errorf("bad microseconds %q", s)
	}
	ns := whole * 1000
	for i, scale := 0, uint64(100); i < len(frac) && i < 3; i, scale = i+1, scale/10 {
		c := frac[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("bad microseconds %q", s)
		}
		ns += uint64(c-'0') * scale
	}
	return ns, nil
}
