// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build race

package inferencemetricsconnector

// raceEnabled tells whether the race detector is on: it makes sync.Pool
// drop some of what is put back, so pooled helpers allocate.
const raceEnabled = true
