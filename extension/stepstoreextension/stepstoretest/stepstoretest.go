// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package stepstoretest gives tests a host with a real step_store
// extension, so components under test reference the store as a collector
// would.
package stepstoretest // import "github.com/inferprof/inferprof/extension/stepstoreextension/stepstoretest"

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/inferprof/inferprof/extension/stepstoreextension"
	"github.com/inferprof/inferprof/internal/gpuwindow"
	"github.com/inferprof/inferprof/internal/stepstore"
)

// ID is the id the host gives its store.
var ID = component.MustNewID("step_store")

// Host is a component.Host with extensions.
type Host map[component.ID]component.Component

// GetExtensions returns the host's extensions.
func (h Host) GetExtensions() map[component.ID]component.Component { return h }

// NewHost starts a step_store extension with its default config, shut down
// at the end of the test, and returns a host that holds it as ID, and its
// window.
func NewHost(tb testing.TB) (Host, *gpuwindow.Window) {
	tb.Helper()
	f := stepstoreextension.NewFactory()
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), f.CreateDefaultConfig())
	require.NoError(tb, err)
	require.NoError(tb, ext.Start(context.Background(), Host{}))
	tb.Cleanup(func() { require.NoError(tb, ext.Shutdown(context.Background())) })
	return Host{ID: ext}, ext.(stepstore.Provider).Window()
}

// Ref returns a reference to ID, for a config's step_store key.
func Ref() *component.ID {
	id := ID
	return &id
}
