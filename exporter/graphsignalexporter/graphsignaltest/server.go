// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package graphsignaltest is a fake Graphsignal ingest service for tests: a
// real HTTP server on loopback that checks the headers, gunzips each
// upload, decodes v1 uploads with graphsignal 1.1.2's own descriptor
// (schema.go) and v0 ones with the exporter's, and answers as told.
// With BodiesEnv naming a folder, it also saves every body it decoded there,
// for real/decode.py to read with Graphsignal's own classes.
package graphsignaltest // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/graphsignaltest"

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	signalsv0 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v0"
	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
)

// Upload is one request the server decoded.
type Upload struct {
	Path   string
	APIKey string
	Status int                      // what the server answered
	Body   []byte                   // gunzipped protobuf
	V1     *signalsv1.UploadRequest // /api/v1/ingest
	V0     *signalsv0.UploadRequest // /api/v1/signals/
}

// Responder picks the answer to an upload that decoded cleanly; nil
// answers 200.
type Responder func(u *Upload) (status int, header http.Header)

// Server is the fake service.
type Server struct {
	URL string

	tb        testing.TB
	mu        sync.Mutex
	srv       *httptest.Server
	addr      string
	uploads   []*Upload
	bad       []string
	responder Responder
	notify    chan struct{}
	hold      chan struct{}
	cancelled int
	saved     int
}

// BodiesEnv names the folder every decoded upload body is saved to, one
// file per body (<test>-<n>.v1.pb or .v0.pb, gunzipped protobuf). Unset:
// nothing is saved.
const BodiesEnv = "INFERPROF_GRAPHSIGNAL_BODIES"

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// save writes body under BodiesEnv; a failure fails the test, since the
// folder was asked for.
func (s *Server) save(path string, body []byte) {
	dir := os.Getenv(BodiesEnv)
	if dir == "" {
		return
	}
	kind := "v1"
	if path == "/api/v1/signals/" {
		kind = "v0"
	}
	s.mu.Lock()
	s.saved++
	n := s.saved
	s.mu.Unlock()
	name := fmt.Sprintf("%s-%d-%p-%d.%s.pb", unsafeName.ReplaceAllString(s.tb.Name(), "_"), os.Getpid(), s, n, kind)
	if err := os.WriteFile(filepath.Join(dir, name), body, 0o600); err != nil {
		s.tb.Errorf("save upload body: %v", err)
	}
}

// NewServer starts a fake on a free loopback port; it stops with the test.
func NewServer(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{tb: tb, notify: make(chan struct{}, 1)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	s.URL = s.srv.URL
	s.addr = s.srv.Listener.Addr().String()
	tb.Cleanup(s.Close)
	return s
}

// Close stops the server: uploads meet a refused connection.
func (s *Server) Close() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.CloseClientConnections()
		srv.Close()
	}
}

// Restart listens again on the same address after Close.
func (s *Server) Restart() error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listen again on %s: %w", s.addr, err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(s.handle))
	srv.Listener = ln
	srv.Start()
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	return nil
}

// SetResponder changes how the server answers from now on.
func (s *Server) SetResponder(r Responder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.responder = r
}

// Hold makes the server sit on each request until release is closed or the
// client gives up; Cancelled counts the requests the client gave up on.
func (s *Server) Hold(release chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = release
}

// Cancelled returns how many held requests the client abandoned.
func (s *Server) Cancelled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelled
}

// Uploads returns every upload received so far, accepted or not.
func (s *Server) Uploads() []*Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Upload(nil), s.uploads...)
}

// Accepted returns the uploads answered with 2xx.
func (s *Server) Accepted() []*Upload {
	var out []*Upload
	for _, u := range s.Uploads() {
		if u.Status/100 == 2 {
			out = append(out, u)
		}
	}
	return out
}

// Malformed returns why each request that broke the wire format was refused.
func (s *Server) Malformed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bad...)
}

// Notify receives a value after each upload (coalesced).
func (s *Server) Notify() <-chan struct{} { return s.notify }

func (s *Server) reject(w http.ResponseWriter, why string) {
	s.mu.Lock()
	s.bad = append(s.bad, why)
	s.mu.Unlock()
	http.Error(w, why, http.StatusBadRequest)
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method != http.MethodPost:
		s.reject(w, "method "+r.Method)
		return
	case r.URL.Path != "/api/v1/ingest" && r.URL.Path != "/api/v1/signals/":
		s.reject(w, "path "+r.URL.Path)
		return
	case r.Header.Get("Content-Type") != "application/octet-stream":
		s.reject(w, "content-type "+r.Header.Get("Content-Type"))
		return
	case r.Header.Get("Content-Encoding") != "gzip":
		s.reject(w, "content-encoding "+r.Header.Get("Content-Encoding"))
		return
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		s.reject(w, "gzip: "+err.Error())
		return
	}
	body, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		s.reject(w, "gzip: "+err.Error())
		return
	}
	u := &Upload{Path: r.URL.Path, APIKey: r.Header.Get("X-API-Key"), Body: body}
	if u.Path == "/api/v1/ingest" {
		u.V1, err = CheckV1(body)
	} else {
		u.V0 = &signalsv0.UploadRequest{}
		err = proto.Unmarshal(body, u.V0)
	}
	if err != nil {
		s.reject(w, "schema: "+err.Error())
		return
	}
	s.save(u.Path, body)
	s.mu.Lock()
	resp, hold := s.responder, s.hold
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			s.mu.Lock()
			s.cancelled++
			s.mu.Unlock()
			return
		}
	}
	u.Status = http.StatusOK
	var hdr http.Header
	if resp != nil {
		u.Status, hdr = resp(u)
	}
	s.mu.Lock()
	s.uploads = append(s.uploads, u)
	s.mu.Unlock()
	for k, vs := range hdr {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(u.Status)
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Contains reports whether any upload body holds text.
func (s *Server) Contains(text string) bool {
	for _, u := range s.Uploads() {
		if bytes.Contains(u.Body, []byte(text)) {
			return true
		}
	}
	return false
}
