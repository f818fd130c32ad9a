// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/cuptiwire"
)

const clockWarning = "cupti clock offset is uncertain; kernel times may be off by this much"

// A clock offset the library could only pin down to more than maxClockError
// is one warning per connection, with the error, however often it repeats;
// an offset within the bound is none.
func TestUncertainClockWarnsOncePerConnection(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.CollectionInterval = time.Hour })
	over := uint64(maxClockError) * 5

	// A stats frame after the clock frames proves the connection handled them.
	send := func(pid uint32, errs []uint64, poolExhausted uint64) {
		c := dial(t, h.cfg.Endpoint)
		b := cuptiwire.AppendHello(nil, pid, 1, "gpu-1")
		for i, e := range errs {
			b = cuptiwire.AppendClock(b, cuptiwire.Clock{OffsetNS: -1_000_000 + int64(i), ErrorNS: e, SampledUnixNS: 1_700_000_000_000_000_000 + uint64(i)})
		}
		b = cuptiwire.AppendStats(b, cuptiwire.Stats{PoolExhausted: poolExhausted})
		_, err := c.Write(b)
		require.NoError(t, err)
	}
	warnings := func() int { return h.logs.FilterMessage(clockWarning).Len() }

	// Within the bound, including exactly at it: no warning.
	send(10, []uint64{1000, uint64(maxClockError)}, 1)
	require.Eventually(t, func() bool { return h.counter(t, "receiver_cupti_pool_exhausted") == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Zero(t, warnings())

	// Above it, three times on one connection: one warning.
	send(11, []uint64{1000, over, over + 1, 2000, over * 2}, 1)
	require.Eventually(t, func() bool { return h.counter(t, "receiver_cupti_pool_exhausted") == 2 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, 1, warnings())
	entry := h.logs.FilterMessage(clockWarning).All()[0]
	fields := entry.ContextMap()
	require.Equal(t, time.Duration(over), fields["error"])
	require.EqualValues(t, 11, fields["pid"])

	// Another engine's connection warns for itself.
	send(12, []uint64{over}, 1)
	require.Eventually(t, func() bool { return h.counter(t, "receiver_cupti_pool_exhausted") == 3 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, 2, warnings())
}
