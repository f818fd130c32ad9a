// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/timeline"

// Readers of attribute and data point values for the collect code, at the
// bottom with no ties of their own so that any file may call them.

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

func str(a pcommon.Map, k string) string {
	if v, ok := a.Get(k); ok && v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
}

func float(a pcommon.Map, k string) float64 {
	if v, ok := a.Get(k); ok {
		if f, ok := toFloat(v); ok {
			return f
		}
	}
	return math.NaN()
}

func toFloat(v pcommon.Value) (float64, bool) {
	switch v.Type() {
	case pcommon.ValueTypeDouble:
		f := v.Double()
		return f, !math.IsNaN(f) && !math.IsInf(f, 0)
	case pcommon.ValueTypeInt:
		return float64(v.Int()), true
	}
	return 0, false
}

func integer(a pcommon.Map, k string) int64 {
	if v, ok := a.Get(k); ok {
		switch v.Type() {
		case pcommon.ValueTypeInt:
			return v.Int()
		case pcommon.ValueTypeDouble:
			if f := v.Double(); !math.IsNaN(f) && !math.IsInf(f, 0) {
				return int64(f)
			}
		}
	}
	return -1
}

func number(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}
