// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

const (
	// The inferprof_ui exporter's listener, where /timeline is served.
	envLocalEndpoint     = "INFERPROF_UI_ENDPOINT"
	defaultLocalEndpoint = "127.0.0.1:18259"
)

// runTimeline handles `inferprof-run --timeline FILE [--last 60s]
// [--local-endpoint HOST:PORT]`: it saves the collector's /timeline to FILE
// and returns handled=true. Without --timeline it returns handled=false and
// inferprof-run launches its command as usual.
func runTimeline(argv []string, getenv func(string) string, stdout, stderr io.Writer) (code int, handled bool) {
	if !wantsTimeline(argv) {
		return 0, false
	}
	fs := flag.NewFlagSet("inferprof-run --timeline", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("timeline", "", "save the collector's timeline (Chrome Trace Event JSON, for Perfetto UI or chrome://tracing) to this file and exit")
	last := fs.Duration("last", 60*time.Second, "how much of the recent past to save")
	endpoint := fs.String("local-endpoint", or(getenv(envLocalEndpoint), defaultLocalEndpoint),
		"the inferprof_ui exporter's listener ("+envLocalEndpoint+")")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if err := fs.Parse(argv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "inferprof-run: --timeline saves a timeline and exits; it runs no command (got %q)\n", fs.Args())
		return 2, true
	}
	if *out == "" || *last <= 0 {
		fmt.Fprintln(stderr, "inferprof-run: --timeline needs a file name and a positive --last")
		return 2, true
	}
	n, err := saveTimeline(*endpoint, *last, *out, *timeout)
	if err != nil {
		fmt.Fprintln(stderr, "inferprof-run:", err)
		return 1, true
	}
	abs, _ := filepath.Abs(*out)
	fmt.Fprintf(stdout, "saved %d trace events (last %s) to %s; open it in https://ui.perfetto.dev or chrome://tracing\n", n, *last, abs)
	return 0, true
}

// boolFlags are inferprof-run's flags that take no value.
var boolFlags = []string{"no-hook", "no-cupti", "dry-run", "h", "help"}

// wantsTimeline tells whether --timeline is among inferprof-run's own flags,
// which come before the command: the command's arguments are its own.
func wantsTimeline(argv []string) bool {
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if a == "--" || !strings.HasPrefix(a, "-") {
			return false
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "timeline" {
			return true
		}
		if !hasValue && !slices.Contains(boolFlags, name) {
			i++ // the flag's value
		}
	}
	return false
}

// saveTimeline fetches /timeline?last=... and writes it to path, through a
// temporary file so that a failed fetch leaves no half-written trace.
func saveTimeline(endpoint string, last time.Duration, path string, timeout time.Duration) (int, error) {
	u := url.URL{Scheme: "http", Host: endpoint, Path: "/timeline", RawQuery: url.Values{"last": {last.String()}}.Encode()}
	client := &http.Client{Timeout: timeout}
	resp, err := client.Get(u.String())
	if err != nil {
		return 0, fmt.Errorf("timeline: %w (is the collector running with the inferprof_ui exporter on %s?)", err, endpoint)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("timeline: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("timeline: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	var doc struct {
		TraceEvents []json.RawMessage `json:"traceEvents"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.TraceEvents == nil {
		return 0, fmt.Errorf("timeline: %s did not answer with a Chrome trace (traceEvents missing)", u.String())
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".timeline-*.json")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, bytes.NewReader(body)); err != nil {
		tmp.Close()
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, err
	}
	return len(doc.TraceEvents), nil
}
