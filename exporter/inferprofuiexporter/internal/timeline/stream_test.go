// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func fullStore(t *testing.T) (*Store, string) {
	t.Helper()
	s := New(1<<30, time.Hour, func() time.Time { return base.Add(time.Minute) })
	s.ConsumeTraces(benchBatch(2000, 50))
	q := "from=" + strconv.FormatInt(base.Add(-time.Hour).UnixNano(), 10) + "&to=" + strconv.FormatInt(base.Add(time.Hour).UnixNano(), 10)
	return s, q
}

// TestStreamEqualsRender: the streamed document is the rendered one.
func TestStreamEqualsRender(t *testing.T) {
	s, _ := fullStore(t)
	from, to := base.Add(-time.Hour).UnixNano(), base.Add(time.Hour).UnixNano()
	want, err := json.Marshal(Render(s.Snapshot(from, to)))
	require.NoError(t, err)
	var got bytes.Buffer
	od, err := StreamTrace(&got, s.Snapshot(from, to), 0)
	require.NoError(t, err)
	assert.False(t, od.Truncated)
	assert.JSONEq(t, string(want), got.String())
}

// TestStreamCap: past MaxBytes the events stop, the document stays valid
// JSON and says it was cut, in otherData and in the trailer.
func TestStreamCap(t *testing.T) {
	s, q := fullStore(t)
	var whole bytes.Buffer
	_, err := StreamTrace(&whole, s.Snapshot(base.Add(-time.Hour).UnixNano(), base.Add(time.Hour).UnixNano()), 0)
	require.NoError(t, err)
	const limit = 64 << 10
	require.Greater(t, whole.Len(), 4*limit, "the window must be larger than the cap")

	srv := httptest.NewServer(NewHandler(s, HandlerSettings{MaxBytes: limit, Wait: time.Second}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/timeline?" + q)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(body), limit+4<<10, "one event and otherData past the cap at most")
	var tr rawTrace
	require.NoError(t, json.Unmarshal(body, &tr), "a cut document is still JSON")
	assert.Equal(t, true, tr.OtherData["truncated"])
	assert.Positive(t, tr.OtherData["events_omitted"])
	assert.NotEmpty(t, tr.TraceEvents)
	assert.Equal(t, "true", resp.Trailer.Get(TruncatedTrailer))

	// Under the cap: not truncated, no trailer value.
	small := httptest.NewServer(NewHandler(s, HandlerSettings{MaxBytes: int64(2 * whole.Len()), Wait: time.Second}))
	defer small.Close()
	resp2, err := http.Get(small.URL + "/timeline?" + q)
	require.NoError(t, err)
	defer resp2.Body.Close()
	var tr2 rawTrace
	require.NoError(t, json.NewDecoder(resp2.Body).Decode(&tr2))
	_, _ = io.Copy(io.Discard, resp2.Body)
	assert.Equal(t, false, tr2.OtherData["truncated"])
	assert.Empty(t, resp2.Trailer.Get(TruncatedTrailer))
}

// TestOneRenderAtATime: while a render runs, another request waits up to
// Wait and then gets 503 with Retry-After; once it ends, the next one runs.
func TestOneRenderAtATime(t *testing.T) {
	s, q := fullStore(t)
	h := NewHandler(s, HandlerSettings{MaxBytes: 1 << 20, Wait: 50 * time.Millisecond}).(*handler)
	srv := httptest.NewServer(h)
	defer srv.Close()
	h.sem <- struct{}{} // a render in progress
	resp, err := http.Get(srv.URL + "/timeline?" + q)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, string(body))
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Contains(t, string(body), "another timeline is being rendered")

	// A waiting request gets the render as soon as the running one ends.
	done := make(chan int)
	go func() {
		r, err := http.Get(srv.URL + "/timeline?" + q)
		if err != nil {
			done <- 0
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
		done <- r.StatusCode
	}()
	<-h.sem
	assert.Equal(t, http.StatusOK, <-done)
}

// TestTimeRangeErrors: times outside what unix nanoseconds hold are refused
// with a clear 400, not wrapped into another time.
func TestTimeRangeErrors(t *testing.T) {
	srv := httptest.NewServer(Handler(New(1<<20, time.Hour, time.Now)))
	defer srv.Close()
	for _, q := range []string{
		"from=1677-09-22T00:00:00Z",
		"from=1969-12-31T23:59:59Z",
		"from=2263-01-01T00:00:00Z",
		"from=2026-12-01T00:00:00Z&to=2300-01-01T00:00:00Z",
		"from=9999-12-31T23:59:59Z&to=9999-12-31T23:59:59.5Z",
		"from=99999999999999999999",
	} {
		resp, err := http.Get(srv.URL + "/timeline?" + q)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equalf(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", q, b)
		assert.Containsf(t, string(b), "timeline: ", q)
	}
	resp, err := http.Get(srv.URL + "/timeline?from=2026-12-01T00:00:00Z&to=2026-12-01T01:00:00Z")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// FuzzParseWindow: whatever the query, a window without error lies inside
// unix nanoseconds after 1970, ends after it starts, and spans at most the
// 24 h cap. Seeds: the range errors of issue #30, in testdata/fuzz.
func FuzzParseWindow(f *testing.F) {
	for _, q := range []string{
		"last=24h", "from=1677-09-22T00:00:00Z", "from=2263-01-01T00:00:00Z",
		"from=2026-12-01T00:00:00Z&to=2026-12-01T01:00:00Z", "from=1&to=2", "last=-9223372036854775808ns",
	} {
		f.Add(q)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		from, to, err := ParseWindow(q, now)
		if err != nil {
			return
		}
		if from <= 0 || to <= from || time.Duration(to-from) > maxWindow {
			t.Fatalf("%q: window [%d, %d]", raw, from, to)
		}
	})
}
