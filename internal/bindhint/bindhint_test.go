// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package bindhint

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/unixsock"
)

func TestWrapNamesTheVariable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	_, err = net.Listen("tcp", ln.Addr().String())
	require.Error(t, err)
	got := Wrap(err, "local.endpoint", "INFERPROF_GRAPHSIGNAL_LOCAL_ENDPOINT")
	assert.ErrorContains(t, got, ln.Addr().String())
	assert.ErrorContains(t, got, "move local.endpoint (INFERPROF_GRAPHSIGNAL_LOCAL_ENDPOINT in the shipped configs")
	assert.ErrorIs(t, got, err)

	dir := filepath.Join(t.TempDir(), "sock")
	require.NoError(t, os.Mkdir(dir, 0o700))
	path := filepath.Join(dir, "s.sock")
	uln, err := net.Listen("unix", path)
	require.NoError(t, err)
	defer uln.Close()
	err = unixsock.Prepare(path, "unix")
	require.ErrorIs(t, err, unixsock.ErrInUse)
	assert.ErrorContains(t, Wrap(err, "endpoint", "INFERPROF_CUPTI_ENDPOINT"), "move endpoint (INFERPROF_CUPTI_ENDPOINT")

	other := errors.New("permission denied")
	assert.Equal(t, other, Wrap(other, "endpoint", "X"))
	assert.NoError(t, Wrap(nil, "endpoint", "X"))
}
