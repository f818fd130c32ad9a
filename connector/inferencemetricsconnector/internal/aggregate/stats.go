// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate

// The aggregates a new request or step series gets: each histogram with
// its bounds and, where not switched off, its exponential twin.

// Bucket boundaries. The gen_ai.server.* ones are the GenAI semantic
// conventions' advice (v1.41.0); the rest are ours, documented in metadata.yaml.
var (
	BoundsTTFT            = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}
	BoundsTPOT            = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5}
	BoundsRequestDuration = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	// Phases can be far shorter than a whole request, so they start at 1 ms.
	BoundsPhase = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	// Token gaps and steps are a few to tens of milliseconds on current GPUs;
	// the semconv TPOT buckets would put most of them in two buckets.
	BoundsITL          = []float64{0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5}
	BoundsStepDuration = BoundsITL
	BoundsTokens       = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	BoundsBatchSize    = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
	BoundsStepTokens   = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
	// Shares of a request's time, 0 to 1.
	BoundsShare = []float64{0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}
)

func (st *Store) newRequestStats() *RequestStats {
	ex := st.set.MaxExemplars
	return st.withExponential(&RequestStats{
		TTFT:         newHistogram(BoundsTTFT, ex),
		TPOT:         newHistogram(BoundsTPOT, ex),
		Duration:     newHistogram(BoundsRequestDuration, ex),
		Queue:        newHistogram(BoundsPhase, ex),
		Prefill:      newHistogram(BoundsPhase, ex),
		Decode:       newHistogram(BoundsPhase, ex),
		Other:        newHistogram(BoundsPhase, ex),
		ITL:          newHistogram(BoundsITL, ex),
		InputTokens:  newHistogram(BoundsTokens, 0),
		OutputTokens: newHistogram(BoundsTokens, 0),
		// A share: 0 (the GPU never waited) to 1.
		CPUOverheadShare: newHistogram(BoundsShare, ex),
	})
}

func (st *Store) newStepStats() *StepStats {
	return st.withExponentialSteps(&StepStats{
		Duration:  newHistogram(BoundsStepDuration, st.set.MaxExemplars),
		BatchSize: newHistogram(BoundsBatchSize, 0),
		Tokens:    newHistogram(BoundsStepTokens, 0),
	})
}
