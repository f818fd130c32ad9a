// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// TestRenamedGraphsignalKeyIsRefused: local_endpoint (the key that became
// local.endpoint) on the graphsignal exporter used to start and be ignored,
// because the squashed confighttp client turns confmap's unknown-key check
// off. The shipped config plus that one key must now stop startup, naming it.
func TestRenamedGraphsignalKeyIsRefused(t *testing.T) {
	ports := e2etest.NewPorts(t)
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.yaml")
	require.NoError(t, os.WriteFile(typo, []byte("exporters:\n  graphsignal:\n    local_endpoint: 127.0.0.1:18259\n"), 0o600))
	c := e2etest.Launch(t, e2etest.Options{
		ConfigFiles: []string{shippedConfig("default.yaml"), typo},
		Env:         defaultEnv(t, ports, dir),
	})
	assert.NotEqual(t, 0, c.Wait(2*time.Minute), "the collector started with graphsignal.local_endpoint")
	assert.Contains(t, c.Output(), "'graphsignalexporter.Config' has invalid keys: local_endpoint")
}
