package local // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/local"

import (
	"encoding/json"
	"net"
	"net/http"
	"time"
)

// Handler serves GET /signals and GET /health; it is read-only.
func Handler(s *Store) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /signals", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s.Snapshot())
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	return mux
}

// NewServer returns an HTTP server for Handler with conservative timeouts.
func NewServer(s *Store) *http.Server {
	return &http.Server{
		Handler:           Handler(s),
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       time.Minute,
	}
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
