// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwire

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pyStep is what integrations/python/inferprof_hook/wire.py decode() writes.
type pyStep struct {
	Engine          uint8      `json:"engine"`
	Flags           uint16     `json:"flags"`
	PID             uint32     `json:"pid"`
	EngineIndex     uint32     `json:"engine_index"`
	Step            uint64     `json:"step"`
	StartNs         int64      `json:"start_ns"`
	EndNs           int64      `json:"end_ns"`
	Prefill         uint32     `json:"prefill"`
	Decode          uint32     `json:"decode"`
	ScheduledTokens uint32     `json:"scheduled_tokens"`
	Running         uint32     `json:"running"`
	Waiting         uint32     `json:"waiting"`
	KVUsage         *float64   `json:"kv_usage"`
	HookDropped     uint32     `json:"hook_dropped"`
	HookEvictedIDs  uint32     `json:"hook_evicted_ids"`
	Degraded        bool       `json:"degraded"`
	Version         uint8      `json:"version"`
	Resumed         []string   `json:"resumed"`
	ServiceName     string     `json:"service_name"`
	EngineVersion   string     `json:"engine_version"`
	Host            string     `json:"host"`
	InstanceID      string     `json:"instance_id"`
	RequestIDs      []string   `json:"request_ids"`
	RequestTokens   []int64    `json:"request_tokens"`
	Preempted       []string   `json:"preempted"`
	Batch           uint64     `json:"batch"`
	Windows         [][3]int64 `json:"windows"`
}

// fixtures returns the datagrams the real Python hooks sent: the current
// version's in testdata/, older versions' in testdata/v<N>/ (kept as the
// hook of that version wrote them, never regenerated).
func fixtures(t testing.TB) []string {
	cur, err := filepath.Glob("testdata/*.bin")
	require.NoError(t, err)
	old, err := filepath.Glob("testdata/v*/*.bin")
	require.NoError(t, err)
	return append(cur, old...)
}

// TestPythonFixtures decodes datagrams that the real Python hook sent (see
// integrations/python/tools/gen_step_fixture.py) and compares every field
// with what the Python decoder read from the same bytes.
func TestPythonFixtures(t *testing.T) {
	files := fixtures(t)
	require.Len(t, files, 25)
	versions := map[uint8]int{}
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
			versions[s.Version]++
			if want.Version != 0 { // the v1 fixtures' JSON predates the field
				assert.Equal(t, want.Version, s.Version)
			}
			assert.Equal(t, want.HookEvictedIDs, s.HookEvictedIDs)
			assert.Equal(t, want.Degraded, s.Degraded())
			assert.Equal(t, nilIfEmpty(want.Resumed), nilIfEmpty(s.Resumed))
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
			assert.Equal(t, want.InstanceID, s.InstanceID)
			assert.Equal(t, want.RequestIDs, nilIfEmpty(s.RequestIDs))
			assert.Equal(t, want.RequestTokens, nilIfEmptyInt(s.RequestTokens))
			assert.Equal(t, want.Preempted, nilIfEmpty(s.Preempted))
			assert.Equal(t, want.Batch, s.Batch)
			require.Len(t, s.Windows, len(want.Windows))
			for i, w := range want.Windows {
				assert.Equal(t, Window{StartUnixNs: w[0], EndUnixNs: w[1], ThreadID: uint32(w[2])}, s.Windows[i])
			}
		})
	}
	assert.Equal(t, map[uint8]int{1: 4, 2: 7, 3: 7, 4: 7}, versions, "every wire version stays readable")
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
	read := func(name string) *Step {
		buf, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(t, err)
		var s Step
		require.NoError(t, Decode(buf, &s))
		return &s
	}
	assert.Equal(t, []string{"chatcmpl-b"}, read("v1/vllm_preempt.bin").Preempted)
	s := read("v1/vllm_spec.bin")
	assert.Contains(t, s.RequestTokens, int64(3))
	assert.Contains(t, s.RequestIDs, "chatcmpl-ü")
	assert.Equal(t, uint8(1), s.Version)

	assert.Equal(t, "5b0e5d2c-3f4a-4c1e-9d7a-2f6b8c1d0e9a", read("vllm_preempt.bin").InstanceID,
		"the hook reads service.instance.id from OTEL_RESOURCE_ATTRIBUTES")
	assert.Empty(t, read("v2/vllm_preempt.bin").InstanceID)
	assert.NotEmpty(t, read("v2/vllm_resumed.bin").Resumed)
	assert.NotEmpty(t, read("vllm_preempt.bin").Preempted)
	assert.NotEmpty(t, read("vllm_resumed.bin").Resumed)
	assert.NotEmpty(t, read("sglang_retract.bin").Preempted)
	s = read("sglang_prefill.bin")
	assert.Positive(t, s.PrefillRequests)
	assert.Greater(t, s.ScheduledTokens, s.PrefillRequests, "prefill tokens survive SGLang's batch.copy()")
	assert.True(t, read("sglang_degraded.bin").Degraded())
	assert.False(t, s.Degraded())
	assert.Greater(t, slices.Max(read("vllm_spec.bin").RequestTokens), int64(1))
	assert.Empty(t, read("v3/vllm_spec.bin").Windows)
	// Version 4: the batch number and where it was launched.
	v := read("vllm_async_prefill.bin")
	assert.Positive(t, v.Batch)
	assert.Len(t, v.Windows, 1, "from its schedule() to the next schedule() or update")
	assert.GreaterOrEqual(t, len(read("sglang_prefill.bin").Windows), 3, "preparation, run_batch, processing")
	for _, w := range v.Windows {
		assert.Positive(t, w.ThreadID)
		assert.LessOrEqual(t, w.StartUnixNs, w.EndUnixNs)
	}
}

