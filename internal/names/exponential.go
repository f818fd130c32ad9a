// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package names // import "github.com/inferprof/inferprof/internal/names"

// exponentialTwins maps each exponential metric to the explicit-bucket
// metric of the same values.
var exponentialTwins = map[string]string{
	MetricExpTimeToFirstToken:   MetricTimeToFirstToken,
	MetricExpTimePerOutputToken: MetricTimePerOutputToken,
	MetricExpRequestDuration:    MetricRequestDuration,
	MetricExpQueueDuration:      MetricQueueDuration,
	MetricExpPrefillDuration:    MetricPrefillDuration,
	MetricExpDecodeDuration:     MetricDecodeDuration,
	MetricExpOtherDuration:      MetricOtherDuration,
	MetricExpInterTokenLatency:  MetricInterTokenLatency,
	MetricExpStepDuration:       MetricStepDuration,
	MetricExpStepBatchSize:      MetricStepBatchSize,
	MetricExpStepTokens:         MetricStepTokens,
}

// ExplicitTwin is the explicit-bucket metric an exponential one shadows.
func ExplicitTwin(exponential string) (string, bool) {
	n, ok := exponentialTwins[exponential]
	return n, ok
}
