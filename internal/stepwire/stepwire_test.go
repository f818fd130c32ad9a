package stepwire

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pyStep is what integrations/python/inferprof_hook/wire.py decode() writes.
type pyStep struct {
	Engine          uint8    `json:"engine"`
	Flags           uint16   `json:"flags"`
	PID             uint32   `json:"pid"`
	EngineIndex     uint32   `json:"engine_index"`
	Step            uint64   `json:"step"`
	StartNs         int64    `json:"start_ns"`
	EndNs           int64    `json:"end_ns"`
	Prefill         uint32   `json:"prefill"`
	Decode          uint32   `json:"decode"`
	ScheduledTokens uint32   `json:"scheduled_tokens"`
	Running         uint32   `json:"running"`
	Waiting         uint32   `json:"waiting"`
	KVUsage         *float64 `json:"kv_usage"`
	HookDropped     uint32   `json:"hook_dropped"`
	ServiceName     string   `json:"service_name"`
	EngineVersion   string   `json:"engine_version"`
	Host            string   `json:"host"`
	RequestIDs      []string `json:"request_ids"`
	RequestTokens   []int64  `json:"request_tokens"`
	Preempted       []string `json:"preempted"`
}

// TestPythonFixtures decodes datagrams that the real Python hook sent (see
// integrations/python/tools/gen_step_fixture.py) and compares every field
// with what the Python decoder read from the same bytes.
func TestPythonFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/*.bin")
	require.NoError(t, err)
	require.Len(t, files, 4)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			buf, err := os.ReadFile(f)
			require.NoError(t, err)
			js, err := os.ReadFile(strings.TrimSuffix(f, ".bin") + ".json")
			require.NoError(t, err)
			var want pyStep
			require.NoError(t, json.Unmarshal(js, &want))

			var s Step
			require.NoError(t, Decode(buf, &s))
			assert.Equal(t, Engine(want.Engine), s.Engine)
			assert.Equal(t, want.Flags, s.Flags)
			assert.Equal(t, want.PID, s.PID)
			assert.Equal(t, want.EngineIndex, s.EngineIndex)
			assert.Equal(t, want.Step, s.Index)
			assert.Equal(t, want.StartNs, s.StartUnixNs)
			assert.Equal(t, want.EndNs, s.EndUnixNs)
			assert.Equal(t, want.Prefill, s.PrefillRequests)
			assert.Equal(t, want.Decode, s.DecodeRequests)
			assert.Equal(t, want.ScheduledTokens, s.ScheduledTokens)
			assert.Equal(t, want.Running, s.Running)
			assert.Equal(t, want.Waiting, s.Waiting)
			if want.KVUsage == nil {
				assert.False(t, s.KVUsageKnown())
			} else {
				assert.True(t, s.KVUsageKnown())
				assert.InDelta(t, *want.KVUsage, float64(s.KVUsage), 1e-9)
			}
			assert.Equal(t, want.HookDropped, s.HookDropped)
			assert.Equal(t, want.ServiceName, s.ServiceName)
			assert.Equal(t, want.EngineVersion, s.EngineVersion)
			assert.Equal(t, want.Host, s.Host)
			assert.Equal(t, want.RequestIDs, nilIfEmpty(s.RequestIDs))
			assert.Equal(t, want.RequestTokens, nilIfEmptyInt(s.RequestTokens))
			assert.Equal(t, want.Preempted, nilIfEmpty(s.Preempted))
		})
	}
}

func nilIfEmpty(v []string) []string {
	if len(v) == 0 {
		return []string{}
	}
	return v
}

func nilIfEmptyInt(v []int64) []int64 {
	if len(v) == 0 {
		return []int64{}
	}
	return v
}

func TestFixturesCoverTheInterestingCases(t *testing.T) {
	var s Step
	buf, err := os.ReadFile("testdata/vllm_preempt.bin")
	require.NoError(t, err)
	require.NoError(t, Decode(buf, &s))
	assert.Equal(t, []string{"chatcmpl-b"}, s.Preempted)
	buf, err = os.ReadFile("testdata/vllm_spec.bin")
	require.NoError(t, err)
	require.NoError(t, Decode(buf, &s))
	assert.Contains(t, s.RequestTokens, int64(3))
	assert.Contains(t, s.RequestIDs, "chatcmpl-ü")
	assert.Empty(t, s.Preempted, "slices are reset between datagrams")
}

func validStep() *Step {
	return &Step{
		Engine: EngineVLLM, Flags: FlagKVUsage, PID: 7, Index: 3,
		StartUnixNs: 1_000, EndUnixNs: 2_000, DecodeRequests: 2, ScheduledTokens: 2,
		KVUsage: 0.25, ServiceName: "svc", EngineVersion: "0.11.0", Host: "h",
		RequestIDs: []string{"a", "b"}, RequestTokens: []int64{1, 2}, Preempted: []string{"c"},
	}
}

func TestRoundTrip(t *testing.T) {
	want := validStep()
	var got Step
	require.NoError(t, Decode(Encode(want), &got))
	assert.Equal(t, *want, got)
}

func TestDecodeErrors(t *testing.T) {
	good := Encode(validStep())
	mutate := func(f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), good...))
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrShort},
		{"short header", good[:HeaderSize-1], ErrShort},
		{"magic", mutate(func(b []byte) []byte { b[0] = 'X'; return b }), ErrMagic},
		{"version", mutate(func(b []byte) []byte { b[4] = 2; return b }), ErrVersion},
		{"flags", mutate(func(b []byte) []byte { b[7] = 0x80; return b }), ErrFlags},
		{"zero index", mutate(func(b []byte) []byte { clear(b[16:24]); return b }), ErrZeroIndex},
		{"times", mutate(func(b []byte) []byte { b[39] = 0x80; return b }), ErrTimes},
		{"kv usage", mutate(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[60:], math.Float32bits(float32(math.NaN())))
			return b
		}), ErrKVUsage},
		{"truncated id", good[:len(good)-1], ErrShort},
		{"trailing", append(append([]byte(nil), good...), 0), ErrTrailing},
		{"utf8", mutate(func(b []byte) []byte { b[len(b)-1] = 0xff; return b }), ErrUTF8},
		{"too large", make([]byte, MaxDatagram+1), ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Step
			require.ErrorIs(t, Decode(tt.in, &s), tt.want)
		})
	}
}

func TestEngineString(t *testing.T) {
	assert.Equal(t, "vllm", EngineVLLM.String())
	assert.Equal(t, "sglang", EngineSGLang.String())
	assert.Equal(t, "unknown", Engine(9).String())
}

// FuzzDecode checks that no input panics and that whatever decodes
// re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.bin")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err == nil {
			f.Add(b)
		}
	}
	f.Add(Encode(validStep()))
	d := NewDecoder()
	f.Fuzz(func(t *testing.T, b []byte) {
		var s, s2 Step
		err := Decode(b, &s)
		if err2 := d.Decode(b, &s2); (err == nil) != (err2 == nil) {
			t.Fatalf("Decode and Decoder.Decode disagree: %v vs %v", err, err2)
		}
		if err != nil {
			return
		}
		if len(s.RequestIDs) != len(s.RequestTokens) {
			t.Fatalf("ids and tokens not aligned: %d vs %d", len(s.RequestIDs), len(s.RequestTokens))
		}
		if got := Encode(&s); string(got) != string(b) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", got, b)
		}
	})
}

func TestDecoderInternsIDs(t *testing.T) {
	d := NewDecoder()
	buf := Encode(validStep())
	var s Step
	require.NoError(t, d.Decode(buf, &s))
	want := *validStep()
	assert.Equal(t, want, s)
	allocs := testing.AllocsPerRun(100, func() {
		if err := d.Decode(buf, &s); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "repeated ids and identity strings are not allocated again")
	for i := range maxInterned + 10 {
		d.intern([]byte(strconv.Itoa(i)))
	}
	assert.LessOrEqual(t, len(d.ids), maxInterned)
}

func BenchmarkDecode(b *testing.B) {
	for _, n := range []int{1, 32, 256} {
		s := validStep()
		s.RequestIDs, s.RequestTokens = nil, nil
		for i := range n {
			s.RequestIDs = append(s.RequestIDs, "chatcmpl-"+strings.Repeat("f", 32)+string(rune('a'+i%26)))
			s.RequestTokens = append(s.RequestTokens, 1)
		}
		buf := Encode(s)
		b.Run("impl=interned/ids="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(buf)))
			d := NewDecoder()
			var out Step
			for b.Loop() {
				if err := d.Decode(buf, &out); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("impl=plain/ids="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(buf)))
			var out Step
			for b.Loop() {
				if err := Decode(buf, &out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
