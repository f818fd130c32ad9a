// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package tracetable

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

var t0 = time.Unix(1767225600, 0)

func tid(i byte) pcommon.TraceID { return pcommon.TraceID{15: i} }

func TestExpireByList(t *testing.T) {
	tab := New[string](10, time.Second, time.Minute)
	tab.Add(tid(1), 0, 1, "short", t0)
	tab.Add(tid(2), 1, 1, "long", t0)
	var got []string
	tab.Expire(t0.Add(2*time.Second), func(e *Entry[string]) { got = append(got, e.Value) })
	assert.Equal(t, []string{"short"}, got)
	assert.Equal(t, 1, tab.Len())
	assert.Nil(t, tab.Get(tid(1)))
	tab.Expire(t0.Add(time.Minute), func(e *Entry[string]) { got = append(got, e.Value) })
	assert.Equal(t, []string{"short", "long"}, got)
	assert.Zero(t, tab.Len())
}

func TestMoveResetsDeadline(t *testing.T) {
	tab := New[int](10, time.Second, time.Minute)
	e := tab.Add(tid(1), 1, 1, 0, t0)
	tab.Move(e, 0, t0.Add(30*time.Second))
	assert.Equal(t, t0.Add(31*time.Second), e.Deadline())
	assert.Equal(t, 0, e.List())
	n := 0
	tab.Expire(t0.Add(30*time.Second), func(*Entry[int]) { n++ })
	assert.Zero(t, n, "not due yet")
	tab.Expire(t0.Add(31*time.Second), func(*Entry[int]) { n++ })
	assert.Equal(t, 1, n)
}

func TestMakeRoomOrderAndKeep(t *testing.T) {
	tab := New[int](4, time.Minute, time.Minute)
	keep := tab.Add(tid(1), 1, 2, 1, t0) // oldest of list 1, but kept
	tab.Add(tid(2), 1, 1, 2, t0)
	tab.Add(tid(3), 0, 1, 3, t0)
	var gone []int
	n := tab.MakeRoom(2, keep, []int{0, 1}, func(e *Entry[int]) { gone = append(gone, e.Value) })
	assert.Equal(t, 2, n)
	assert.Equal(t, []int{3, 2}, gone, "list 0 first, then list 1 past the kept entry")
	assert.NotNil(t, tab.Get(tid(1)))
	tab.Reweigh(keep, 4)
	assert.Equal(t, 4, tab.Len())
	n = tab.MakeRoom(1, keep, []int{0, 1}, func(e *Entry[int]) { gone = append(gone, e.Value) })
	assert.Equal(t, 1, n, "the kept entry goes last of all")
	assert.Zero(t, tab.Len())
}

func TestDrain(t *testing.T) {
	tab := New[int](10, time.Second, time.Minute)
	tab.Add(tid(1), 0, 3, 1, t0)
	tab.Add(tid(2), 1, 2, 2, t0)
	var got []int
	tab.Drain(func(e *Entry[int]) { got = append(got, e.Value) })
	assert.ElementsMatch(t, []int{1, 2}, got)
	assert.Zero(t, tab.Len())
	assert.Zero(t, tab.Entries())
}
