// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

var (
	// unittest -v: "test_x (tests.test_hook.T.test_x) ... skipped 'reason'"
	pySkip = regexp.MustCompile(`^(\S+) \((\S+)\) \.\.\. skipped '(.*)'$`)
	pyRan  = regexp.MustCompile(`^Ran (\d+) tests? in `)
)

// stage is one line of the "ran" block and the skips it contributed.
type stage struct {
	name    string
	ran     string
	summary string // for the closing line
	skips   []skipGroup
}

// report prints the closing block of `make test` from what the stages left
// in dir; the last line is the one-line summary.
func report(dir string, out io.Writer) error {
	var stages []stage
	if _, err := os.Stat(filepath.Join(dir, "lint.log")); err == nil {
		stages = append(stages, stage{name: "lint", ran: "licence headers, gofmt, go vet: clean", summary: "lint"})
	}
	if s, ok, err := goStage(dir); err != nil {
		return err
	} else if ok {
		stages = append(stages, s)
	}
	if s, ok, err := pythonStage(dir); err != nil {
		return err
	} else if ok {
		stages = append(stages, s)
	}
	if s, ok, err := cStage(dir); err != nil {
		return err
	} else if ok {
		stages = append(stages, s)
	}
	if _, err := os.Stat(filepath.Join(dir, "soak.log")); err == nil {
		// The go stage skips the soak test; its own stage ran it after.
		stages = dropSkipped(stages, soakTest)
		stages = append(stages, stage{name: "soak", ran: "30 s of load, a backend outage, a crash and bad input against the built binary (e2e/soak): nothing lost", summary: "the soak"})
	}

	fmt.Fprintln(out, "")
	fmt.Fprintln(out, "== make test summary ==")
	fmt.Fprintln(out, "ran:")
	var ran []string
	skipped := 0
	for _, s := range stages {
		fmt.Fprintf(out, "  %-7s %s\n", s.name, s.ran)
		ran = append(ran, s.summary)
		for _, g := range s.skips {
			skipped += len(g.Tests)
		}
	}
	if skipped > 0 {
		fmt.Fprintln(out, "skipped, and why:")
		for _, s := range stages {
			for _, g := range s.skips {
				for i, l := range strings.Split(g.Reason, "\n") {
					if i == 0 {
						fmt.Fprintf(out, "  %-7s %s\n", s.name, l)
					} else {
						fmt.Fprintf(out, "  %-7s   %s\n", "", l)
					}
				}
				fmt.Fprintf(out, "  %-7s   %d: %s\n", "", len(g.Tests), strings.Join(g.Tests, ", "))
			}
		}
	}
	fmt.Fprintf(out, "make test: PASS: ran %s; skipped %d%s\n", strings.Join(ran, ", "), skipped, map[bool]string{true: " (reasons above)", false: ""}[skipped > 0])
	return nil
}

// soakTest is the test `make test` skips in the go stage and runs in its own.
const soakTest = "e2e/soak.TestSoak"

// dropSkipped removes test from every stage's skips: a later stage ran it.
func dropSkipped(stages []stage, test string) []stage {
	for i := range stages {
		var groups []skipGroup
		for _, g := range stages[i].skips {
			var tests []string
			for _, t := range g.Tests {
				if t != test {
					tests = append(tests, t)
				}
			}
			if len(tests) > 0 {
				g.Tests = tests
				groups = append(groups, g)
			}
		}
		stages[i].skips = groups
	}
	return stages
}

func goStage(dir string) (stage, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, "go.json"))
	if errors.Is(err, os.ErrNotExist) {
		return stage{}, false, nil
	}
	if err != nil {
		return stage{}, false, err
	}
	var r goResult
	if err := json.Unmarshal(b, &r); err != nil {
		return stage{}, false, fmt.Errorf("go.json: %w", err)
	}
	return stage{
		name:    "go",
		ran:     fmt.Sprintf("%d tests passed in %d packages, with -race; end-to-end ones against the built otelcol-inferprof", r.Passed, r.Packages),
		summary: fmt.Sprintf("%d Go tests", r.Passed),
		skips:   groupSkips(r.Skipped),
	}, true, nil
}

func pythonStage(dir string) (stage, bool, error) {
	lines, ok, err := readLines(filepath.Join(dir, "python.log"))
	if err != nil || !ok {
		return stage{}, ok, err
	}
	ran := 0
	var skips []skip
	for _, l := range lines {
		if m := pySkip.FindStringSubmatch(l); m != nil {
			skips = append(skips, skip{Package: "", Test: m[2], Reason: m[3]})
		}
		if m := pyRan.FindStringSubmatch(l); m != nil {
			ran, _ = strconv.Atoi(m[1])
		}
	}
	groups := groupSkips(skips)
	for i := range groups {
		for j, t := range groups[i].Tests {
			groups[i].Tests[j] = strings.TrimPrefix(t, ".")
		}
	}
	return stage{
		name:    "python",
		ran:     fmt.Sprintf("%d tests of integrations/python (unittest)", ran-len(skips)),
		summary: fmt.Sprintf("%d Python tests", ran-len(skips)),
		skips:   groups,
	}, true, nil
}

// cStage reads native/cupti's test output. Its Makefile prints a line
// saying a test was skipped and why, then the commands that install what it
// needs, indented: all of it is the reason.
func cStage(dir string) (stage, bool, error) {
	lines, ok, err := readLines(filepath.Join(dir, "c.log"))
	if err != nil || !ok {
		return stage{}, ok, err
	}
	var groups []skipGroup
	for i := 0; i < len(lines); i++ {
		if !strings.Contains(strings.ToLower(lines[i]), "skipp") {
			continue
		}
		reason := []string{strings.TrimSpace(lines[i])}
		for i+1 < len(lines) && (strings.HasPrefix(lines[i+1], " ") || strings.HasPrefix(lines[i+1], "(")) {
			i++
			reason = append(reason, strings.TrimSpace(lines[i]))
		}
		groups = append(groups, skipGroup{Reason: strings.Join(reason, "\n"), Tests: []string{"native/cupti"}})
	}
	ran := "native/cupti tests under ASan/UBSan"
	if len(groups) > 0 {
		ran += ", except what is listed as skipped below"
	}
	return stage{name: "c", ran: ran, summary: "the C tests", skips: groups}, true, nil
}

func readLines(path string) ([]string, bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines, true, sc.Err()
}
