// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package request // import "github.com/inferprof/inferprof/internal/request"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/names"
)

// IsSyntheticPhase reports whether span is one of the phase spans the
// inference processor draws under a request span: named for its phase and
// marked inferprof.synthetic. Components after it skip these first, as
// three of every four spans of an engine's batch: the name test is inlined
// at the caller (comparisons with short constants), so another span costs
// no call.
func IsSyntheticPhase(span ptrace.Span) bool {
	switch span.Name() {
	case names.SpanPhaseQueue, names.SpanPhasePrefill, names.SpanPhaseDecode:
		return synthetic(span)
	}
	return false
}

func synthetic(span ptrace.Span) bool {
	v, ok := span.Attributes().Get(names.AttrSynthetic)
	return ok && v.Type() == pcommon.ValueTypeBool && v.Bool()
}
