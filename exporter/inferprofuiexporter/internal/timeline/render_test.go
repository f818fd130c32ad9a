// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// rawEvent is an event as a reader sees it: a generic JSON object, so the
// check does not trust our own struct.
type rawEvent map[string]any

func (e rawEvent) str(k string) string  { s, _ := e[k].(string); return s }
func (e rawEvent) num(k string) float64 { f, _ := e[k].(float64); return f }
func (e rawEvent) args() map[string]any { a, _ := e["args"].(map[string]any); return a }

type rawTrace struct {
	TraceEvents []rawEvent     `json:"traceEvents"`
	OtherData   map[string]any `json:"otherData"`
	origin      int64
}

// getTrace serves the store and reads /timeline as a client would.
func getTrace(t *testing.T, s *Store, query string) rawTrace {
	t.Helper()
	srv := httptest.NewServer(Handler(s))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/timeline?" + query)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var tr rawTrace
	require.NoError(t, json.Unmarshal(body, &tr))
	var exact struct {
		OtherData struct {
			Origin int64 `json:"origin_unix_ns"`
		} `json:"otherData"`
	}
	require.NoError(t, json.Unmarshal(body, &exact))
	tr.origin = exact.OtherData.Origin
	return tr
}

// checkStructure asserts what every trace must satisfy: each event has ph,
// ts, pid and tid; X slices on one thread nest; every flow has one start
// and one end, each inside a slice of its thread.
func checkStructure(t *testing.T, tr rawTrace) {
	t.Helper()
	type thread struct{ pid, tid float64 }
	slicesOf := map[thread][][2]float64{}
	flows := map[string][]rawEvent{}
	for _, e := range tr.TraceEvents {
		for _, k := range []string{"ph", "ts", "pid", "tid"} {
			require.Containsf(t, e, k, "event %v lacks %s", e, k)
		}
		_, isNum := e["ts"].(float64)
		require.Truef(t, isNum, "ts of %v is a number", e)
		th := thread{e.num("pid"), e.num("tid")}
		switch e.str("ph") {
		case "X":
			d, ok := e["dur"].(float64)
			require.Truef(t, ok && d >= 0, "X event %v has a dur >= 0", e)
			slicesOf[th] = append(slicesOf[th], [2]float64{e.num("ts"), e.num("ts") + d})
		case "s", "f":
			flows[e.str("id")] = append(flows[e.str("id")], e)
		case "M", "C", "i":
		default:
			t.Errorf("unexpected phase in %v", e)
		}
	}
	// µs: float rounding of ns/1e3, relative for far-apart times.
	epsAt := func(v float64) float64 { return max(1e-3, math.Abs(v)*1e-15) }
	for th, ss := range slicesOf {
		sort.Slice(ss, func(i, j int) bool {
			if ss[i][0] != ss[j][0] {
				return ss[i][0] < ss[j][0]
			}
			return ss[i][1] > ss[j][1]
		})
		var stack [][2]float64
		for _, s := range ss {
			for len(stack) > 0 && s[0] >= stack[len(stack)-1][1]-epsAt(s[0]) {
				stack = stack[:len(stack)-1]
			}
			if len(stack) > 0 {
				top := stack[len(stack)-1]
				assert.LessOrEqualf(t, s[1], top[1]+epsAt(s[1]), "slice %v overlaps %v on %+v without nesting", s, top, th)
			}
			stack = append(stack, s)
		}
	}
	inSlice := func(e rawEvent) bool {
		for _, s := range slicesOf[thread{e.num("pid"), e.num("tid")}] {
			if e.num("ts") >= s[0] && e.num("ts") <= s[1] {
				return true
			}
		}
		return false
	}
	for id, fs := range flows {
		require.Lenf(t, fs, 2, "flow %s has a start and an end", id)
		phs := []string{fs[0].str("ph"), fs[1].str("ph")}
		slices.Sort(phs)
		assert.Equalf(t, []string{"f", "s"}, phs, "flow %s", id)
		for _, e := range fs {
			assert.Truef(t, inSlice(e), "flow %s event %v lies inside a slice of its thread", id, e)
			if e.str("ph") == "f" {
				assert.Equal(t, "e", e.str("bp"), "a flow end binds to its enclosing slice")
			}
		}
	}
}

