// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignalexporter

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
		{map[string]any{"timeout": "1 hour"}, `timeout: "1 hour" is not a duration; write a number with a unit`},
		{map[string]any{"retry_on_failure": map[string]any{"initial_interval": true}}, `retry_on_failure.initial_interval: true is not a duration`},
	} {
		err := confmap.NewFromStringMap(tt.raw).Unmarshal(createDefaultConfig())
		assert.ErrorContains(t, err, tt.want)
	}
}
