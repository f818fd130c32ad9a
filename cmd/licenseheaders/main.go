// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Command licenseheaders checks, and with -fix adds, the licence header every
// source and config file of inferprof starts with (CONTRIBUTING.md, "Licence
// headers"):
//
//	// Copyright The inferprof Authors
//	// SPDX-License-Identifier: Apache-2.0
//
// in Go, C and protobuf files, and the same two lines with "#" in Python,
// shell, YAML and make files. A shebang line stays first.
//
//	licenseheaders [-fix] [FILE...]
//
// Without FILE it checks every file git tracks or would track (git ls-files
// --cached --others --exclude-standard). Exempt: anything under a testdata/
// folder (fixtures and fuzz corpora are kept byte for byte, some are
// third-party) and generated code (a "Code generated ... DO NOT EDIT." line,
// as mdatagen, ocb and protoc-gen-go write), which is rewritten on every
// generate.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

const (
	copyrightLine = "Copyright The inferprof Authors"
	spdxLine      = "SPDX-License-Identifier: Apache-2.0"
)

// style is the comment marker a file's header uses; "" means the file is
// not covered.
type style string

const (
	none  style = ""
	slash style = "//"
	hash  style = "#"
)

func (s style) header() string {
	return string(s) + " " + copyrightLine + "\n" + string(s) + " " + spdxLine + "\n"
}

// generated matches the marker the Go toolchain defines for generated files
// (https://go.dev/s/generatedcode), in any comment syntax.
var generated = regexp.MustCompile(`(?m)^(//|#) Code generated .* DO NOT EDIT\.$`)

func main() {
	fix := flag.Bool("fix", false, "add the header to files that lack it")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: licenseheaders [-fix] [FILE...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	files := flag.Args()
	if len(files) == 0 {
		var err error
		if files, err = repoFiles(); err != nil {
			fmt.Fprintln(os.Stderr, "licenseheaders:", err)
			os.Exit(2)
		}
	}
	missing, err := run(files, *fix, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "licenseheaders:", err)
		os.Exit(2)
	}
	if missing > 0 && !*fix {
		fmt.Fprintf(os.Stderr, "licenseheaders: %d file(s) lack the licence header; run `make license-headers` to add it\n", missing)
		os.Exit(1)
	}
}

// repoFiles lists the files git tracks plus untracked ones it does not
// ignore, so a new file is checked before it is committed. Outside a git
// checkout (a source archive) it walks the tree instead.
func repoFiles() ([]string, error) {
	out, err := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "-z").Output()
	if err != nil {
		fmt.Fprintf(os.Stderr, "licenseheaders: git ls-files failed (%v); walking the tree\n", err)
		return walkFiles(".")
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files, nil
}

// skipDirs are build outputs and tool caches, never sources.
var skipDirs = map[string]bool{".git": true, "bin": true, ".tools": true, ".bench": true, "build": true, "__pycache__": true, "node_modules": true}

func walkFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			files = append(files, path)
		}
		return nil
	})
	return files, err
}

// run checks (or fixes) files and returns how many lacked the header.
// Each file lacking it is printed to out.
func run(files []string, fix bool, out io.Writer) (int, error) {
	missing := 0
	for _, f := range files {
		if exempt(f) {
			continue
		}
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the work tree but still in the index
		}
		if err != nil {
			return missing, err
		}
		s := styleOf(f, b)
		if s == none || isGenerated(b) || hasHeader(b, s) {
			continue
		}
		missing++
		if !fix {
			fmt.Fprintln(out, f)
			continue
		}
		info, err := os.Stat(f)
		if err != nil {
			return missing, err
		}
		if err := os.WriteFile(f, addHeader(b, s), info.Mode().Perm()); err != nil {
			return missing, err
		}
		fmt.Fprintln(out, "added header:", f)
	}
	return missing, nil
}

// exempt reports paths the policy leaves alone whatever their type.
func exempt(path string) bool {
	for _, part := range strings.Split(filepath.ToSlash(path), "/") {
		if part == "testdata" {
			return true
		}
	}
	return false
}

// styleOf picks the header's comment style from the file name, or from a
// shebang line for scripts without an extension.
func styleOf(path string, b []byte) style {
	base := filepath.Base(path)
	switch strings.ToLower(filepath.Ext(base)) {
	case ".go", ".c", ".h", ".cc", ".cpp", ".proto":
		return slash
	case ".py", ".sh", ".bash", ".yaml", ".yml", ".mk", ".toml":
		return hash
	}
	if base == "Makefile" || base == "Dockerfile" || bytes.HasPrefix(b, []byte("#!")) {
		return hash
	}
	return none
}

func isGenerated(b []byte) bool {
	if len(b) > 4096 {
		b = b[:4096]
	}
	return generated.Match(b)
}

// preamble returns how many bytes at the start of b must stay before the
// header: a shebang line, and in Python a coding declaration after it.
func preamble(b []byte) int {
	n := 0
	for _, prefix := range []string{"#!", "# -*- coding"} {
		if bytes.HasPrefix(b[n:], []byte(prefix)) {
			if i := bytes.IndexByte(b[n:], '\n'); i >= 0 {
				n += i + 1
			} else {
				n = len(b)
			}
		}
	}
	return n
}

// hasHeader reports whether the header's two lines open the file, after
// its preamble.
func hasHeader(b []byte, s style) bool {
	return bytes.HasPrefix(b[preamble(b):], []byte(s.header()))
}

// addHeader inserts the header after the preamble, followed by a blank
// line so that in Go it never merges into the package doc comment.
func addHeader(b []byte, s style) []byte {
	p := preamble(b)
	var out bytes.Buffer
	out.Write(b[:p])
	if p > 0 && b[p-1] != '\n' {
		out.WriteByte('\n')
	}
	out.WriteString(s.header())
	rest := b[p:]
	if len(bytes.TrimSpace(rest)) == 0 {
		return out.Bytes()
	}
	if !bytes.HasPrefix(rest, []byte("\n")) {
		out.WriteByte('\n')
	}
	out.Write(rest)
	return out.Bytes()
}
