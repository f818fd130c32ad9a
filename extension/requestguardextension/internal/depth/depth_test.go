// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package depth

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// nested returns a request whose one span carries an attribute of arrays
// nested n deep (kvlist when kv), the shape of the body that overflowed
// pdata's stack.
func nested(n int, kv bool) ptraceotlp.ExportRequest {
	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("llm_request")
	v := span.Attributes().PutEmpty("deep")
	for range n {
		if kv {
			v = v.SetEmptyMap().PutEmpty("k")
		} else {
			v = v.SetEmptySlice().AppendEmpty()
		}
	}
	v.SetStr("leaf")
	return ptraceotlp.NewExportRequestFromTraces(td)
}

// spanAnyValueDepth is how many levels a span attribute's AnyValue sits
// below the request: ResourceSpans, ScopeSpans, Span, KeyValue, AnyValue.
const spanAnyValueDepth = 5

func TestProtoAndJSONRefuseAtTheSameDepth(t *testing.T) {
	const limit = 64
	for _, kv := range []bool{false, true} {
		perLevel := 2 // AnyValue > ArrayValue > AnyValue
		if kv {
			perLevel = 3 // AnyValue > KeyValueList > KeyValue > AnyValue
		}
		deepest := (limit - spanAnyValueDepth) / perLevel
		for _, n := range []int{0, 1, deepest, deepest + 1, 3 * limit} {
			req := nested(n, kv)
			pb, err := req.MarshalProto()
			require.NoError(t, err)
			js, err := req.MarshalJSON()
			require.NoError(t, err)
			perr, jerr := Proto(pb, limit), JSON(js, limit)
			if n <= deepest {
				require.NoError(t, perr, "n=%d kv=%v", n, kv)
				require.NoError(t, jerr, "n=%d kv=%v", n, kv)
			} else {
				require.ErrorIs(t, perr, ErrTooDeep, "n=%d kv=%v", n, kv)
				require.ErrorIs(t, jerr, ErrTooDeep, "n=%d kv=%v", n, kv)
			}
		}
	}
}

// deepArrays writes the wire bytes of the crashing body directly (pdata's
// own marshaller recurses as deep as its unmarshaller), in one pass: the
// sizes are worked out innermost first, then the prefixes written
// outermost first.
func deepArrays(n int) []byte {
	leaf := []byte{0x0a, 0x01, 'x'} // AnyValue{string_value: "x"}
	// Each level is ArrayValue.values (1) inside AnyValue.array_value (5).
	fields := make([]byte, 0, 2*n+5)
	for range n {
		fields = append(fields, 1, 5)
	}
	sizes := make([]int, len(fields)+1)
	sizes[0] = len(leaf)
	for i := range fields {
		sizes[i+1] = 1 + varintLen(sizes[i]) + sizes[i]
	}
	valueSize := sizes[len(fields)]
	out := make([]byte, 0, valueSize+64)
	// ExportTraceServiceRequest.resource_spans > ResourceSpans.scope_spans >
	// ScopeSpans.spans > Span.attributes > KeyValue{key: "k", value}.
	kv := 3 + 1 + varintLen(valueSize) + valueSize
	span := 1 + varintLen(kv) + kv
	ss := 1 + varintLen(span) + span
	rs := 1 + varintLen(ss) + ss
	out = appendPrefix(out, 1, rs)
	out = appendPrefix(out, 2, ss)
	out = appendPrefix(out, 2, span)
	out = appendPrefix(out, 9, kv)
	out = append(out, 0x0a, 0x01, 'k')
	out = appendPrefix(out, 2, valueSize)
	for i := len(fields) - 1; i >= 0; i-- {
		out = appendPrefix(out, fields[i], sizes[i])
	}
	return append(out, leaf...)
}

func appendPrefix(out []byte, fieldNum byte, size int) []byte {
	out = append(out, fieldNum<<3|2)
	n := uint64(size)
	for n >= 0x80 {
		out = append(out, byte(n)|0x80)
		n >>= 7
	}
	return append(out, byte(n))
}

func varintLen(n int) int {
	l := 1
	for n >= 0x80 {
		n >>= 7
		l++
	}
	return l
}

func TestProtoRefusesTheCrashingBodyFast(t *testing.T) {
	b := deepArrays(1_300_000)
	require.ErrorIs(t, Proto(b, 128), ErrTooDeep)
	js := []byte(strings.Repeat(`{"arrayValue":{"values":[`, 700_000))
	require.ErrorIs(t, JSON(js, 128), ErrTooDeep)
	require.ErrorIs(t, JSON(bytes.Repeat([]byte{'['}, 1000), 128), ErrTooDeep)
}

func TestProtoMatchesPdataOnItsOwnBytes(t *testing.T) {
	// A body deep enough to matter but shallow enough for pdata: the
	// hand-written bytes are what pdata decodes, at the depth counted.
	b := deepArrays(20)
	req := ptraceotlp.NewExportRequest()
	require.NoError(t, req.UnmarshalProto(b))
	v, ok := req.Traces().ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().Get("k")
	require.True(t, ok)
	levels := 0
	for v.Type() == pcommon.ValueTypeSlice {
		v = v.Slice().At(0)
		levels++
	}
	require.Equal(t, 20, levels)
	require.Equal(t, "x", v.Str())
	// AnyValue of the attribute at depth 5, 2 per level, the leaf AnyValue
	// at 5+2*20 = 45.
	require.NoError(t, Proto(b, 45))
	require.ErrorIs(t, Proto(b, 44), ErrTooDeep)
}

func TestStringsThatLookLikeBracketsDoNotCount(t *testing.T) {
	js := []byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":{"stringValue":"` +
		strings.Repeat(`{[\"`, 1000) + `"}}]}}]}`)
	require.NoError(t, JSON(js, 8))
	// A mismatched closer ends the scan where a decoder fails.
	require.NoError(t, JSON([]byte(`{]`+strings.Repeat("{", 1000)), 8))
	// Not protobuf at the top level: left to the decoder.
	require.NoError(t, Proto([]byte("garbage, not protobuf"), 8))
	require.NoError(t, Proto(nil, 8))
}

func TestProtoStringsStayFlat(t *testing.T) {
	// A span whose name is text: the name is not valid protobuf, so it adds
	// no depth, and the request sits at the span's depth.
	req := nested(0, false)
	pb, err := req.MarshalProto()
	require.NoError(t, err)
	require.NoError(t, Proto(pb, spanAnyValueDepth))
	require.ErrorIs(t, Proto(pb, spanAnyValueDepth-1), ErrTooDeep)
}
