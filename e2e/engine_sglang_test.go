// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import "testing"

// TestEngineSGLang: SGLang's tokenizer and scheduler batches (unified mode
// at trace level 3, an abort, and a prefill/decode disaggregated request
// from four processes). In one order the roots come before their stages and
// are held for the join; reversed, the stages come first.
func TestEngineSGLang(t *testing.T) {
	checkEngine(t, []string{
		"sglang_root", "sglang_stages_level3", "sglang_abort_root", "sglang_abort_stages",
		"sglang_pd_prefill_root", "sglang_pd_decode_root", "sglang_pd_prefill_stages", "sglang_pd_decode_stages",
	}, "sglang_level3", "sglang_abort", "sglang_pd")
}
