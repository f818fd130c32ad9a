// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate // import "github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/aggregate"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/inferprof/inferprof/internal/names"
)

// groupLimits caps the series of one model and of one service, so that a
// burst of new values from one sender (5,000 invented model names) fills
// its own share and not the whole cardinality limit: the other models and
// services keep getting series of their own. Counts drop as series expire.
type groupLimits struct {
	perModel, perService int // 0: no cap
	byModel, byService   map[string]int
}

func newGroupLimits(perModel, perService int) groupLimits {
	return groupLimits{perModel: perModel, perService: perService, byModel: map[string]int{}, byService: map[string]int{}}
}

// admit reports whether a new series of model under service fits. An empty
// model is not a group: step and agent series have none.
func (g *groupLimits) admit(service, model string) bool {
	if g.perService > 0 && g.byService[service] >= g.perService {
		return false
	}
	return model == "" || g.perModel <= 0 || g.byModel[model] < g.perModel
}

func (g *groupLimits) add(s *Series) {
	g.byService[s.service]++
	if s.model != "" {
		g.byModel[s.model]++
	}
}

func (g *groupLimits) remove(s *Series) {
	if n := g.byService[s.service] - 1; n > 0 {
		g.byService[s.service] = n
	} else {
		delete(g.byService, s.service)
	}
	if s.model == "" {
		return
	}
	if n := g.byModel[s.model] - 1; n > 0 {
		g.byModel[s.model] = n
	} else {
		delete(g.byModel, s.model)
	}
}

func serviceOf(resAttrs pcommon.Map) string {
	if v, ok := resAttrs.Get(names.ResourceServiceName); ok && v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
}
