// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/inferprof/inferprof/internal/exphist"
)

// benchValues are lognormal TTFTs, the values the twins exist for.
func benchValues() []float64 {
	r := rand.New(rand.NewPCG(1, 1))
	vs := make([]float64, 4096)
	for i := range vs {
		vs[i] = 0.159 * math.Exp(0.6*r.NormFloat64())
	}
	return vs
}

// BenchmarkObserve: the cost of one observation into a semconv explicit
// histogram alone (explicit) and with its exponential twin (with_exponential),
// the pair the connector README's ratio compares.
func BenchmarkObserve(b *testing.B) {
	vs := benchValues()
	b.Run("explicit", func(b *testing.B) {
		h := newHistogram(BoundsTTFT, 0)
		b.ReportAllocs()
		for i := range b.N {
			h.Observe(vs[i&4095])
		}
	})
	b.Run("with_exponential", func(b *testing.B) {
		h := newHistogram(BoundsTTFT, 0)
		h.exp = exphist.New()
		b.ReportAllocs()
		for i := range b.N {
			h.Observe(vs[i&4095])
		}
	})
}
