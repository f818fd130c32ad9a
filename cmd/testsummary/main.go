// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Command testsummary gives `make test` its closing summary: what ran, what
// was skipped and why.
//
//	go test -json ./... | testsummary go DIR   # prints go test's usual output, records results in DIR/go.json
//	testsummary report DIR                      # prints the summary from DIR
//
// DIR also holds, written by the Makefile: python.log (unittest -v output),
// c.log (native/cupti's test output) and lint.log. A stage whose file is
// missing did not run.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: testsummary go DIR < go-test.json | testsummary report DIR")
		os.Exit(2)
	}
	dir := os.Args[2]
	switch os.Args[1] {
	case "go":
		ok, err := goMode(os.Stdin, os.Stdout, dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
		if !ok {
			os.Exit(1)
		}
	case "report":
		if err := report(dir, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
	default:
		fmt.Fprintf(os.Stderr, "testsummary: unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
}
