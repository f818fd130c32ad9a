// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwindow

import (
	"hash/fnv"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
)

// InstanceKey returns the key of the service instance that res describes
// (a request span's or a step's resource): "service.name [service.instance.id]",
// or the service.name alone without an instance id. It reads well, so other
// views (the timeline) can show it.
//
// The service.instance.id is what joins a server's request spans to its
// engines' steps: inferprof-run puts one in OTEL_RESOURCE_ATTRIBUTES, which
// the engine's OpenTelemetry SDK, its engine processes and the step hook
// all read, so two replicas with one service.name stay apart. Without one
// (no launcher), steps and requests meet on service.name; the engines of
// each host keep their own windows, and a request is found in the one that
// holds its id. The id the engine_step receiver makes up for a hook that had
// none (host/pid/engine_index, which names the engine process, not the
// server) is left out.
func InstanceKey(res pcommon.Resource) string {
	ra := res.Attributes()
	host := str(ra, names.ResourceHostName)
	pid, index := intAttr(ra, names.ResourceProcessPID), intAttr(ra, names.ResourceEngineIndex)
	id := str(ra, names.ResourceServiceInstance)
	if isProcessInstance(id, host, pid, index) {
		id = ""
	}
	return joinKey(id, str(ra, names.ResourceServiceName))
}

func str(attrs pcommon.Map, key string) string {
	if v, ok := attrs.Get(key); ok {
		return v.Str()
	}
	return ""
}

func intAttr(attrs pcommon.Map, key string) int64 {
	if v, ok := attrs.Get(key); ok {
		return v.Int()
	}
	return 0
}

func joinKey(id, service string) string {
	if id == "" {
		return service
	}
	return service + " [" + id + "]"
}

func splitKey(key string) (id, service string) {
	if !strings.HasSuffix(key, "]") {
		return "", key
	}
	i := strings.LastIndex(key, " [")
	if i < 0 {
		return "", key
	}
	return key[i+2 : len(key)-1], key[:i]
}

// FromSpan fills dst from an engine.step span (as the engine_step receiver
// makes them) and its resource, and returns the service instance's key. It
// returns ok=false for any other span. dst's slices are reused.
//
// Mapping: span start/end -> StartUnixNs/EndUnixNs; inferprof.step.index ->
// Index; inferprof.step.request_ids ([]string) and
// inferprof.step.request_tokens ([]int, aligned) -> RequestIDs/RequestTokens;
// inferprof.step.request_ids_truncated -> Truncated; host.name and
// inferprof.engine.index on the resource -> Engine; with process.pid ->
// Source. The key is InstanceKey's.
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
	ra := res.Attributes()
	pid, index := intAttr(ra, names.ResourceProcessPID), intAttr(ra, names.ResourceEngineIndex)
	host := str(ra, names.ResourceHostName)
	dst.Engine = hashOf(host, 0, index, false)
	dst.Source = hashOf(host, pid, index, true)
	return InstanceKey(res), true
}

// isProcessInstance reports whether id is the receiver's stand-in,
// "host/pid/engine_index" (stepwire.FallbackInstanceID).
func isProcessInstance(id, host string, pid, index int64) bool {
	if id == "" {
		return false
	}
	rest, ok := strings.CutPrefix(id, host)
	if !ok || !strings.HasPrefix(rest, "/") {
		return false
	}
	p, i, ok := strings.Cut(rest[1:], "/")
	return ok && p == strconv.FormatInt(pid, 10) && i == strconv.FormatInt(index, 10)
}

// hashOf identifies an engine (host and engine index) or, withPID, one of
// its processes.
func hashOf(host string, pid, index int64, withPID bool) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(host))
	var b [17]byte
	for i := range 8 {
		b[i] = byte(pid >> (8 * i))
		b[8+i] = byte(index >> (8 * i))
	}
	if withPID {
		b[16] = 1
	}
	_, _ = h.Write(b[:])
	return h.Sum64()
}
