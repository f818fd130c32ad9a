// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/cuptiwire"
)

// timelineEvent is a /timeline event as a reader sees it.
type timelineEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	ID   string         `json:"id"`
	Args map[string]any `json:"args"`
}

// TestTimelineFlowsEndToEnd runs the shipped default config (every kernel
// sampled as a span) with the correlation test's two replicas of one
// service.name: CUPTI launches and kernels from their processes, engine
// steps from their hooks. /timeline must draw one process track per
// replica, each kernel on its own GPU's track, and a flow to every kernel
// from the step that launched it, on its own replica's track: the cupti
// receiver links the kernel span to the step (aggregate.FlushSpans) and the
// timeline draws the link.
func TestTimelineFlowsEndToEnd(t *testing.T) {
	const host = "e2e-gpu-node"
	c, ports, sockDir := startShipped(t)
	addr := ports.Addr("ui")
	base := time.Now().Add(-10 * time.Second).Truncate(time.Millisecond)
	replicas := correlationTimeline(base)

	// As the libraries start: each process connects with hello, identity
	// and device, which opens its source in the correlation window, then
	// reports one kernel from before the engine's first step: once the
	// timeline shows those, the receiver has read the frames before them,
	// so no step can arrive before its source.
	type want struct {
		instance string
		step     uint64
		gpu      string
	}
	expect := map[string]want{} // GPU uuid/correlation id -> the kernel's launching step
	type stream struct {
		conn     net.Conn
		names    map[string]uint32
		launches []launchRec
		ran      []ranKernel
	}
	var streams []stream
	kernels := 0
	for _, r := range replicas {
		for _, p := range r.procs {
			launches, ran := r.simulate(p)
			conn, err := net.Dial("unix", filepath.Join(sockDir, "cupti.sock"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
			b := cuptiwire.AppendHelloFlags(nil, p.pid, cuptiwire.HelloLaunches, uint64(time.Now().UnixNano()), host)
			b = cuptiwire.AppendIdentity(b, p.ppid, r.instance, "vllm")
			b = cuptiwire.AppendDevice(b, cuptiwire.Device{Ordinal: 0, UUID: p.uuid})
			before := uint64(base.Add(-time.Second).UnixNano())
			names := map[string]uint32{}
			b = append(b, cuptiRecords(nil, []ranKernel{{corr: 1, name: kNorm, start: before, end: before + 1000}}, base.Add(-time.Millisecond), names)...)
			_, err = conn.Write(b)
			require.NoError(t, err)
			streams = append(streams, stream{conn, names, launches, ran})
			gpu := cuptiwire.UUIDString("GPU-", p.uuid)
			for _, k := range ran {
				expect[fmt.Sprintf("%s/%d", gpu, k.corr)] = want{r.instance, k.step, gpu}
			}
			kernels += len(ran)
		}
	}
	var doc struct {
		TraceEvents []timelineEvent `json:"traceEvents"`
		OtherData   struct {
			Kernels int `json:"kernels"`
			Steps   int `json:"steps"`
			Flows   int `json:"flows"`
		} `json:"otherData"`
	}
	require.Eventually(t, func() bool {
		return getJSON(t, "http://"+addr+"/timeline?last=5m", &doc) && doc.OtherData.Kernels == len(streams)
	}, 60*time.Second, 100*time.Millisecond, "the cupti receiver never read the libraries' first frames\n%s", c.Output())

	// The engines' steps, then the launches and kernels they made.
	for _, r := range replicas {
		sendSteps(t, filepath.Join(sockDir, "step.sock"), host, r, func(fakeStep) bool { return true })
	}
	for _, s := range streams {
		_, err := s.conn.Write(cuptiRecords(s.launches, s.ran, time.Now(), s.names))
		require.NoError(t, err)
	}

	if !assert.Eventually(t, func() bool {
		doc.TraceEvents = nil
		return getJSON(t, "http://"+addr+"/timeline?last=5m", &doc) && doc.OtherData.Flows == kernels
	}, 60*time.Second, 200*time.Millisecond) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", ports.Port("telemetry")))
		var body []byte
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		var lines []string
		for _, l := range strings.Split(string(body), "\n") {
			if !strings.HasPrefix(l, "#") && (strings.Contains(l, "cupti") || strings.Contains(l, "engine_step") || strings.Contains(l, "inference") || strings.Contains(l, "timeline")) {
				lines = append(lines, l)
			}
		}
		t.Fatalf("the timeline never drew a flow to each of the %d kernels: %+v\n%s\n%s", kernels, doc.OtherData, strings.Join(lines, "\n"), c.Output())
	}
	assert.Equal(t, kernels+len(streams), doc.OtherData.Kernels, "the kernels sent and the first ones, which no step launched")

	procs := map[int]string{}
	for _, e := range doc.TraceEvents {
		if e.Ph == "M" && e.Name == "process_name" {
			procs[e.Pid] = e.Args["name"].(string)
		}
	}
	engines := 0
	for _, name := range procs {
		if strings.HasPrefix(name, "engine ") {
			engines++
		}
	}
	assert.Equal(t, len(replicas), engines, "one process track per engine instance: %v", procs)

	// within finds the slice of cat on pid/tid that holds ts.
	within := func(pid, tid int, ts float64, cat func(string) bool) *timelineEvent {
		for i, e := range doc.TraceEvents {
			if e.Ph == "X" && e.Pid == pid && e.Tid == tid && cat(e.Cat) && ts >= e.Ts && ts <= e.Ts+e.Dur {
				return &doc.TraceEvents[i]
			}
		}
		return nil
	}
	starts := map[string]timelineEvent{}
	for _, e := range doc.TraceEvents {
		if e.Ph == "s" {
			starts[e.ID] = e
		}
	}
	seen := map[string]int{}
	for _, e := range doc.TraceEvents {
		if e.Ph != "f" {
			continue
		}
		k := within(e.Pid, e.Tid, e.Ts, func(c string) bool { return c != "engine.step" && c != "request" && c != "phase" })
		require.NotNilf(t, k, "flow %s ends in a kernel", e.ID)
		key := fmt.Sprintf("%s/%v", strings.TrimPrefix(procs[e.Pid], "GPU "+host+"/"), k.Args["correlation_id"])
		w, ok := expect[key]
		require.Truef(t, ok, "flow %s ends in a kernel sent (%s on %q)", e.ID, key, procs[e.Pid])
		seen[key]++
		s, ok := starts[e.ID]
		require.Truef(t, ok, "flow %s starts", e.ID)
		st := within(s.Pid, s.Tid, s.Ts, func(c string) bool { return c == "engine.step" })
		require.NotNilf(t, st, "flow %s starts in a step", e.ID)
		assert.Equalf(t, "engine vllm ["+w.instance+"]", procs[s.Pid], "flow %s starts on its replica's track", e.ID)
		assert.EqualValuesf(t, w.step, st.Args["step"], "flow %s starts in the step that launched kernel %s", e.ID, key)
	}
	// A graph launch runs several kernels under one correlation id, each
	// with its flow.
	for key := range expect {
		assert.Positivef(t, seen[key], "a flow to kernel %s", key)
	}
}
