// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/inferprof/inferprof/receiver/nvmlreceiver/internal/metadatatest"
)

// TestXIDCodesBounded: a driver that reports ever new XID codes (a broken
// or fuzzed one) cannot grow the per-code counter map past maxXIDCodes; the
// events past it are counted.
func TestXIDCodesBounded(t *testing.T) {
	srv, q := newMockServer(1)
	env := newTestEnv(t, srv, nil)
	require.NoError(t, env.src.start(t.Context(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, env.src.shutdown(t.Context())) })
	const extra = 5
	for code := range maxXIDCodes + extra {
		q.push(nvml.EventData{Device: srv.Devices[0], EventType: nvml.EventTypeXidCriticalError, EventData: uint64(1000 + code)})
	}
	// One poll reads at most maxEventsPerPoll events; two scrapes drain them.
	_, err := env.src.scrapeMetrics(t.Context())
	require.NoError(t, err)
	md, err := env.src.scrapeMetrics(t.Context())
	require.NoError(t, err)
	m, ok := metricIn(resourceByUUID(t, md, uuidOf(srv, 0)), "nvidia.gpu.xid.errors")
	require.True(t, ok)
	assert.Equal(t, maxXIDCodes, m.Sum().DataPoints().Len())
	metadatatest.AssertEqualReceiverNvmlXidCodesDropped(t, env.tt, []metricdata.DataPoint[int64]{{Value: extra}}, metricdatatest.IgnoreTimestamp())
}

// TestProcessesBounded: a device listing more processes than maxProcesses
// gets the first maxProcesses recorded, and the rest counted.
func TestProcessesBounded(t *testing.T) {
	srv, _ := newMockServer(1)
	const extra = 3
	procs := make([]nvml.ProcessInfo, maxProcesses+extra)
	for i := range procs {
		procs[i] = nvml.ProcessInfo{Pid: uint32(100000 + i), UsedGpuMemory: 1 << 20}
	}
	dev := srv.Devices[0].(*server.Device)
	dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return procs, nvml.SUCCESS }
	dev.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) { return nil, nvml.ERROR_NOT_FOUND }
	env := newTestEnv(t, srv, func(c *Config) { c.Processes.ProcRoot = "" })
	require.NoError(t, env.src.start(t.Context(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, env.src.shutdown(t.Context())) })
	md, err := env.src.scrapeMetrics(t.Context())
	require.NoError(t, err)
	pids := 0
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		if _, ok := md.ResourceMetrics().At(i).Resource().Attributes().Get("process.pid"); ok {
			pids++
		}
	}
	assert.Equal(t, maxProcesses, pids)
	assert.LessOrEqual(t, len(env.src.devices[0].procRes), maxProcesses)
	metadatatest.AssertEqualReceiverNvmlProcessesDropped(t, env.tt, []metricdata.DataPoint[int64]{{Value: extra}}, metricdatatest.IgnoreTimestamp())
}
