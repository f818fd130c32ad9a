// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWantsTimeline(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want bool
	}{
		{[]string{"--timeline", "out.json"}, true},
		{[]string{"-timeline=out.json"}, true},
		{[]string{"--local-endpoint", "127.0.0.1:1", "--timeline", "x.json"}, true},
		{[]string{"--no-hook", "--timeline", "x.json"}, true},
		{[]string{"vllm", "serve", "m", "--timeline", "x"}, false},
		{[]string{"--step-endpoint", "/tmp/s.sock", "vllm", "--timeline"}, false},
		{[]string{"--", "--timeline", "x"}, false},
		{nil, false},
	} {
		assert.Equalf(t, c.want, wantsTimeline(c.argv), "%q", c.argv)
	}
}

// TestTimelineSaves runs --timeline against a real loopback server that
// answers as the collector's /timeline does.
func TestTimelineSaves(t *testing.T) {
	var gotQuery string
	trace := `{"traceEvents":[{"name":"process_name","ph":"M","ts":0,"pid":1,"tid":0,"args":{"name":"engine vllm"}},` +
		`{"name":"decode step","ph":"X","ts":1,"dur":2,"pid":1,"tid":10}],"displayTimeUnit":"ms","otherData":{}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/timeline" {
			http.NotFound(w, r)
			return
		}
		gotQuery = r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(trace))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	out := filepath.Join(t.TempDir(), "tl.json")
	var stdout, stderr bytes.Buffer
	env := func(k string) string {
		if k == envLocalEndpoint {
			return addr
		}
		return ""
	}
	code, ok := runTimeline([]string{"--timeline", out, "--last", "2m"}, env, &stdout, &stderr)
	require.True(t, ok)
	require.Equal(t, 0, code, stderr.String())
	assert.Equal(t, "last=2m0s", gotQuery)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	var doc struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	assert.Len(t, doc.TraceEvents, 2)
	assert.Contains(t, stdout.String(), "saved 2 trace events")

	// A collector that refuses: exit 1, its message, no file.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "timeline: last: bogus", http.StatusBadRequest)
	}))
	defer bad.Close()
	out2 := filepath.Join(t.TempDir(), "no.json")
	stderr.Reset()
	code, _ = runTimeline([]string{"--timeline", out2, "--local-endpoint", strings.TrimPrefix(bad.URL, "http://")}, env, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "timeline: last: bogus")
	_, err = os.Stat(out2)
	assert.True(t, os.IsNotExist(err), "no file after a failed fetch")

	// Nothing listening: a clear error.
	stderr.Reset()
	code, _ = runTimeline([]string{"--timeline", out2, "--local-endpoint", "127.0.0.1:1"}, env, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "is the collector running")

	// --timeline runs no command.
	code, _ = runTimeline([]string{"--timeline", out2, "vllm", "serve"}, env, &stdout, &stderr)
	assert.Equal(t, 2, code)
}