// usAt is where s seconds after base lie in tr, in µs; computed in
// integers, as float64 cannot hold unix nanoseconds exactly.
func usAt(tr rawTrace, s float64) float64 {
	return float64(base.UnixNano()-tr.origin)/1e3 + s*1e6
}

// TestTimelineStructureAndNumbers loads the timeline of a known input (real
// inference processor output, engine steps, kernels with their step link,
// NVML readings) and checks its structure and every figure against the input.
func TestTimelineStructureAndNumbers(t *testing.T) {
	f := newFixture()
	s := New(64<<20, time.Hour, func() time.Time { return base.Add(5 * time.Second) })
	bad, evicted := s.ConsumeTraces(f.traces(t))
	require.Zero(t, bad)
	require.Zero(t, evicted)
	require.Zero(t, s.ConsumeMetrics(f.metrics()))

	tr := getTrace(t, s, "last=60s")
	require.NotEmpty(t, tr.TraceEvents)
	checkStructure(t, tr)

	procs := map[float64]string{}
	threads := map[[2]float64]string{}
	for _, e := range tr.TraceEvents {
		if e.str("ph") != "M" {
			continue
		}
		switch e.str("name") {
		case "process_name":
			procs[e.num("pid")] = e.args()["name"].(string)
		case "thread_name":
			threads[[2]float64{e.num("pid"), e.num("tid")}] = e.args()["name"].(string)
		}
	}
	var enginePid, gpuPid, nvmlPid float64
	for pid, name := range procs {
		switch {
		case name == "engine "+f.service:
			enginePid = pid
		case name == "GPU gpu-node-1/0":
			gpuPid = pid
		case strings.HasPrefix(name, "GPU gpu-node-1/GPU-5a3f") && strings.HasSuffix(name, "(NVIDIA H200)"):
			nvmlPid = pid
		}
	}
	require.Lenf(t, procs, 3, "one engine instance, the kernels' GPU, the NVML GPU: %v", procs)
	require.NotZero(t, enginePid)
	require.NotZero(t, gpuPid)
	require.NotZero(t, nvmlPid)

	const eps = 0.01 // µs
	// Requests: slices with their input times; phases nested with the
	// processor's figures; tokens at the steps' ends.
	for _, r := range f.requests {
		var req rawEvent
		for _, e := range tr.TraceEvents {
			if e.str("ph") == "X" && e.str("cat") == "request" && e.args()["request_id"] == r.id {
				req = e
			}
		}
		require.NotNilf(t, req, "request %s drawn", r.id)
		assert.Equal(t, enginePid, req.num("pid"))
		assert.True(t, strings.HasPrefix(threads[[2]float64{req.num("pid"), req.num("tid")}], "requests "))
		assert.InDelta(t, usAt(tr, r.start), req.num("ts"), eps, r.id)
		assert.InDelta(t, (r.end-r.start)*1e6, req.num("dur"), eps, r.id)
		assert.InDelta(t, r.ttft, req.args()["ttft_s"], 1e-9, r.id)
		assert.InDelta(t, r.end-r.start, req.args()["e2e_s"], 1e-9, r.id)
		assert.EqualValues(t, r.outTokens, req.args()["output_tokens"])

		phase := map[string]rawEvent{}
		var tokens []float64
		for _, e := range tr.TraceEvents {
			if e.num("pid") != req.num("pid") || e.num("tid") != req.num("tid") {
				continue
			}
			if e.str("cat") == "phase" && e.num("ts") >= req.num("ts") && e.num("ts") < req.num("ts")+req.num("dur") {
				phase[e.str("name")] = e
			}
			if e.str("ph") == "i" && e.num("ts") >= req.num("ts") && e.num("ts") <= req.num("ts")+req.num("dur") {
				tokens = append(tokens, e.num("ts"))
			}
		}
		first := r.start + r.ttft
		want := map[string][2]float64{
			"queue":   {first - r.prefill - r.queue, r.queue},
			"prefill": {first - r.prefill, r.prefill},
			"decode":  {first, r.decode},
		}
		require.Lenf(t, phase, 3, "request %s phases", r.id)
		for name, w := range want {
			assert.InDeltaf(t, usAt(tr, w[0]), phase[name].num("ts"), eps, "%s %s start", r.id, name)
			assert.InDeltaf(t, w[1]*1e6, phase[name].num("dur"), eps, "%s %s duration", r.id, name)
		}
		// One instant per token, at the end of each step that gave one.
		require.Lenf(t, tokens, len(r.steps), "request %s tokens", r.id)
		sort.Float64s(tokens)
		for i, si := range r.steps {
			assert.InDeltaf(t, usAt(tr, f.steps[si].end), tokens[i], 1, "request %s token %d", r.id, i)
		}
	}

	// Steps: one slice each, named by batch make-up, with batch and KV
	// counters at their start.
	stepByIndex := map[int64]rawEvent{}
	batch := map[float64]map[string]any{}
	kv := map[float64]float64{}
	for _, e := range tr.TraceEvents {
		switch {
		case e.str("cat") == "engine.step":
			stepByIndex[int64(e.args()["step"].(float64))] = e
		case e.str("ph") == "C" && e.str("name") == "batch size":
			batch[e.num("ts")] = e.args()
		case e.str("ph") == "C" && e.str("name") == "KV cache usage %":
			kv[e.num("ts")] = e.args()["used"].(float64)
		}
	}
	require.Len(t, stepByIndex, len(f.steps))
	for _, st := range f.steps {
		e := stepByIndex[st.index]
		assert.Equal(t, enginePid, e.num("pid"))
		assert.Equal(t, "engine steps", threads[[2]float64{e.num("pid"), e.num("tid")}])
		assert.InDelta(t, usAt(tr, st.start), e.num("ts"), eps)
		assert.InDelta(t, (st.end-st.start)*1e6, e.num("dur"), eps)
		wantName := map[[2]bool]string{{true, false}: "prefill step", {false, true}: "decode step", {true, true}: "mixed step", {false, false}: "step"}
		assert.Equal(t, wantName[[2]bool{st.prefill > 0, st.decode > 0}], e.str("name"), "step %d", st.index)
		b := batch[e.num("ts")]
		require.NotNilf(t, b, "batch counter of step %d", st.index)
		assert.EqualValues(t, st.prefill, b["prefill"])
		assert.EqualValues(t, st.decode, b["decode"])
		assert.InDelta(t, st.kv*100, kv[e.num("ts")], 1e-9)
	}

	// Kernels: on their GPU and stream, category as cat and a palette
	// colour; a flow from the launching step to each linked kernel.
	kernelByName := map[string]rawEvent{}
	for _, e := range tr.TraceEvents {
		if e.str("ph") == "X" && e.num("pid") == gpuPid {
			kernelByName[e.str("name")] = e
		}
	}
	require.Len(t, kernelByName, len(f.kernels))
	flowStart := map[string]rawEvent{}
	flowEnd := map[string]rawEvent{}
	for _, e := range tr.TraceEvents {
		switch e.str("ph") {
		case "s":
			flowStart[e.str("id")] = e
		case "f":
			flowEnd[e.str("id")] = e
		}
	}
	linked := 0
	for _, k := range f.kernels {
		e := kernelByName[k.name]
		assert.Equal(t, k.category, e.str("cat"))
		assert.Equal(t, categoryColour[k.category], e.str("cname"))
		assert.Equal(t, "stream "+itoa(k.stream), threads[[2]float64{e.num("pid"), e.num("tid")}])
		assert.InDelta(t, usAt(tr, k.start), e.num("ts"), eps)
		assert.InDelta(t, (k.end-k.start)*1e6, e.num("dur"), eps)
		var from rawEvent
		for id, fe := range flowEnd {
			if fe.num("tid") == e.num("tid") && fe.num("ts") >= e.num("ts") && fe.num("ts") <= e.num("ts")+e.num("dur") {
				from = flowStart[id]
			}
		}
		if k.step < 0 {
			assert.Nilf(t, from, "kernel %s has no step link, so no flow", k.name)
			continue
		}
		linked++
		require.NotNilf(t, from, "a flow ends at kernel %s", k.name)
		st := stepByIndex[f.steps[k.step].index]
		assert.Equal(t, st.num("pid"), from.num("pid"))
		assert.Equal(t, st.num("tid"), from.num("tid"))
		assert.True(t, from.num("ts") >= st.num("ts") && from.num("ts") <= st.num("ts")+st.num("dur"), "the flow starts in step %d", f.steps[k.step].index)
	}
	assert.EqualValues(t, linked, tr.OtherData["flows"])

	// NVML: utilisation in percent (decoder readings left out), power, memory.
	var util, power []float64
	var mem map[string]any
	for _, e := range tr.TraceEvents {
		if e.str("ph") != "C" || e.num("pid") != nvmlPid {
			continue
		}
		switch e.str("name") {
		case "GPU utilization %":
			util = append(util, e.args()["busy"].(float64))
		case "GPU power W":
			power = append(power, e.args()["power"].(float64))
		case "GPU memory GiB":
			mem = e.args()
		}
	}
	require.Len(t, util, len(f.util))
	for i, u := range f.util {
		assert.InDelta(t, u*100, util[i], 1e-9)
		assert.InDelta(t, f.power[i], power[i], 1e-9)
	}
	require.NotNil(t, mem)
	assert.InDelta(t, f.memUsed/(1<<30), mem["used"], 1e-9)
	assert.InDelta(t, (f.memLimit-f.memUsed)/(1<<30), mem["free"], 1e-9)
}

