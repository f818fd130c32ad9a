// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwindow

import (
	"hash/fnv"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
)

// InstanceKey returns the window key of the engine instance that res
// describes. It is service.name, because that is what an engine's request
// spans and its step spans share (the hook takes OTEL_SERVICE_NAME, as vLLM
// and SGLang do). Without one it falls back to host.name/process.pid.
// Request ids are unique per server, so the data-parallel engines of one
// server can share a key.
func InstanceKey(res pcommon.Resource) string {
	attrs := res.Attributes()
	if v, ok := attrs.Get(names.ResourceServiceName); ok && v.Str() != "" {
		return v.Str()
	}
	var host string
	if v, ok := attrs.Get(names.ResourceHostName); ok {
		host = v.Str()
	}
	var pid int64
	if v, ok := attrs.Get(names.ResourceProcessPID); ok {
		pid = v.Int()
	}
	return host + "/" + strconv.FormatInt(pid, 10)
}

// FromSpan fills dst from an engine.step span (as the engine_step receiver
// makes them) and its resource, and returns the instance key. It returns
// ok=false for any other span. dst's slices are reused.
//
// Mapping: span start/end -> StartUnixNs/EndUnixNs; inferprof.step.index ->
// Index; inferprof.step.request_ids ([]string) and
// inferprof.step.request_tokens ([]int, aligned) -> RequestIDs/RequestTokens;
// inferprof.step.request_ids_truncated -> Truncated; host.name, process.pid
// and inferprof.engine.index on the resource -> Source.
func FromSpan(span ptrace.Span, res pcommon.Resource, dst *Step) (key string, ok bool) {
	if span.Name() != names.SpanEngineStep {
		return "", false
	}
	attrs := span.Attributes()
	dst.StartUnixNs = int64(span.StartTimestamp())
	dst.EndUnixNs = int64(span.EndTimestamp())
	dst.Index = 0
	if v, found := attrs.Get(names.AttrStepIndex); found {
		dst.Index = uint64(v.Int())
	}
	dst.Truncated = false
	if v, found := attrs.Get(names.AttrStepIDsTruncated); found {
		dst.Truncated = v.Bool()
	}
	dst.RequestIDs = dst.RequestIDs[:0]
	dst.RequestTokens = dst.RequestTokens[:0]
	if v, found := attrs.Get(names.AttrStepRequestIDs); found && v.Type() == pcommon.ValueTypeSlice {
		ids := v.Slice()
		for i := range ids.Len() {
			dst.RequestIDs = append(dst.RequestIDs, ids.At(i).Str())
		}
	}
	if v, found := attrs.Get(names.AttrStepRequestTokens); found && v.Type() == pcommon.ValueTypeSlice {
		toks := v.Slice()
		for i := range toks.Len() {
			dst.RequestTokens = append(dst.RequestTokens, toks.At(i).Int())
		}
	}
	dst.Source = sourceOf(res)
	return InstanceKey(res), true
}

func sourceOf(res pcommon.Resource) uint64 {
	attrs := res.Attributes()
	h := fnv.New64a()
	if v, ok := attrs.Get(names.ResourceHostName); ok {
		_, _ = h.Write([]byte(v.Str()))
	}
	var b [16]byte
	if v, ok := attrs.Get(names.ResourceProcessPID); ok {
		b = appendInt(b, 0, v.Int())
	}
	if v, ok := attrs.Get(names.ResourceEngineIndex); ok {
		b = appendInt(b, 8, v.Int())
	}
	_, _ = h.Write(b[:])
	return h.Sum64()
}

func appendInt(b [16]byte, off int, v int64) [16]byte {
	for i := range 8 {
		b[off+i] = byte(v >> (8 * i))
	}
	return b
}
