// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package privacy

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// vllmAttributes is a vLLM request span's attributes after the inference
// processor: what the privacy processor checks on every request, and where
// it finds nothing to remove.
func vllmAttributes() pcommon.Map {
	m := pcommon.NewMap()
	_ = m.FromRaw(map[string]any{
		"gen_ai.request.id": "cmpl-1", "gen_ai.response.model": "meta-llama/Llama-3.1-8B-Instruct",
		"gen_ai.request.model": "meta-llama/Llama-3.1-8B-Instruct", "gen_ai.operation.name": "chat",
		"gen_ai.provider.name": "vllm", "gen_ai.usage.prompt_tokens": 42, "gen_ai.usage.completion_tokens": 17,
		"gen_ai.usage.input_tokens": 42, "gen_ai.usage.output_tokens": 17,
		"gen_ai.latency.time_in_queue": 0.05, "gen_ai.latency.time_to_first_token": 0.2,
		"gen_ai.latency.e2e": 1.5, "gen_ai.latency.time_in_model_prefill": 0.1,
		"gen_ai.latency.time_in_model_decode": 1.2, "gen_ai.request.max_tokens": 256,
		"inferprof.latency.itl.gaps": []any{0.01, 0.012, 0.011, 0.013},
	})
	return m
}

// flatMap is the rule before issue #30: listed keys at the top level only.
func flatMap(s *Scrubber, m pcommon.Map) int {
	n := 0
	for k := range m.All() {
		if s.attrs.Match(k) {
			n++
		}
	}
	return n
}

// BenchmarkScrubMap: the nested rule (dotted suffixes, kvlist and array
// values) against the flat rule it replaced, on a span with no content.
func BenchmarkScrubMap(b *testing.B) {
	s := DefaultScrubber()
	m := vllmAttributes()
	b.Run("impl=baseline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if flatMap(s, m) != 0 {
				b.Fatal("removed")
			}
		}
	})
	b.Run("impl=nested", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if s.Map(m) != 0 {
				b.Fatal("removed")
			}
		}
	})
}