func validStep() *Step {
	return &Step{
		Version: Version, Engine: EngineVLLM, Flags: FlagKVUsage | FlagDegraded, PID: 7, Index: 3,
		StartUnixNs: 1_000, EndUnixNs: 2_000, DecodeRequests: 2, ScheduledTokens: 2,
		KVUsage: 0.25, HookEvictedIDs: 4, ServiceName: "svc", EngineVersion: "0.11.0", Host: "h",
		InstanceID: "6f1d", RequestIDs: []string{"a", "b"}, RequestTokens: []int64{1, 2},
		Preempted: []string{"c"}, Resumed: []string{"d", "e"},
		Batch: 5, Windows: []Window{{StartUnixNs: 1_100, EndUnixNs: 1_300, ThreadID: 42}, {StartUnixNs: 1_400, EndUnixNs: 1_450, ThreadID: 42}},
	}
}

func validStepV3() *Step {
	s := validStep()
	s.Version, s.Batch, s.Windows = 3, 0, nil
	return s
}

func validStepV2() *Step {
	s := validStepV3()
	s.Version, s.InstanceID = 2, ""
	return s
}

func validStepV1() *Step {
	s := validStepV2()
	s.Version, s.Flags, s.HookEvictedIDs, s.Resumed = 1, FlagKVUsage, 0, nil
	return s
}

func TestRoundTrip(t *testing.T) {
	for _, want := range []*Step{validStep(), validStepV3(), validStepV2(), validStepV1()} {
		var got Step
		b := Encode(want)
		require.NoError(t, Decode(b, &got))
		if len(want.Windows) == 0 {
			got.Windows = nil
		}
		assert.Equal(t, *want, got)
		assert.Equal(t, want.Version, b[4])
	}
	ids := 2*(4+1) + (2 + 1)
	assert.Len(t, Encode(validStepV1()), HeaderSizeV1+(1+3)+(1+6)+(1+1)+ids, "no version 2 fields")
	assert.Len(t, Encode(validStepV2()), HeaderSizeV2+(1+3)+(1+6)+(1+1)+ids+2*(2+1), "no instance id")
	assert.Len(t, Encode(validStepV3()), HeaderSizeV3+(1+3)+(1+6)+(1+1)+(1+4)+ids+2*(2+1), "no batch, no windows")
	assert.Len(t, Encode(validStep()), HeaderSizeV4+(1+3)+(1+6)+(1+1)+(1+4)+ids+2*(2+1)+2*WindowSize)
}

