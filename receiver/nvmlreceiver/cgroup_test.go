// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlreceiver

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const cid = "3f4b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b"

func TestContainerIDFromCgroup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
		err            bool
	}{
		{"v2 containerd on kubernetes", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-" + cid + ".scope\n", cid, false},
		{"v2 docker", "0::/system.slice/docker-" + cid + ".scope\n", cid, false},
		{"v2 cri-o", "0::/kubepods.slice/crio-" + cid + ".scope", cid, false},
		{"v2 podman", "0::/user.slice/libpod-" + cid + ".scope\n", cid, false},
		{"v1 docker", "12:memory:/docker/" + cid + "\n11:cpu:/docker/" + cid + "\n", cid, false},
		{"v1 kubepods", "4:devices:/kubepods/besteffort/pod0d5e/" + cid + "\n", cid, false},
		{"v2 nested scope in container", "0::/system.slice/docker-" + cid + ".scope/init\n", cid, false},
		{"host process", "0::/user.slice/user-1000.slice/session-3.scope\n", "", false},
		{"root cgroup", "0::/\n", "", false},
		{"uppercase is not an id", "0::/docker/" + "3F4B2C1D0E9F8A7B6C5D4E3F2A1B0C9D8E7F6A5B4C3D2E1F0A9B8C7D6E5F4A3B\n", "", false},
		{"empty file", "", "", true},
		{"garbage", "not a cgroup file", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := containerIDFromCgroup([]byte(tc.in))
			if tc.err {
				require.ErrorIs(t, err, errNoCgroupLine)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestReadContainerID(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "77"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "77", "cgroup"), []byte("0::/docker/"+cid+"\n"), 0o600))
	got, err := readContainerID(root, 77)
	require.NoError(t, err)
	assert.Equal(t, cid, got)
	got, err = readContainerID(root, 78) // gone, or in a PID namespace we cannot see
	require.NoError(t, err)
	assert.Empty(t, got)
}

func FuzzContainerIDFromCgroup(f *testing.F) {
	f.Add([]byte("0::/system.slice/docker-" + cid + ".scope\n"))
	f.Add([]byte("12:memory:/docker/" + cid + "\n"))
	f.Add([]byte("0::/\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		id, err := containerIDFromCgroup(data)
		if err != nil {
			require.Empty(t, id)
			return
		}
		if id != "" {
			require.Len(t, id, 64)
			require.Equal(t, id, idFromSegment([]byte(id)))
		}
	})
}
