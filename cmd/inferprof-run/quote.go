// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import "strings"

// shellJoin joins args into one POSIX shell command line that runs them as
// given: -dry-run prints what can be pasted back into a shell.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = shellQuote(a)
	}
	return strings.Join(out, " ")
}

// shellQuote leaves a word of safe characters as it is and single-quotes
// anything else, a single quote written as '\”.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./:=,@%+", c)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
