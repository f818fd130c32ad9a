// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package local // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/local"

import (
	"encoding/json"
	"net"
	"net/http"
)

// NewMux returns the local API's route, GET /signals, read-only. Health is
// health_check's, the dashboard and the timeline inferprof_ui's.
func NewMux(s *Store) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /signals", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, s.Snapshot())
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// IsLoopback reports whether a host:port listens on loopback only.
func IsLoopback(endpoint string) bool {
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
