// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector // import "github.com/inferprof/inferprof/connector/inferencemetricsconnector"

import (
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// maxLabelBytes caps a span attribute value that becomes a series
// attribute, and so a Prometheus label: one 10 MB model name otherwise sits
// in every later scrape. 256 bytes hold any real model id (Hugging Face's
// limit for a repository id is 96 characters).
const maxLabelBytes = 256

// labelValue returns s fit to be a label: invalid UTF-8 replaced with U+FFFD
// (the Prometheus exporter drops a series whose label is not UTF-8, with an
// error at every scrape) and cut to maxLabelBytes at a character boundary.
// changed reports whether s was altered, for the sanitized_labels counter.
// A valid, short s is returned as it is, without copying.
func labelValue(s string) (v string, changed bool) {
	if len(s) <= maxLabelBytes && utf8.ValidString(s) {
		return s, false
	}
	var b strings.Builder
	b.Grow(min(len(s), maxLabelBytes))
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:]) // a bad byte decodes as U+FFFD, width 1
		i += w
		if b.Len()+utf8.RuneLen(r) > maxLabelBytes {
			break
		}
		b.WriteRune(r)
	}
	return b.String(), true
}

// putNonEmpty leaves an empty value out: a series has no attribute for it.
func putNonEmpty(m pcommon.Map, k, v string) {
	if v != "" {
		m.PutStr(k, v)
	}
}
