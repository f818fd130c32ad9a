// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector // import "github.com/inferprof/inferprof/connector/inferencemetricsconnector"

import (
	"time"

	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/aggregate"
	"github.com/inferprof/inferprof/internal/names"
)

// targets are the targets set, as the connector emits them in
// inferprof.server.goodput.target: the one home of the goodput targets,
// which the dashboard reads from there.
func (g GoodputConfig) targets() []aggregate.GoodputTarget {
	var out []aggregate.GoodputTarget
	for _, t := range []struct {
		criterion string
		d         time.Duration
	}{{names.GoodputTTFT, g.TimeToFirstToken}, {names.GoodputTPOT, g.TimePerOutputToken}, {names.GoodputE2E, g.E2E}} {
		if t.d > 0 {
			out = append(out, aggregate.GoodputTarget{Criterion: t.criterion, Seconds: t.d.Seconds()})
		}
	}
	return out
}
