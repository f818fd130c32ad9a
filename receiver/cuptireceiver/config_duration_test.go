// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/confmap"
)

// TestDurationDecodeErrorNamesValue: a value that does not decode as a
// duration is named, with its key, in the collector's error
// (internal/confdur), as the collector decodes the component's section.
func TestDurationDecodeErrorNamesValue(t *testing.T) {
	for _, tt := range []struct {
		raw  map[string]any
		want string
	}{
		{map[string]any{"collection_interval": "ten"}, `collection_interval: "ten" is not a duration; write a number with a unit`},
		{map[string]any{"idle_timeout": []any{"1m"}}, `idle_timeout: []interface {}{"1m"} is not a duration`},
	} {
		err := confmap.NewFromStringMap(tt.raw).Unmarshal(createDefaultConfig())
		assert.ErrorContains(t, err, tt.want)
	}
}
