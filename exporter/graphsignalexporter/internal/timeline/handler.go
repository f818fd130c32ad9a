// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/timeline"

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// DefaultLast is the window of GET /timeline without parameters.
const DefaultLast = 60 * time.Second

// maxWindow bounds a requested window; the store holds far less anyway.
const maxWindow = 24 * time.Hour

// ParseWindow reads a window from query parameters: last=<duration> (the
// window ending now), or from= and to= (unix nanoseconds or RFC 3339; to
// defaults to now). No parameters: the last DefaultLast.
func ParseWindow(q url.Values, now time.Time) (from, to int64, err error) {
	last, f, t := q.Get("last"), q.Get("from"), q.Get("to")
	if last != "" && (f != "" || t != "") {
		return 0, 0, errors.New("give either last or from/to, not both")
	}
	to = now.UnixNano()
	if f == "" && t != "" {
		return 0, 0, errors.New("to needs from")
	}
	if f != "" {
		if from, err = parseTime(f); err != nil {
			return 0, 0, fmt.Errorf("from: %w", err)
		}
		if t != "" {
			if to, err = parseTime(t); err != nil {
				return 0, 0, fmt.Errorf("to: %w", err)
			}
		}
		if to <= from {
			return 0, 0, errors.New("to must be after from")
		}
		if time.Duration(to-from) > maxWindow {
			return 0, 0, fmt.Errorf("window longer than %s", maxWindow)
		}
		return from, to, nil
	}
	d := DefaultLast
	if last != "" {
		if d, err = time.ParseDuration(last); err != nil {
			return 0, 0, fmt.Errorf("last: %w", err)
		}
		if d <= 0 || d > maxWindow {
			return 0, 0, fmt.Errorf("last: %s is not in (0, %s]", d, maxWindow)
		}
	}
	return to - int64(d), to, nil
}

func parseTime(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n <= 0 {
			return 0, errors.New("must be positive unix nanoseconds")
		}
		return n, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, errors.New("want unix nanoseconds or an RFC 3339 time")
	}
	return t.UnixNano(), nil
}

// Handler serves GET /timeline: the window's Chrome trace as JSON.
func Handler(s *Store) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		from, to, err := ParseWindow(r.URL.Query(), s.now())
		if err != nil {
			http.Error(w, "timeline: "+err.Error(), http.StatusBadRequest)
			return
		}
		tr := Render(s.Snapshot(from, to))
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Has("download") {
			w.Header().Set("Content-Disposition", `attachment; filename="inferprof-timeline.json"`)
		}
		bw := bufio.NewWriterSize(w, 64<<10)
		if err := json.NewEncoder(bw).Encode(tr); err == nil {
			_ = bw.Flush()
		}
	}
}
