// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// writetrace writes a large Kineto trace for `make bench-kineto`: the real
// NCCL trace in testdata repeated -copies times, gzipped, so the Go
// benchmarks and Python's json.load read the same file.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto/kinetotest"
)

func main() {
	fixture := flag.String("fixture", filepath.Join("receiver", "cuptireceiver", "testdata", "kineto", kinetotest.Fixture), "real trace to repeat")
	copies := flag.Int("copies", 10, "how many times")
	out := flag.String("o", "", "output .json.gz")
	flag.Parse()
	if err := run(*fixture, *copies, *out); err != nil {
		fmt.Fprintln(os.Stderr, "writetrace:", err)
		os.Exit(1)
	}
}

func run(fixture string, copies int, out string) error {
	if out == "" {
		return fmt.Errorf("-o is required")
	}
	tr, err := kinetotest.Load(fixture)
	if err != nil {
		return err
	}
	gz, err := tr.Gzip(copies)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, gz, 0o600); err != nil {
		return err
	}
	fmt.Printf("wrote %s: %d events, %d bytes gzipped\n", out, tr.Events()*copies, len(gz))
	return nil
}
