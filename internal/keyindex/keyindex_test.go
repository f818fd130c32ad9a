// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package keyindex

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIndex(t *testing.T) {
	keys := []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.latency.e2e", "a", "gen_ai.request.model"}
	m := map[string]int{}
	for i, k := range keys {
		m[k] = 4 - i
	}
	tab := New(m)
	require.True(t, tab.Perfect())
	for i, k := range keys {
		require.Equal(t, 4-i, tab.Index(k), k)
	}
	for _, k := range []string{"", "b", "gen_ai.usage.input_token", "gen_ai.usage.input_tokenz", "gen_ai.request.modem", "gen_ai.latency.e2f"} {
		require.Equal(t, -1, tab.Index(k), k)
	}
}

// TestFallback: keys no seed separates (more keys than slots) still map
// right.
func TestFallback(t *testing.T) {
	var keys []string
	m := map[string]int{}
	for i := range size + 1 {
		keys = append(keys, "k"+strconv.Itoa(i))
		m[keys[i]] = i
	}
	tab := New(m)
	require.False(t, tab.Perfect())
	for i, k := range keys {
		require.Equal(t, i, tab.Index(k))
	}
	require.Equal(t, -1, tab.Index("x"))
}

func FuzzIndex(f *testing.F) {
	keys := []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.latency.e2e"}
	tab := New(map[string]int{keys[0]: 0, keys[1]: 1, keys[2]: 2})
	f.Add("gen_ai.usage.input_tokens")
	f.Add("")
	f.Fuzz(func(t *testing.T, k string) {
		want := -1
		for i, key := range keys {
			if key == k {
				want = i
			}
		}
		require.Equal(t, want, tab.Index(k))
	})
}
