// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepfiguresprocessor

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// Held spans the next consumer refuses are lost: the first refusal is
// logged at once, the next within warnEvery are held back, and the line
// after that says how many were.
func TestRefusedReleaseIsLoggedOncePerInterval(t *testing.T) {
	refuse := func(consumer.Traces) consumer.Traces { return consumertest.NewErr(errors.New("refused")) }
	g := startGPU(t, "gpu-test-refused", true, refuse)
	core, logs := observer.New(zap.WarnLevel)
	g.p.logger = zap.New(core)
	cycle := func(i int64) {
		g.consume(t, g.steps(stepSpec{i, 0, 10, map[string]int64{"a": 1}}))
		g.consume(t, vllmSpan("vllm", "a", 0, 0.011, 1))
		g.tick(t, 6*time.Second) // past gpu.wait: released, and refused
	}
	cycle(1)
	cycle(2)
	require.Equal(t, 1, logs.Len(), "the second refusal, 6 s later, is held back")
	g.tick(t, warnEvery)
	cycle(3)
	require.Equal(t, 2, logs.Len())
	last := logs.All()[1].ContextMap()
	assert.EqualValues(t, 1, last["similar_suppressed"])
	assert.EqualValues(t, 2, last["spans"], "the step and its request")
}
