// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlreceiver // import "github.com/inferprof/inferprof/receiver/nvmlreceiver"

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
)

// errNoCgroupLine means a cgroup file had no "hierarchy:controllers:path" line.
var errNoCgroupLine = errors.New("no cgroup line")

// containerIDFromCgroup returns the container id named in a /proc/<pid>/cgroup file, or "" when the
// process is not in a container. It understands cgroup v1 (".../docker/<id>", ".../kubepods/.../<id>")
// and v2 systemd scopes ("docker-<id>.scope", "cri-containerd-<id>.scope", "crio-<id>.scope",
// "libpod-<id>.scope"). An id is 64 lowercase hex digits, as Docker, containerd and CRI-O write it.
func containerIDFromCgroup(data []byte) (string, error) {
	sawLine := false
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		// hierarchy-ID:controller-list:cgroup-path
		_, rest, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		_, path, ok := bytes.Cut(rest, []byte{':'})
		if !ok {
			continue
		}
		sawLine = true
		// Walk the path from its end: the innermost cgroup names the container.
		for len(path) > 0 {
			i := bytes.LastIndexByte(path, '/')
			seg := path[i+1:]
			if i < 0 {
				path = nil
			} else {
				path = path[:i]
			}
			if id := idFromSegment(seg); id != "" {
				return id, nil
			}
		}
	}
	if !sawLine {
		return "", errNoCgroupLine
	}
	return "", nil
}

var scopePrefixes = [][]byte{
	[]byte("docker-"), []byte("cri-containerd-"), []byte("crio-"), []byte("libpod-"), []byte("containerd-"),
}

func idFromSegment(seg []byte) string {
	seg = bytes.TrimSuffix(seg, []byte(".scope"))
	for _, p := range scopePrefixes {
		if bytes.HasPrefix(seg, p) {
			seg = seg[len(p):]
			break
		}
	}
	if len(seg) != 64 {
		return ""
	}
	for _, c := range seg {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return ""
		}
	}
	return string(seg)
}

// readContainerID reads <procRoot>/<pid>/cgroup. A missing file (the process ended, or lives in a
// PID namespace we cannot see) is not an error: it yields "".
func readContainerID(procRoot string, pid uint32) (string, error) {
	data, err := os.ReadFile(filepath.Join(procRoot, strconv.FormatUint(uint64(pid), 10), "cgroup"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
			return "", nil
		}
		return "", err
	}
	return containerIDFromCgroup(data)
}
