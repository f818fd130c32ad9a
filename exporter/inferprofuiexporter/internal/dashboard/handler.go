// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package dashboard // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/dashboard"

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/timeline"
)

var (
	//go:embed page/index.html
	indexHTML string
	//go:embed page/style.css
	styleCSS string
	//go:embed page/app.js
	appJS string
)

// page is the whole dashboard in one document: styles and script inline,
// no external script, font or image, so it works offline and can be saved.
var page = strings.NewReplacer("/*STYLE*/", styleCSS, "/*SCRIPT*/", appJS).Replace(indexHTML)

// csp allows nothing from elsewhere: the page talks only to this listener.
const csp = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; " +
	"connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Source is what the dashboard reads.
type Source struct {
	Version  string
	Start    time.Time
	Now      func() time.Time
	History  *History
	Timeline *timeline.Store // nil when the timeline is off
	Budget   int64
}

// Register adds GET / and GET /dashboard.json to mux.
func Register(mux *http.ServeMux, src Source) {
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte(page))
	})
	mux.HandleFunc("GET /dashboard.json", func(w http.ResponseWriter, _ *http.Request) {
		doc := src.History.Build(src.Version, src.Start, src.Now(), src.Timeline, src.Budget)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(doc)
	})
}
