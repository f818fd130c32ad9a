// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepstoreextension_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/inferprof/inferprof/extension/stepstoreextension"
	"github.com/inferprof/inferprof/extension/stepstoreextension/stepstoretest"
	"github.com/inferprof/inferprof/internal/cuptiwire"
	"github.com/inferprof/inferprof/internal/gpuwindow"
	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/stepstore"
	"github.com/inferprof/inferprof/processor/stepfiguresprocessor"
	"github.com/inferprof/inferprof/receiver/cuptireceiver"
)

// collector is one collector's worth of the components that meet in the
// store: its step_store, a cupti receiver and a step_figures processor that
// both reference it by the same id as the other collector's do.
type collector struct {
	win      *gpuwindow.Window
	endpoint string
	proc     processor.Traces
	out      *consumertest.TracesSink
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	ctx := context.Background()
	sf := stepstoreextension.NewFactory()
	ext, err := sf.Create(ctx, extensiontest.NewNopSettings(sf.Type()), sf.CreateDefaultConfig())
	require.NoError(t, err)
	require.NoError(t, ext.Start(ctx, stepstoretest.Host{}))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(ctx)) })
	host := stepstoretest.Host{stepstoretest.ID: ext}
	dir, err := os.MkdirTemp("", "store")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	c := &collector{win: ext.(stepstore.Provider).Window(), endpoint: filepath.Join(dir, "cupti.sock"), out: new(consumertest.TracesSink)}

	rf := cuptireceiver.NewFactory()
	rcfg := rf.CreateDefaultConfig().(*cuptireceiver.Config)
	rcfg.Endpoint = c.endpoint
	rcfg.StepStore = stepstoretest.Ref()
	rcv, err := rf.CreateMetrics(ctx, receivertest.NewNopSettings(rf.Type()), rcfg, new(consumertest.MetricsSink))
	require.NoError(t, err)
	require.NoError(t, rcv.Start(ctx, host))
	t.Cleanup(func() { require.NoError(t, rcv.Shutdown(ctx)) })

	pf := stepfiguresprocessor.NewFactory()
	pcfg := pf.CreateDefaultConfig().(*stepfiguresprocessor.Config)
	pcfg.GPU.StepStore = stepstoretest.Ref()
	pcfg.GPU.Wait = time.Hour // a held step stays held for the test
	c.proc, err = pf.CreateTraces(ctx, processortest.NewNopSettings(pf.Type()), pcfg, c.out)
	require.NoError(t, err)
	require.NoError(t, c.proc.Start(ctx, host))
	t.Cleanup(func() { require.NoError(t, c.proc.Shutdown(ctx)) })
	return c
}

func stepSpan(host string, pid int64, t0 uint64) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(names.ResourceServiceName, "vllm")
	rs.Resource().Attributes().PutStr(names.ResourceHostName, host)
	rs.Resource().Attributes().PutInt(names.ResourceProcessPID, pid)
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetName(names.SpanEngineStep)
	s.SetTraceID(pcommon.TraceID{1})
	s.SetSpanID(pcommon.SpanID{1})
	s.SetStartTimestamp(pcommon.Timestamp(t0))
	s.SetEndTimestamp(pcommon.Timestamp(t0 + 1_000_000))
	s.Attributes().PutInt(names.AttrStepIndex, 1)
	return td
}

// Two collectors in one process, configured alike: an engine's CUPTI
// stream reaches only the store of the collector it connected to, and only
// that collector's processor waits for its kernels. With a process-wide
// window the other collector's processor would hold the step too.
func TestTwoCollectorsDoNotShare(t *testing.T) {
	a, b := newCollector(t), newCollector(t)
	const host, pid = "isolation-host", 4242
	t0 := uint64(time.Now().UnixNano())

	conn, err := net.Dial("unix", a.endpoint)
	require.NoError(t, err)
	defer conn.Close()
	frame := cuptiwire.AppendHello(nil, pid, t0, host)
	frame = cuptiwire.AppendLaunches(frame, []cuptiwire.Launch{{Kind: cuptiwire.LaunchKindKernel, Correlation: 1, ThreadID: pid, Time: t0 - 10}})
	_, err = conn.Write(frame)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return a.win.Stats().Sources == 1 }, 5*time.Second, 5*time.Millisecond)
	require.Zero(t, b.win.Stats().Sources, "the stream reached the other collector's store")

	ctx := context.Background()
	require.NoError(t, a.proc.ConsumeTraces(ctx, stepSpan(host, pid, t0)))
	require.NoError(t, b.proc.ConsumeTraces(ctx, stepSpan(host, pid, t0)))

	require.Equal(t, 1, a.win.Stats().PendingSteps, "collector a holds its step for the kernels")
	require.Zero(t, a.out.SpanCount())
	require.Zero(t, b.win.Stats().PendingSteps)
	require.Equal(t, 1, b.out.SpanCount(), "collector b has no stream: its step passes at once")
	v, ok := b.out.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().Get(names.AttrStepGPUMissing)
	require.True(t, ok)
	require.Equal(t, string(gpuwindow.MissingNoSource), v.Str())
}