// An older record decodes with no batch and no windows, even into a Step
// that held them.
func TestOlderVersionClearsWindows(t *testing.T) {
	var s Step
	require.NoError(t, Decode(Encode(validStep()), &s))
	require.Len(t, s.Windows, 2)
	require.NoError(t, Decode(Encode(validStepV3()), &s))
	assert.Zero(t, s.Batch)
	assert.Empty(t, s.Windows)
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
		{"short header", good[:HeaderSizeV1-1], ErrShort},
		{"magic", mutate(func(b []byte) []byte { b[0] = 'X'; return b }), ErrMagic},
		{"version 0", mutate(func(b []byte) []byte { b[4] = 0; return b }), ErrVersion},
		{"newer version", mutate(func(b []byte) []byte { b[4] = Version + 1; return b }), ErrVersion},
		{"short v2 header", good[:HeaderSizeV2-1], ErrShort},
		{"flags", mutate(func(b []byte) []byte { b[7] = 0x80; return b }), ErrFlags},
		{"degraded in v1", append(Encode(validStepV1())[:6:6], append([]byte{byte(FlagDegraded), 0}, Encode(validStepV1())[8:]...)...), ErrFlags},
		{"truncated resumed id", Encode(validStepV3())[:len(Encode(validStepV3()))-2], ErrShort},
		{"short v4 header", good[:HeaderSizeV4-1], ErrShort},
		{"truncated instance id", good[:HeaderSizeV4+(1+3)+(1+6)+(1+1)+3], ErrShort},
		{"instance id utf8", mutate(func(b []byte) []byte { b[HeaderSizeV4+(1+3)+(1+6)+(1+1)+1] = 0xff; return b }), ErrUTF8},
		{"too many windows", mutate(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[86:], MaxWindows+1); return b }), ErrWindows},
		{"truncated window", good[:len(good)-1], ErrShort},
		{"window ends before it starts", mutate(func(b []byte) []byte {
			// The windows follow the identity: the record without its lists
			// ends with them.
			bare := *validStep()
			bare.RequestIDs, bare.RequestTokens, bare.Preempted, bare.Resumed = nil, nil, nil, nil
			end := len(Encode(&bare))
			binary.LittleEndian.PutUint64(b[end-WindowSize+8:], 1_000)
			return b
		}), ErrWindow},
		{"missing window", mutate(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[86:], 3); return b }), ErrShort},
		{"zero index", mutate(func(b []byte) []byte { clear(b[16:24]); return b }), ErrZeroIndex},
		{"times", mutate(func(b []byte) []byte { b[39] = 0x80; return b }), ErrTimes},
		{"kv usage", mutate(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[60:], math.Float32bits(float32(math.NaN())))
			return b
		}), ErrKVUsage},
		{"truncated id", Encode(validStepV3())[:len(Encode(validStepV3()))-1], ErrShort},
		{"trailing", append(append([]byte(nil), good...), 0), ErrTrailing},
		{"utf8", func() []byte { b := Encode(validStepV3()); b[len(b)-1] = 0xff; return b }(), ErrUTF8},
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
	for _, p := range fixtures(f) {
		b, err := os.ReadFile(p)
		if err == nil {
			f.Add(b)
		}
	}
	f.Add(Encode(validStep()))
	f.Add(Encode(validStepV3()))
	f.Add(Encode(validStepV2()))
	f.Add(Encode(validStepV1()))
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
	assert.Equal(t, uint64(1), d.Resets(), "reaching the limit is counted")
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
