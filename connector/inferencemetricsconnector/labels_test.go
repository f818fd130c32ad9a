// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestLabelValue(t *testing.T) {
	v, changed := labelValue("meta-llama/Llama-3.1-8B-Instruct")
	require.False(t, changed)
	require.Equal(t, "meta-llama/Llama-3.1-8B-Instruct", v)

	v, changed = labelValue("llama\xff\xfe-8b")
	require.True(t, changed)
	require.Equal(t, "llama\uFFFD\uFFFD-8b", v)

	v, changed = labelValue(strings.Repeat("m", 10<<20))
	require.True(t, changed)
	require.Equal(t, strings.Repeat("m", maxLabelBytes), v)

	// Cut at a character boundary: 255 ASCII bytes, then a 3-byte rune
	// that would pass the cap.
	v, changed = labelValue(strings.Repeat("a", 255) + "€€")
	require.True(t, changed)
	require.Equal(t, strings.Repeat("a", 255), v)
	require.True(t, utf8.ValidString(v))

	v, changed = labelValue(strings.Repeat("\xff", 1000))
	require.True(t, changed)
	require.True(t, utf8.ValidString(v))
	require.LessOrEqual(t, len(v), maxLabelBytes)
}

func FuzzLabelValue(f *testing.F) {
	f.Add("meta-llama/Llama-3.1-8B-Instruct")
	f.Add("\xff\xfe")
	f.Fuzz(func(t *testing.T, s string) {
		v, changed := labelValue(s)
		if !utf8.ValidString(v) || len(v) > maxLabelBytes {
			t.Fatalf("labelValue(%q) = %q", s, v)
		}
		if !changed && v != s {
			t.Fatalf("unchanged but different: %q", s)
		}
	})
}
