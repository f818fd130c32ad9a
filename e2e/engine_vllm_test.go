// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import "testing"

// TestEngineVLLM: vLLM V1's llm_request spans (a finished request, two
// aborted before their first token) and the journey-tracing branch's API
// and engine-core spans, from two processes.
func TestEngineVLLM(t *testing.T) {
	checkEngine(t, []string{"vllm_basic", "vllm_aborted", "vllm_journey_api", "vllm_journey_core"},
		"vllm_basic", "vllm_aborted", "vllm_journey")
}
