// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptireceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/inferprof/inferprof/internal/sharedcomponent"
	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/metadata"
)

// unwrap is the receiver behind the factory's shared-instance handle.
func unwrap(r component.Component) *cuptiReceiver {
	return r.(*sharedcomponent.Component[*cuptiReceiver]).Unwrap()
}

// Two configs get two receivers; one config's metrics and traces share
// one, which is forgotten when both are shut down.
func TestFactorySharesOneReceiverPerConfig(t *testing.T) {
	f := NewFactory()
	set := receivertest.NewNopSettings(metadata.Type)
	a, b := createDefaultConfig().(*Config), createDefaultConfig().(*Config)
	a.Endpoint, b.Endpoint = "", ""
	a.Kineto.Directory, b.Kineto.Directory = t.TempDir(), t.TempDir()
	before := receivers.Len()

	am, err := f.CreateMetrics(t.Context(), set, a, consumertest.NewNop())
	require.NoError(t, err)
	at, err := f.CreateTraces(t.Context(), set, a, consumertest.NewNop())
	require.NoError(t, err)
	bm, err := f.CreateMetrics(t.Context(), set, b, consumertest.NewNop())
	require.NoError(t, err)
	assert.Same(t, unwrap(am), unwrap(at))
	assert.NotSame(t, unwrap(am), unwrap(bm))
	assert.Equal(t, before+2, receivers.Len())

	host := componenttest.NewNopHost()
	require.NoError(t, am.Start(t.Context(), host))
	require.NoError(t, at.Start(t.Context(), host))
	require.NoError(t, am.Shutdown(t.Context()))
	assert.Equal(t, before+2, receivers.Len(), "the traces pipeline still holds it")
	require.NoError(t, at.Shutdown(t.Context()))
	require.NoError(t, bm.Shutdown(t.Context()))
	assert.Equal(t, before, receivers.Len())
}
