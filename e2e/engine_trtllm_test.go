// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import "testing"

// TestEngineTensorRTLLM: TensorRT-LLM's llm_request spans (one of them
// disaggregated), its handler spans, and a request cancelled before its
// first token, which carries -1 for TTFT and e2e.
func TestEngineTensorRTLLM(t *testing.T) {
	checkEngine(t, []string{"trtllm", "trtllm_handler", "trtllm_cancelled"}, "trtllm", "trtllm_cancelled")
}
