// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package dashboard // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/dashboard"

import (
	"slices"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/inferprof/inferprof/internal/names"
)

// maxErrors is how many of the last errors the dashboard lists, as
// Graphsignal's /signals keeps the last ten entries at warning or above.
const maxErrors = 20

// maxErrorText cuts a message shown in the table; the record itself went
// through the privacy processor (and, from inferprof-run, its own scrub).
const maxErrorText = 1024

// attrEngineErrorKind is what inferprof-run puts on the engine error
// records it sends (docs/names.md).
const attrEngineErrorKind = "inferprof.engine.error.kind"

// CollectLogs reads the error records of one batch: those at ERROR or above,
// and the engine's records of any severity (its exit record is INFO).
func CollectLogs(ld plog.Logs) []ErrorRow {
	var out []ErrorRow
	for _, rl := range ld.ResourceLogs().All() {
		ra := rl.Resource().Attributes()
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				kind := str(lr.Attributes(), attrEngineErrorKind)
				if kind == "" && lr.SeverityNumber() < plog.SeverityNumberError {
					continue
				}
				ts := lr.Timestamp()
				if ts == 0 {
					ts = lr.ObservedTimestamp()
				}
				sev := lr.SeverityText()
				if sev == "" {
					sev = lr.SeverityNumber().String()
				}
				out = append(out, ErrorRow{T: int64(ts) / 1e6, Service: str(ra, names.ResourceServiceName),
					Instance: str(ra, names.ResourceServiceInstance), Kind: kind, Severity: sev,
					Message: cut(lr.Body().AsString(), maxErrorText)})
			}
		}
	}
	return out
}

// AddErrors keeps rows, the newest maxErrors of all seen.
func (h *History) AddErrors(rows []ErrorRow) {
	if len(rows) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.errors = append(h.errors, rows...)
	slices.SortStableFunc(h.errors, func(a, b ErrorRow) int { return int(b.T - a.T) })
	if len(h.errors) > maxErrors {
		h.errors = h.errors[:maxErrors]
	}
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
