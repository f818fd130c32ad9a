// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/timeline"

import (
	"errors"
	"fmt"
	"math"
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

// The range of times a request may name: unix nanoseconds in an int64 end
// in April 2262, and the records start after 1970.
var maxTime = time.Unix(0, math.MaxInt64).UTC()

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
	// Outside this range UnixNano overflows and returns another time.
	if t.Unix() <= 0 || t.After(maxTime) {
		return 0, fmt.Errorf("%s is out of range: want a time after 1970-01-01 and before %s", s, maxTime.Format(time.RFC3339))
	}
	return t.UnixNano(), nil
}

// HandlerSettings bound GET /timeline.
type HandlerSettings struct {
	// MaxBytes caps one response; past it the events stop and otherData
	// says truncated. 0: no cap.
	MaxBytes int64
	// Wait is how long a request waits for the one running render before
	// it gets 503 with Retry-After.
	Wait time.Duration
}

// DefaultHandlerSettings: 32 MiB (a busy minute of the default store is
// about 5 MB; the whole 64 MiB store is about 120 MB of JSON), and a 2 s wait.
var DefaultHandlerSettings = HandlerSettings{MaxBytes: 32 << 20, Wait: 2 * time.Second}

// TruncatedTrailer is the trailer that says a response was cut at MaxBytes:
// headers are sent before the events are known.
const TruncatedTrailer = "X-Inferprof-Timeline-Truncated"

// Handler serves GET /timeline with the default settings.
func Handler(s *Store) http.Handler { return NewHandler(s, DefaultHandlerSettings) }

// NewHandler serves GET /timeline: the window's Chrome trace as JSON, one
// render at a time (each holds a copy of the window's records, up to the
// store's budget), streamed and capped at set.MaxBytes.
func NewHandler(s *Store, set HandlerSettings) http.Handler {
	return &handler{s: s, set: set, sem: make(chan struct{}, 1)}
}

type handler struct {
	s   *Store
	set HandlerSettings
	sem chan struct{}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	from, to, err := ParseWindow(r.URL.Query(), h.s.now())
	if err != nil {
		http.Error(w, "timeline: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !h.acquire(r) {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(h.set.Wait.Round(time.Second)/time.Second))))
		http.Error(w, "timeline: another timeline is being rendered; retry", http.StatusServiceUnavailable)
		return
	}
	defer func() { <-h.sem }()
	sn := h.s.Snapshot(from, to)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Trailer", TruncatedTrailer)
	if r.URL.Query().Has("download") {
		w.Header().Set("Content-Disposition", `attachment; filename="inferprof-timeline.json"`)
	}
	od, err := StreamTrace(w, sn, h.set.MaxBytes)
	if err == nil && od.Truncated {
		w.Header().Set(TruncatedTrailer, "true")
	}
}

func (h *handler) acquire(r *http.Request) bool {
	select {
	case h.sem <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(h.set.Wait)
	defer t.Stop()
	select {
	case h.sem <- struct{}{}:
		return true
	case <-t.C:
	case <-r.Context().Done():
	}
	return false
}
