// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package request

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKeyTable: the snapshot's keys get a perfect table (no map fallback),
// and each key written under an index reads back as that index.
func TestKeyTable(t *testing.T) {
	require.True(t, keyTable.Perfect())
	for i, k := range keyNames {
		if k != "" {
			require.Equal(t, i, keyIndex(k), k)
		}
	}
	require.Equal(t, kFinishReasons, keyIndex(srcFinishReasons))
	require.Equal(t, -1, keyIndex("gen_ai.request.top_p"))
}
