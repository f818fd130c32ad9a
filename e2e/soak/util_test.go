// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package soak

import (
	"os"
	"runtime"
	"sort"
	"strings"
)

func numCPU() int { return runtime.NumCPU() }

// loadAverage is the machine's 1, 5 and 15 minute load average, for the
// report: the soak shares its cores with whatever else runs.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
