// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepstore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"

	"github.com/inferprof/inferprof/internal/gpuwindow"
)

type host map[component.ID]component.Component

func (h host) GetExtensions() map[component.ID]component.Component { return h }

type nopComp struct{}

func (nopComp) Start(context.Context, component.Host) error { return nil }
func (nopComp) Shutdown(context.Context) error              { return nil }

type provider struct {
	nopComp
	w *gpuwindow.Window
}

func (p provider) Window() *gpuwindow.Window { return p.w }

func TestLookup(t *testing.T) {
	storeID := component.MustNewID("step_store")
	otherID := component.MustNewID("file_storage")
	missingID := component.MustNewIDWithName("step_store", "b")
	w := gpuwindow.New(gpuwindow.NewDefaultConfig())
	h := host{storeID: provider{w: w}, otherID: nopComp{}}

	got, err := Lookup(h, &storeID, "step_store")
	require.NoError(t, err)
	require.Same(t, w, got)

	got, err = Lookup(h, nil, "step_store")
	require.NoError(t, err)
	require.Nil(t, got)

	_, err = Lookup(h, &missingID, "gpu.step_store")
	require.EqualError(t, err, `gpu.step_store: extension "step_store/b" not found; add it under extensions and service.extensions`)

	_, err = Lookup(h, &otherID, "step_store")
	require.EqualError(t, err, `step_store: extension "file_storage" is not a step_store extension`)
}
