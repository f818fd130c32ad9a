// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepstoreextension // import "github.com/inferprof/inferprof/extension/stepstoreextension"

import (
	"context"

	"go.opentelemetry.io/collector/component"

	"github.com/inferprof/inferprof/internal/gpuwindow"
	"github.com/inferprof/inferprof/internal/stepstore"
)

// store is one collector's correlation window. The collector starts
// extensions before the components that look it up and stops them after,
// so the window outlives every user; it holds no goroutine of its own.
type store struct{ win *gpuwindow.Window }

var _ stepstore.Provider = (*store)(nil)

func newStore(cfg *Config) *store { return &store{win: gpuwindow.New(cfg.window())} }

func (*store) Start(context.Context, component.Host) error { return nil }

func (*store) Shutdown(context.Context) error { return nil }

// Window returns the store's window.
func (s *store) Window() *gpuwindow.Window { return s.win }
