// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/inferprof/inferprof/extension/stepstoreextension/stepstoretest"
	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/gpuwindow"
	"github.com/inferprof/inferprof/internal/names"
)

// The library's identity and device frames reach the metrics' resource:
// hw.id is the GPU's UUID and the CUDA ordinal a data point attribute; the
// launches and kernels reach the window of the step_store the config
// names, which ties the kernels to a step registered there (as the
// inference processor does); sampled kernel spans link to that step.
func TestIdentityDevicesAndCorrelation(t *testing.T) {
	spans := new(consumertest.TracesSink)
	h := startWithSpans(t, func(c *Config) {
		c.Spans = SpansConfig{Enabled: true, SamplingRatio: 1, MaxPerInterval: 100}
		c.StepStore = stepstoretest.Ref()
	}, spans)
	win := h.win

	const host = "corr-test-host"
	t0 := uint64(1_700_000_000_000_000_000)
	var traceID pcommon.TraceID
	traceID[0] = 7
	ok, why := win.AddStep(gpuwindow.StepInfo{
		Engine: gpuwindow.EngineKey{Host: host, PID: 9000, Instance: "inst-1"}, Index: 3,
		LaunchStart: int64(t0), LaunchEnd: int64(t0 + 1_000_000), Deadline: time.Now().Add(time.Minute),
		Link: gpuwindow.Link{TraceID: traceID, SpanID: pcommon.SpanID{1}, Index: 3}, Ref: "step-3",
	})
	// No stream from the engine yet: the window says so.
	require.False(t, ok)
	require.Equal(t, gpuwindow.MissingNoSource, why)

	uuid := [16]byte{0x5a, 0x3f, 0x1c, 0x22, 0x9b, 0x10, 0x4e, 0x8d, 0xa1, 0x02, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}
	c := dial(t, h.cfg.Endpoint)
	// A tensor-parallel worker (pid 9001) of the engine process 9000.
	b := cuptiwire.AppendHello(nil, 9001, t0, host)
	b = cuptiwire.AppendIdentity(b, 9000, "inst-1", "vllm")
	b = cuptiwire.AppendDevice(b, cuptiwire.Device{Ordinal: 0, UUID: uuid})
	b = cuptiwire.AppendString(b, 1, "void flash::flash_fwd_kernel<128>(Flash_fwd_params)")
	_, err := c.Write(b)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ok, _ = win.AddStep(gpuwindow.StepInfo{
			Engine: gpuwindow.EngineKey{Host: host, PID: 9000, Instance: "inst-1"}, Index: 4,
			LaunchStart: int64(t0), LaunchEnd: int64(t0 + 1_000_000), Deadline: time.Now().Add(time.Minute),
			Link: gpuwindow.Link{TraceID: traceID, SpanID: pcommon.SpanID{1}, Index: 4}, Ref: "step-4",
		})
		if !ok {
			// Launches open the source: send one outside the step first.
			_, err = c.Write(cuptiwire.AppendLaunches(nil, []cuptiwire.Launch{{Kind: cuptiwire.LaunchKindKernel, Correlation: 1, ThreadID: 9001, Time: t0 - 10}}))
			require.NoError(t, err)
		}
		return ok
	}, 5*time.Second, 10*time.Millisecond)

	b = cuptiwire.AppendLaunches(nil, []cuptiwire.Launch{
		{Kind: cuptiwire.LaunchKindKernel, Correlation: 10, ThreadID: 9001, Time: t0 + 100},
		{Kind: cuptiwire.LaunchKindKernel, Correlation: 11, ThreadID: 9001, Time: t0 + 200},
		{Kind: cuptiwire.LaunchKindMark, Time: t0 + 2_000_000},
	})
	b = cuptiwire.AppendRecords2(b, []cuptiwire.Record{
		{Kind: cuptiwire.RecordKindKernel, Device: 0, Name: 1, Correlation: 10, Start: t0 + 5000, End: t0 + 8000},
		{Kind: cuptiwire.RecordKindKernel, Device: 0, Name: 1, Correlation: 11, Start: t0 + 9000, End: t0 + 10000},
	})
	_, err = c.Write(b)
	require.NoError(t, err)

	var res []gpuwindow.Result
	require.Eventually(t, func() bool {
		for _, r := range win.Collect(time.Now(), nil, nil) {
			if r.Ref == "step-4" {
				res = append(res, r)
			}
		}
		return len(res) == 1
	}, 5*time.Second, 10*time.Millisecond)
	f := res[0].Figures
	assert.Equal(t, gpuwindow.MissingNone, res[0].Missing)
	assert.Equal(t, uint64(4000), f.KernelNS)
	assert.Equal(t, uint64(2), f.KernelCount)
	assert.Equal(t, []gpuwindow.CategoryTime{{Category: "attention", NS: 4000}}, f.Categories)
	require.Len(t, f.Top, 1)
	assert.Equal(t, "flash::flash_fwd_kernel", f.Top[0].Name)

	// Metrics: the GPU UUID on the resource, next to the engine's identity.
	require.Eventually(t, func() bool { return kernelSeconds(h.sink, "flash::flash_fwd_kernel", 9001) > 0 }, 5*time.Second, 10*time.Millisecond)
	var res0 pcommon.Map
	var ordinal pcommon.Value
	for _, md := range h.sink.AllMetrics() {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			if p, _ := rm.Resource().Attributes().Get("process.pid"); p.Int() == 9001 {
				res0 = rm.Resource().Attributes()
				ordinal, _ = rm.ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0).Attributes().Get(names.AttrCUDADeviceOrdinal)
			}
		}
	}
	require.NotEqual(t, pcommon.Map{}, res0)
	assert.Equal(t, map[string]any{
		"host.name": host, "process.pid": int64(9001), "inferprof.activity.source": "cupti",
		"inferprof.cupti.graph_mode": "node", "inferprof.cupti.sampled": false,
		"hw.id": "GPU-5a3f1c22-9b10-4e8d-a102-334455667788", "service.instance.id": "inst-1", "service.name": "vllm",
	}, res0.AsRaw())
	assert.Equal(t, int64(0), ordinal.Int())

	// Kernel spans: one links to the step that launched it.
	require.Eventually(t, func() bool { return spans.SpanCount() >= 2 }, 5*time.Second, 10*time.Millisecond)
	linked := 0
	for _, td := range spans.AllTraces() {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			ss := td.ResourceSpans().At(i).ScopeSpans().At(0).Spans()
			for j := 0; j < ss.Len(); j++ {
				sp := ss.At(j)
				hw, _ := sp.Attributes().Get(names.AttrDeviceID)
				assert.Equal(t, "GPU-5a3f1c22-9b10-4e8d-a102-334455667788", hw.Str())
				if sp.Links().Len() == 1 {
					linked++
					assert.Equal(t, traceID, sp.Links().At(0).TraceID())
					idx, _ := sp.Attributes().Get(names.AttrStepIndex)
					assert.Equal(t, int64(4), idx.Int())
				}
			}
		}
	}
	assert.Equal(t, 2, linked)
	assert.Zero(t, h.counter(t, "receiver_cupti_kernels_unattributed"))
}
