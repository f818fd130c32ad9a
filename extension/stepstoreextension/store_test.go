// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepstoreextension

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/inferprof/inferprof/internal/gpuwindow"
	"github.com/inferprof/inferprof/internal/stepstore"
)

// Each extension instance is its own store: two collectors in one process
// (or two step_store/<name> blocks in one config) never share a window.
func TestInstancesAreSeparate(t *testing.T) {
	f := NewFactory()
	set := extensiontest.NewNopSettings(f.Type())
	a, err := f.Create(context.Background(), set, f.CreateDefaultConfig())
	require.NoError(t, err)
	b, err := f.Create(context.Background(), set, f.CreateDefaultConfig())
	require.NoError(t, err)
	require.NoError(t, a.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, b.Start(context.Background(), componenttest.NewNopHost()))
	wa, wb := a.(stepstore.Provider).Window(), b.(stepstore.Provider).Window()
	require.NotSame(t, wa, wb)
	require.Same(t, wa, a.(stepstore.Provider).Window())

	src := wa.OpenSource(gpuwindow.SourceInfo{Host: "h", PID: 7}, nil)
	defer src.Close()
	require.Equal(t, 1, wa.Stats().Sources)
	require.Equal(t, 0, wb.Stats().Sources)
	require.NoError(t, a.Shutdown(context.Background()))
	require.NoError(t, b.Shutdown(context.Background()))
}

// The configured bounds reach the window.
func TestConfigReachesWindow(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.MaxSources = 1
	s := newStore(cfg)
	a := s.Window().OpenSource(gpuwindow.SourceInfo{Host: "h", PID: 1}, nil)
	defer a.Close()
	b := s.Window().OpenSource(gpuwindow.SourceInfo{Host: "h", PID: 2}, nil)
	defer b.Close()
	require.Equal(t, uint64(1), s.Window().Stats().SourcesRefused)
}
