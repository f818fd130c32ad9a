// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package soak

import (
	"github.com/inferprof/inferprof/internal/e2etest"
	"runtime"
	"sort"
)

func numCPU() int { return runtime.NumCPU() }

func filepathRepoRoot() string { return e2etest.RepoRoot() }

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