func itoa(v int64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestTimelineWindow checks that only records overlapping the window come
// back, with from/to and last.
func TestTimelineWindow(t *testing.T) {
	f := newFixture()
	s := New(64<<20, time.Hour, func() time.Time { return base.Add(5 * time.Second) })
	s.ConsumeTraces(f.traces(t))
	from := base.Add(1100 * time.Millisecond).UnixNano()
	to := base.Add(1300 * time.Millisecond).UnixNano()
	tr := getTrace(t, s, "from="+itoa(from)+"&to="+itoa(to))
	checkStructure(t, tr)
	n := 0
	for _, e := range tr.TraceEvents {
		if e.str("cat") == "engine.step" {
			n++
		}
	}
	want := 0
	for _, st := range f.steps {
		if st.end >= 1.1 && st.start <= 1.3 {
			want++
		}
	}
	assert.Equal(t, want, n)
	assert.Zero(t, getTrace(t, s, "last=1s").OtherData["steps"], "nothing in the last second before now")
}

func TestParseWindowErrors(t *testing.T) {
	srv := httptest.NewServer(Handler(New(1<<20, time.Hour, time.Now)))
	defer srv.Close()
	for _, q := range []string{"last=-1s", "last=bogus", "last=48h", "from=10&to=5", "to=5", "from=x", "last=1s&from=1", "from=0"} {
		resp, err := http.Get(srv.URL + "/timeline?" + q)
		require.NoError(t, err)
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		assert.Equalf(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", q, b.String())
		assert.Contains(t, b.String(), "timeline: ", q)
	}
}

// TestTimelineBudget fills a small store and checks it stays within its
// budget, drops the oldest records first and counts them.
func TestTimelineBudget(t *testing.T) {
	f := newFixture()
	td := f.traces(t)
	// Records are held in chunks: a size of many copies is not dominated
	// by one partly filled chunk per kind.
	const copies = 20
	one := New(math.MaxInt64, time.Hour, func() time.Time { return base })
	for range copies {
		one.ConsumeTraces(td)
	}
	size := one.Used()
	require.Positive(t, size)

	budget := 3 * size
	s := New(budget, time.Hour, func() time.Time { return base })
	for range 10 * copies {
		s.ConsumeTraces(td)
		assert.LessOrEqual(t, s.Used(), budget)
	}
	assert.Positive(t, s.Stats().Evicted)
	assert.GreaterOrEqual(t, s.Used(), budget-size, "evicts no more than it must")

	// Max age: a store whose clock moved past every record empties.
	clock := base
	aged := New(math.MaxInt64, time.Minute, func() time.Time { return clock })
	aged.ConsumeTraces(td)
	clock = base.Add(2 * time.Minute)
	aged.ConsumeTraces(ptraceEmpty())
	assert.Zero(t, aged.Used())
}

func ptraceEmpty() ptrace.Traces { return ptrace.NewTraces() }
