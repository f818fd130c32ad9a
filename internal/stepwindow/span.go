// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwindow

import (
	"hash/fnv"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/inferprof/inferprof/internal/names"
	"github.com/inferprof/inferprof/internal/stepspan"
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

// FromStep fills dst from an engine.step span read by stepspan and its
// resource, and returns the service instance's key. dst's slices alias
// st's; Add copies what it keeps.
//
// Mapping: the span's start/end -> StartUnixNs/EndUnixNs; the step index
// (0 when absent or bad) -> Index; request ids and tokens and the truncated
// flag as read; host.name and inferprof.engine.index on the resource ->
// Engine; with process.pid -> Source. The key is InstanceKey's.
func FromStep(st *stepspan.Step, res pcommon.Resource, dst *Step) (key string) {
	dst.StartUnixNs, dst.EndUnixNs = st.StartUnixNs, st.EndUnixNs
	dst.Index = uint64(max(st.Index, 0))
	dst.Truncated = st.Truncated
	dst.RequestIDs, dst.RequestTokens = st.RequestIDs, st.RequestTokens
	ra := res.Attributes()
	pid, index := intAttr(ra, names.ResourceProcessPID), intAttr(ra, names.ResourceEngineIndex)
	host := str(ra, names.ResourceHostName)
	dst.Engine = hashOf(host, 0, index, false)
	dst.Source = hashOf(host, pid, index, true)
	return InstanceKey(res)
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
