// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwire

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func validMark() *Mark {
	return &Mark{
		Engine: EngineVLLM, Flags: MarkFinal, PID: 2001, PPID: 2000, Batch: 17,
		StartUnixNs: 1_000, EndUnixNs: 1_500, ThreadID: 2001, ScheduledTokens: 33, HookDropped: 2,
		Host: "gpu-node", InstanceID: "6f1d",
	}
}

func TestMarkRoundTrip(t *testing.T) {
	for _, want := range []*Mark{validMark(), {Batch: 0, Host: "h"}} {
		b := EncodeMark(want)
		assert.True(t, IsMark(b))
		var got Mark
		require.NoError(t, DecodeMark(b, &got))
		assert.Equal(t, *want, got)
	}
	assert.Len(t, EncodeMark(validMark()), MarkHeaderSize+(1+8)+(1+4))
	assert.False(t, IsMark(Encode(validStep())), "a step record is not a mark")
	assert.True(t, validMark().Final())
}

func TestDecodeMarkErrors(t *testing.T) {
	good := EncodeMark(validMark())
	mutate := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"short", good[:MarkHeaderSize-1], ErrShort},
		{"magic", mutate(func(b []byte) { b[3] = 'X' }), ErrMagic},
		{"version", mutate(func(b []byte) { b[4] = 2 }), ErrVersion},
		{"flags", mutate(func(b []byte) { b[6] = 2 }), ErrFlags},
		{"times", mutate(func(b []byte) { binary.LittleEndian.PutUint64(b[32:], 10) }), ErrMarkTimes},
		{"truncated host", good[:MarkHeaderSize+3], ErrShort},
		{"no instance", good[:MarkHeaderSize+1+8], ErrShort},
		{"utf8", mutate(func(b []byte) { b[len(b)-1] = 0xff }), ErrUTF8},
		{"trailing", append(append([]byte(nil), good...), 0), ErrTrailing},
		{"too large", make([]byte, MaxDatagram+1), ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m Mark
			require.ErrorIs(t, DecodeMark(tt.in, &m), tt.want)
		})
	}
}

// pyMark is what wire.py decode_mark() writes.
type pyMark struct {
	Engine          uint8  `json:"engine"`
	Final           bool   `json:"final"`
	PID             uint32 `json:"pid"`
	PPID            uint32 `json:"ppid"`
	Batch           uint64 `json:"batch"`
	StartNs         int64  `json:"start_ns"`
	EndNs           int64  `json:"end_ns"`
	ThreadID        uint32 `json:"thread_id"`
	ScheduledTokens uint32 `json:"scheduled_tokens"`
	HookDropped     uint32 `json:"hook_dropped"`
	Host            string `json:"host"`
	InstanceID      string `json:"instance_id"`
}

// TestPythonMarks decodes launch marks the real hook wrote in a fake vLLM
// executor worker and compares them with what Python's decoder read.
func TestPythonMarks(t *testing.T) {
	files, err := filepath.Glob("testdata/marks/*.bin")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			buf, err := os.ReadFile(f)
			require.NoError(t, err)
			js, err := os.ReadFile(strings.TrimSuffix(f, ".bin") + ".json")
			require.NoError(t, err)
			var want pyMark
			require.NoError(t, json.Unmarshal(js, &want))
			var m Mark
			require.NoError(t, DecodeMark(buf, &m))
			assert.Equal(t, Mark{
				Engine: Engine(want.Engine), Flags: map[bool]uint16{true: MarkFinal}[want.Final], PID: want.PID, PPID: want.PPID,
				Batch: want.Batch, StartUnixNs: want.StartNs, EndUnixNs: want.EndNs, ThreadID: want.ThreadID,
				ScheduledTokens: want.ScheduledTokens, HookDropped: want.HookDropped, Host: want.Host, InstanceID: want.InstanceID,
			}, m)
		})
	}
}

// FuzzDecodeMark checks that no input panics and that whatever decodes
// re-encodes to the same bytes.
func FuzzDecodeMark(f *testing.F) {
	files, _ := filepath.Glob("testdata/marks/*.bin")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add(EncodeMark(validMark()))
	f.Add(EncodeMark(&Mark{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Mark
		if err := DecodeMark(b, &m); err != nil {
			return
		}
		if got := EncodeMark(&m); string(got) != string(b) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", got, b)
		}
	})
}
