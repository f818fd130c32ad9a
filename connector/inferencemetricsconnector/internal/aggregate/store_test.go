// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/inferprof/inferprof/internal/names"
)

func ts(sec int) pcommon.Timestamp { return pcommon.Timestamp(uint64(sec) * uint64(time.Second)) }

// add records one request under resource r with model m.
func add(st *Store, now pcommon.Timestamp, r byte, m string) (*Series, bool) {
	st.BeginKey(ResourceKey{r}, KindRequest)
	st.AddKeyPart(m)
	s := st.Lookup()
	fresh := false
	if s == nil {
		res := pcommon.NewMap()
		res.PutInt("r", int64(r))
		s, fresh = st.Create(now, ResourceKey{r}, res, KindRequest)
		if fresh {
			s.Attributes().PutStr(names.AttrRequestModel, m)
		}
	}
	s.Req.Requests++
	s.Req.Duration.Observe(1)
	s.Touch(now)
	return s, fresh
}

func TestKeysAreLengthPrefixed(t *testing.T) {
	st := NewStore(Settings{Limit: 10}, ts(0))
	st.BeginKey(ResourceKey{}, KindRequest)
	st.AddKeyPart("ab")
	st.AddKeyPart("c")
	k1 := string(st.key)
	st.BeginKey(ResourceKey{}, KindRequest)
	st.AddKeyPart("a")
	st.AddKeyPart("bc")
	assert.NotEqual(t, k1, string(st.key))
}

func TestLimitAndOverflow(t *testing.T) {
	st := NewStore(Settings{Limit: 2}, ts(0))
	_, fresh := add(st, ts(1), 1, "a")
	assert.True(t, fresh)
	_, fresh = add(st, ts(1), 2, "b")
	assert.True(t, fresh)
	over, fresh := add(st, ts(1), 3, "c")
	assert.False(t, fresh)
	again, _ := add(st, ts(1), 1, "d")
	assert.Same(t, over, again, "one overflow series for everything past the limit")
	assert.Equal(t, 3, st.Len())
	assert.Len(t, st.resources, 2, "resources past the limit are not kept")
	assert.Equal(t, uint64(2), over.Req.Requests)
}

func TestDeltaSweepDropsIdleSeriesAndResources(t *testing.T) {
	st := NewStore(Settings{Limit: 10, Delta: true}, ts(0))
	add(st, ts(1), 1, "a")
	add(st, ts(1), 2, "b")
	md, _ := st.Flush(ts(10))
	require.Equal(t, 2, md.ResourceMetrics().Len())
	add(st, ts(11), 1, "a")
	md, _ = st.Flush(ts(20))
	require.Equal(t, 1, md.ResourceMetrics().Len(), "only the updated series is reported")
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0)
	assert.Equal(t, uint64(1), dp.Count(), "delta: one request since the last flush")
	assert.Equal(t, ts(10), dp.StartTimestamp())
	assert.Equal(t, 1, st.Len(), "series b idle for a whole interval is dropped")
	assert.Len(t, st.resources, 1)
	assert.Len(t, st.resList, 1)
}
