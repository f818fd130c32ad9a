// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import "testing"

// TestEngineTGI: TGI's router spans (generate with a LoRA adapter,
// chat_completions naming the served model, completions), Infer's spans of
// the same names, and a request that failed validation.
func TestEngineTGI(t *testing.T) {
	checkEngine(t, []string{"tgi", "tgi_infer", "tgi_failed", "tgi_failed_infer"}, "tgi", "tgi_failed")
}
