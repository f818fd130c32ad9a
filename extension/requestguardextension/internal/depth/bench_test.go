// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package depth

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// batch is 500 vLLM request spans, the soak's batch, each with the
// attributes vLLM sets.
func batch(b *testing.B) ptraceotlp.ExportRequest {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "vllm")
	rs.Resource().Attributes().PutStr("host.name", "node-7")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	for i := range 500 {
		s := spans.AppendEmpty()
		s.SetName("llm_request")
		s.SetTraceID([16]byte{byte(i), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
		s.SetSpanID([8]byte{byte(i), 1, 2, 3, 4, 5, 6, 7})
		s.SetStartTimestamp(1_700_000_000_000_000_000)
		s.SetEndTimestamp(1_700_000_001_000_000_000)
		a := s.Attributes()
		a.PutStr("gen_ai.request.model", "meta-llama/Llama-3.1-8B-Instruct")
		a.PutStr("gen_ai.request.id", fmt.Sprintf("cmpl-%08d", i))
		a.PutInt("gen_ai.usage.input_tokens", 512)
		a.PutInt("gen_ai.usage.output_tokens", 128)
		a.PutDouble("gen_ai.latency.time_to_first_token", 0.042)
		a.PutDouble("gen_ai.latency.e2e", 1.1)
		a.PutDouble("gen_ai.request.temperature", 0.7)
		a.PutInt("gen_ai.request.max_tokens", 256)
	}
	req := ptraceotlp.NewExportRequestFromTraces(td)
	_, err := req.MarshalProto()
	require.NoError(b, err)
	return req
}

// BenchmarkScan/pdata is the decode the receiver does anyway; scan/proto
// is what the guard adds before it. benchstat's ratio is the cost.
func BenchmarkScan(b *testing.B) {
	req := batch(b)
	pb, err := req.MarshalProto()
	require.NoError(b, err)
	js, err := req.MarshalJSON()
	require.NoError(b, err)
	b.Run("codec=proto/step=pdata", func(b *testing.B) {
		b.SetBytes(int64(len(pb)))
		for b.Loop() {
			if err := ptraceotlp.NewExportRequest().UnmarshalProto(pb); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec=proto/step=scan", func(b *testing.B) {
		b.SetBytes(int64(len(pb)))
		for b.Loop() {
			if err := Proto(pb, 128); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec=json/step=pdata", func(b *testing.B) {
		b.SetBytes(int64(len(js)))
		for b.Loop() {
			if err := ptraceotlp.NewExportRequest().UnmarshalJSON(js); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec=json/step=scan", func(b *testing.B) {
		b.SetBytes(int64(len(js)))
		for b.Loop() {
			if err := JSON(js, 128); err != nil {
				b.Fatal(err)
			}
		}
	})
}
