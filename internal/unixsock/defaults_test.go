// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package unixsock

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// source reads a file of the repository, relative to its root.
func source(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(path)))
	require.NoError(t, err)
	return string(b)
}

// matches returns every first group of re in s.
func matches(re, s string) []string {
	var out []string
	for _, m := range regexp.MustCompile(re).FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// The hook and the CUPTI library, which cannot import these constants,
// default to the same sockets and read the same variables.
func TestEngineSideDefaultsMatch(t *testing.T) {
	hook := source(t, "integrations/python/inferprof_hook/_state.py")
	assert.Equal(t, []string{DefaultStepEndpoint}, matches(`(?m)^DEFAULT_ENDPOINT = "([^"]*)"$`, hook))
	assert.Equal(t, []string{EnvStepEndpoint}, matches(`(?m)^ENV_ENDPOINT = "([^"]*)"$`, hook))

	lib := source(t, "native/cupti/cupti_inject.c")
	assert.Equal(t, []string{DefaultCUPTIEndpoint}, matches(`(?m)^#define INFERPROF_DEFAULT_ENDPOINT "([^"]*)"$`, lib))
	assert.Equal(t, []string{EnvCUPTIEndpoint}, matches(`getenv\("(INFERPROF_CUPTI_ENDPOINT)"\)`, lib))
	// No other copy of the path in the library: the define is the one.
	assert.Equal(t, 1, len(regexp.MustCompile(regexp.QuoteMeta(`"`+DefaultCUPTIEndpoint+`"`)).FindAllString(lib, -1)))
}
