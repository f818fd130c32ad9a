// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package enginestepreceiver // import "github.com/inferprof/inferprof/receiver/enginestepreceiver"

import (
	"encoding/binary"
	"hash/fnv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/stepwire"
)

const scopeName = "github.com/inferprof/inferprof/receiver/enginestepreceiver"

// converter turns decoded steps into engine.step spans.
type converter struct {
	version string
}

func newConverter(version string) converter { return converter{version: version} }

// traces returns one resource with one engine.step span for step s.
//
// Each step is its own trace: one engine runs 50-200 steps a second, and one
// trace per instance would grow without end. The ids derive from the
// instance and the step index, so a resent step gets the same ids.
func (c converter) traces(s *stepwire.Step) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	res := rs.Resource().Attributes()
	res.EnsureCapacity(7)
	engine := s.Engine.String()
	service := s.ServiceName
	if service == "" {
		service = engine
	}
	res.PutStr(names.ResourceServiceName, service)
	res.PutStr(names.ResourceEngineName, engine)
	if s.EngineVersion != "" {
		res.PutStr(names.ResourceEngineVersion, s.EngineVersion)
	}
	res.PutInt(names.ResourceProcessPID, int64(s.PID))
	if s.Host != "" {
		res.PutStr(names.ResourceHostName, s.Host)
	}
	res.PutInt(names.ResourceEngineIndex, int64(s.EngineIndex))
	// The engine's own service.instance.id (inferprof-run sets it) is what
	// its request spans carry too; without one, the engine process.
	instance := s.InstanceID
	if instance == "" {
		instance = stepwire.FallbackInstanceID(s.Host, s.PID, s.EngineIndex)
	}
	res.PutStr(names.ResourceServiceInstance, instance)

	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(scopeName)
	ss.Scope().SetVersion(c.version)
	sp := ss.Spans().AppendEmpty()
	sp.SetName(names.SpanEngineStep)
	sp.SetKind(ptrace.SpanKindInternal)
	tid, sid := ids(s)
	sp.SetTraceID(tid)
	sp.SetSpanID(sid)
	sp.SetStartTimestamp(pcommon.Timestamp(s.StartUnixNs))
	sp.SetEndTimestamp(pcommon.Timestamp(s.EndUnixNs))

	a := sp.Attributes()
	a.EnsureCapacity(14)
	a.PutInt(names.AttrStepIndex, int64(s.Index))
	a.PutInt(names.AttrStepPrefillReqs, int64(s.PrefillRequests))
	a.PutInt(names.AttrStepDecodeReqs, int64(s.DecodeRequests))
	a.PutInt(names.AttrStepScheduledToks, int64(s.ScheduledTokens))
	a.PutInt(names.AttrStepRunningReqs, int64(s.Running))
	a.PutInt(names.AttrStepWaitingReqs, int64(s.Waiting))
	if s.KVUsageKnown() {
		a.PutDouble(names.AttrStepKVCacheUsage, float64(s.KVUsage))
	}
	idsAttr := a.PutEmptySlice(names.AttrStepRequestIDs)
	idsAttr.EnsureCapacity(len(s.RequestIDs))
	for _, id := range s.RequestIDs {
		idsAttr.AppendEmpty().SetStr(id)
	}
	toks := a.PutEmptySlice(names.AttrStepRequestTokens)
	toks.EnsureCapacity(len(s.RequestTokens))
	for _, n := range s.RequestTokens {
		toks.AppendEmpty().SetInt(n)
	}
	putStrs(a, names.AttrStepPreempted, s.Preempted)
	putStrs(a, names.AttrStepResumed, s.Resumed)
	if s.IDsTruncated() {
		a.PutBool(names.AttrStepIDsTruncated, true)
	}
	if s.Degraded() {
		a.PutBool(names.AttrStepDegraded, true)
	}
	if s.Batch != 0 {
		a.PutInt(names.AttrStepBatch, int64(s.Batch))
	}
	if len(s.Windows) > 0 {
		starts := a.PutEmptySlice(names.AttrStepLaunchStarts)
		ends := a.PutEmptySlice(names.AttrStepLaunchEnds)
		threads := a.PutEmptySlice(names.AttrStepLaunchThreads)
		starts.EnsureCapacity(len(s.Windows))
		ends.EnsureCapacity(len(s.Windows))
		threads.EnsureCapacity(len(s.Windows))
		for _, w := range s.Windows {
			starts.AppendEmpty().SetInt(w.StartUnixNs)
			ends.AppendEmpty().SetInt(w.EndUnixNs)
			threads.AppendEmpty().SetInt(int64(w.ThreadID))
		}
	}
	return td
}

// putStrs sets key to a string slice (empty when ids is).
func putStrs(a pcommon.Map, key string, ids []string) {
	v := a.PutEmptySlice(key)
	v.EnsureCapacity(len(ids))
	for _, id := range ids {
		v.AppendEmpty().SetStr(id)
	}
}

// ids derives a trace id (instance hash, step index) and a span id.
func ids(s *stepwire.Step) (pcommon.TraceID, pcommon.SpanID) {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s.Host))
	var b [12]byte
	binary.LittleEndian.PutUint32(b[0:], s.PID)
	binary.LittleEndian.PutUint32(b[4:], s.EngineIndex)
	binary.LittleEndian.PutUint32(b[8:], uint32(s.Engine))
	_, _ = h.Write(b[:])
	inst := h.Sum64()
	var tid pcommon.TraceID
	binary.BigEndian.PutUint64(tid[0:], inst)
	binary.BigEndian.PutUint64(tid[8:], s.Index)
	var sid pcommon.SpanID
	v := inst ^ s.Index*0x9e3779b97f4a7c15 // spread consecutive indexes
	if v == 0 {
		v = 1 // an all-zero span id is invalid
	}
	binary.BigEndian.PutUint64(sid[:], v)
	return tid, sid
}
