// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package encode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nameTable renders the name map for the README, both names side by side.
func nameTable() string {
	var b strings.Builder
	b.WriteString("| inferprof (`names: source`) | datapoints with | Graphsignal (`names: graphsignal`) | notes |\n")
	b.WriteString("|---|---|---|---|\n")
	for _, r := range graphsignalTable {
		var match []string
		for _, m := range r.Match {
			match = append(match, "`"+m.k+"="+m.v+"`")
		}
		target := "`" + r.Target + "`"
		switch r.Kind {
		case kindKeep:
			target = "— (kept)"
		case kindProfile:
			target += " profile"
		case kindSamples:
			target += " samples"
		case kindRate:
			target += " gauge"
		case kindBitmask:
			target += " gauge"
		}
		b.WriteString("| `" + r.Source + "` | " + strings.Join(match, ", ") + " | " + target + " | " + r.Note + " |\n")
	}
	return b.String()
}

// The README's table is the code's table.
func TestREADMEHasTheNameMap(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	want := nameTable()
	assert.Truef(t, strings.Contains(string(readme), want),
		"exporter/graphsignalexporter/README.md must carry the name map as the code has it:\n%s", want)
}
