// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	ImportPath  string // build-output and build-fail
	FailedBuild string
}

// skip is one skipped test and the reason it gave.
type skip struct {
	Package string `json:"package"`
	Test    string `json:"test"`
	Reason  string `json:"reason"`
}

// goResult is what `testsummary go` records for the report.
type goResult struct {
	Packages int      `json:"packages"` // packages with tests that ran
	Passed   int      `json:"passed"`   // top-level tests
	Failed   []string `json:"failed"`   // package or package.Test
	Skipped  []skip   `json:"skipped"`  // at any level, subtests included
}

// fileLine is the "file_test.go:12: " prefix testing puts on t.Log lines.
var fileLine = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: `)

// goMode echoes go test's ordinary (non -v) output from its -json stream:
// package result lines, build errors, and the full output of failed tests
// only. It writes DIR/go.json and reports whether everything passed.
func goMode(in io.Reader, out io.Writer, dir string) (bool, error) {
	res := goResult{Failed: []string{}, Skipped: []skip{}}
	buf := map[string][]string{} // package + "\x00" + test -> output lines
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// Not JSON: go vet or the toolchain said something; pass it on.
			fmt.Fprintln(out, sc.Text())
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Action == "build-fail":
			res.Failed = append(res.Failed, e.ImportPath+" (build)")
		case e.Test == "" && e.Action == "output":
			if e.Output != "PASS\n" {
				fmt.Fprint(out, e.Output)
			}
		case e.Test == "" && e.Action == "pass":
			res.Packages++
		case e.Test == "" && e.Action == "skip":
			// a package with no test files: nothing was skipped
		case e.Test == "" && e.Action == "fail":
			if e.FailedBuild == "" {
				res.Failed = append(res.Failed, e.Package)
			}
			// Tests cut short by a panic or timeout never reported: show them.
			for k, lines := range buf {
				if strings.HasPrefix(k, e.Package+"\x00") {
					fmt.Fprint(out, strings.Join(lines, ""))
					delete(buf, k)
				}
			}
		case e.Action == "output":
			buf[key] = append(buf[key], e.Output)
		case e.Action == "pass":
			if !strings.Contains(e.Test, "/") {
				res.Passed++
			}
			delete(buf, key)
		case e.Action == "skip":
			res.Skipped = append(res.Skipped, skip{Package: e.Package, Test: e.Test, Reason: skipReason(buf[key])})
			delete(buf, key)
		case e.Action == "fail":
			fmt.Fprint(out, strings.Join(buf[key], ""))
			res.Failed = append(res.Failed, e.Package+"."+e.Test)
			delete(buf, key)
		}
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	return len(res.Failed) == 0, os.WriteFile(filepath.Join(dir, "go.json"), b, 0o644)
}

// skipReason is the last line a skipped test logged, without the
// file:line prefix: what it passed to t.Skip.
func skipReason(lines []string) string {
	reason := ""
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		reason = strings.TrimSpace(fileLine.ReplaceAllString(l, ""))
	}
	if reason == "" {
		return "no reason given"
	}
	return reason
}

// groupSkips folds skips with the same reason together, most common first.
func groupSkips(skips []skip) []skipGroup {
	by := map[string]*skipGroup{}
	for _, s := range skips {
		g, ok := by[s.Reason]
		if !ok {
			g = &skipGroup{Reason: s.Reason}
			by[s.Reason] = g
		}
		g.Tests = append(g.Tests, shortPkg(s.Package)+"."+s.Test)
	}
	groups := make([]skipGroup, 0, len(by))
	for _, g := range by {
		sort.Strings(g.Tests)
		groups = append(groups, *g)
	}
	sort.Slice(groups, func(i, j int) bool {
		if len(groups[i].Tests) != len(groups[j].Tests) {
			return len(groups[i].Tests) > len(groups[j].Tests)
		}
		return groups[i].Reason < groups[j].Reason
	})
	return groups
}

type skipGroup struct {
	Reason string
	Tests  []string
}

// shortPkg drops the module path: receiver/nvmlreceiver, not the full import path.
func shortPkg(p string) string {
	return strings.TrimPrefix(p, "github.com/inferprof/inferprof/")
}
