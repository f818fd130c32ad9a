// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package stepstore is how components reach the step store a config names:
// the step_store extension holds a collector's step-to-kernel correlation
// window, and the cupti receiver, the engine_step receiver and the
// processors that join GPU figures reference it by id, as `storage:`
// references file_storage. Two collectors in one process (tests) each get
// their own: nothing is shared unless the config says so.
package stepstore // import "github.com/inferprof/inferprof/internal/stepstore"

import (
	"fmt"

	"go.opentelemetry.io/collector/component"

	"github.com/inferprof/inferprof/internal/gpuwindow"
)

// Provider is what the step_store extension implements.
type Provider interface {
	component.Component
	// Window returns the extension's correlation window, the same one on
	// every call.
	Window() *gpuwindow.Window
}

// Lookup returns the window of the extension id names in host. key is the
// referencing YAML key, named in the error. A nil id returns nil: the
// component runs without GPU correlation.
func Lookup(host component.Host, id *component.ID, key string) (*gpuwindow.Window, error) {
	if id == nil {
		return nil, nil
	}
	ext, ok := host.GetExtensions()[*id]
	if !ok {
		return nil, fmt.Errorf("%s: extension %q not found; add it under extensions and service.extensions", key, id.String())
	}
	p, ok := ext.(Provider)
	if !ok {
		return nil, fmt.Errorf("%s: extension %q is not a step_store extension", key, id.String())
	}
	return p.Window(), nil
}
