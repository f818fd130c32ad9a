// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:build race

package kineto

// raceEnabled shrinks the memory test's input under the race detector,
// which reads about ten times slower.
const raceEnabled = true
