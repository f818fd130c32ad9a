// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferenceprocessor // import "github.com/inferprof/inferprof/processor/inferenceprocessor"

import (
	"time"

	"github.com/inferprof/inferprof/internal/confdur"
)

// Minimums of the durations. A bare number in YAML (5, not 5s) decodes as
// nanoseconds: a wait that short holds nothing, and a window that short keeps
// nothing, both silently. Waits are thresholds checked on a ticker, so a
// millisecond is already finer than they act on; windows hold state for
// whole requests, which last seconds.
const (
	minWait   = time.Millisecond
	minWindow = time.Second
)

// validateMinimums checks every duration of the join that is set (0 keeps
// its own meaning: off, or the check above) against its minimum. A function
// of the durations rather than a method of Config, so this file needs nothing
// of config.go, which calls it.
func validateMinimums(joinWait, stageTTL time.Duration) []error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(confdur.Min("sglang_join.wait", joinWait, minWait))
	add(confdur.Min("sglang_join.stage_ttl", stageTTL, minWindow))
	return errs
}
