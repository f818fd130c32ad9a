// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package confdur

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
)

func TestMin(t *testing.T) {
	require.NoError(t, Min("k", 0, time.Second), "zero is left to the caller")
	require.NoError(t, Min("k", time.Second, time.Second))
	require.EqualError(t, Min("metrics_flush_interval", 15, 100*time.Millisecond),
		"metrics_flush_interval: 15ns is below the minimum of 100ms; did you forget a unit, e.g. 15s?")
	require.EqualError(t, Min("k", 50*time.Millisecond, 100*time.Millisecond), "k: 50ms is below the minimum of 100ms")
}

type cfg struct {
	Interval time.Duration `mapstructure:"interval"`
	Nested   struct {
		Wait time.Duration `mapstructure:"wait"`
	} `mapstructure:"nested"`
	APIKey string `mapstructure:"api_key"`
}

func TestUnmarshalNamesTheValue(t *testing.T) {
	var c cfg
	err := Unmarshal(confmap.NewFromStringMap(map[string]any{
		"interval": "abc", "nested": map[string]any{"wait": true}, "api_key": "secret",
	}), &c)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `interval: "abc" is not a duration`)
	assert.Contains(t, err.Error(), `nested.wait: true is not a duration`)
	assert.NotContains(t, err.Error(), "secret")

	// A quoted number ("15", as an environment variable can give) is a
	// string without a unit, not nanoseconds.
	err = Unmarshal(confmap.NewFromStringMap(map[string]any{"interval": "15"}), &c)
	assert.ErrorContains(t, err, `interval: "15" is not a duration; write a number with a unit`)

	require.NoError(t, Unmarshal(confmap.NewFromStringMap(map[string]any{"interval": "2s"}), &c))
	assert.Equal(t, 2*time.Second, c.Interval)
}
