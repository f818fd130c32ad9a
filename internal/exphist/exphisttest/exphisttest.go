// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package exphisttest holds the exact percentile that tests of estimated
// percentiles compare against.
package exphisttest // import "github.com/inferprof/inferprof/internal/exphist/exphisttest"

import (
	"math"
	"slices"
)

// NearestRank is the exact q-quantile of vs by nearest rank: the value of
// rank ceil(q × n) in sorted order. vs is not changed.
func NearestRank(vs []float64, q float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	r := int(math.Ceil(q * float64(len(s))))
	return s[min(max(r, 1), len(s))-1]
}
