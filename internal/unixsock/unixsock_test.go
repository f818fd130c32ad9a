// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package unixsock

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func shortDir(t *testing.T) string {
	t.Helper()
	// Socket paths are limited to 107 bytes; t.TempDir can be longer.
	dir, err := os.MkdirTemp("", "us")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func TestPrepareCreatesPrivateFolder(t *testing.T) {
	path := filepath.Join(shortDir(t), "new", "s.sock")
	require.NoError(t, Prepare(path, "unix"))
	fi, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
}

func TestPrepareRemovesStaleSocket(t *testing.T) {
	for _, network := range []string{"unix", "unixgram"} {
		t.Run(network, func(t *testing.T) {
			path := filepath.Join(shortDir(t), "s.sock")
			var closer interface{ Close() error }
			if network == "unix" {
				l, err := net.Listen(network, path)
				require.NoError(t, err)
				l.(*net.UnixListener).SetUnlinkOnClose(false)
				closer = l
			} else {
				c, err := net.ListenUnixgram(network, &net.UnixAddr{Name: path, Net: network})
				require.NoError(t, err)
				closer = c
			}
			// Live: refused.
			require.ErrorContains(t, Prepare(path, network), "another process is serving it")
			// Dead, file left behind: removed.
			require.NoError(t, closer.Close())
			_, err := os.Lstat(path)
			require.NoError(t, err, "the test needs a stale socket file")
			require.NoError(t, Prepare(path, network))
			_, err = os.Lstat(path)
			assert.True(t, os.IsNotExist(err))
		})
	}
}

func TestPrepareRefusesNonSocket(t *testing.T) {
	path := filepath.Join(shortDir(t), "file")
	require.NoError(t, os.WriteFile(path, []byte("x"), 0o600))
	require.ErrorContains(t, Prepare(path, "unix"), "is not a socket")
	_, err := os.Stat(path)
	assert.NoError(t, err, "a file that is not a socket is never removed")
}

func TestRestrict(t *testing.T) {
	path := filepath.Join(shortDir(t), "s.sock")
	l, err := net.Listen("unix", path)
	require.NoError(t, err)
	defer l.Close()
	require.NoError(t, Restrict(path))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

func TestPrepareRefusesOpenFolder(t *testing.T) {
	dir := shortDir(t)
	require.NoError(t, os.Chmod(dir, 0o755))
	path := filepath.Join(dir, "s.sock")
	err := Prepare(path, "unix")
	require.ErrorContains(t, err, "has mode 0755; it must be 0700")
	require.ErrorContains(t, err, "chmod 700 "+dir)

	// Once fixed as the message says, the same path is accepted.
	require.NoError(t, os.Chmod(dir, 0o700))
	require.NoError(t, Prepare(path, "unix"))
}

func TestPrepareRefusesFolderOfAnotherUser(t *testing.T) {
	dir := shortDir(t)
	// The folder is ours; checked as if this process ran as another user,
	// it is someone else's.
	other := os.Getuid() + 1
	err := checkFolder(dir, other)
	require.ErrorContains(t, err, "not to this collector's user")
	require.ErrorContains(t, err, "remove it")
	require.NoError(t, checkFolder(dir, os.Getuid()))
}

func TestPrepareRefusesFolderThatIsAFile(t *testing.T) {
	f := filepath.Join(shortDir(t), "f")
	require.NoError(t, os.WriteFile(f, nil, 0o600))
	require.ErrorContains(t, Prepare(filepath.Join(f, "s.sock"), "unix"), "is not a directory")
}

func TestPrepareRefusesSymlinkedFolder(t *testing.T) {
	// The link's target is a folder of our own and owner-only, which
	// os.Stat would have passed; the link itself can be repointed by
	// whoever planted it.
	base := shortDir(t)
	target := filepath.Join(base, "real")
	require.NoError(t, os.Mkdir(target, 0o700))
	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(target, link))
	err := Prepare(filepath.Join(link, "s.sock"), "unix")
	require.ErrorContains(t, err, "is a symbolic link")

	// A dangling link is not created through either.
	dangling := filepath.Join(base, "dangling")
	require.NoError(t, os.Symlink(filepath.Join(base, "later"), dangling))
	require.Error(t, Prepare(filepath.Join(dangling, "s.sock"), "unix"))
	_, err = os.Lstat(filepath.Join(base, "later"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
