// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/timeline"

import "fmt"

// Event is one Chrome Trace Event. Every event carries ph, ts, pid and tid
// (metadata events at ts 0), so strict readers accept them all.
type Event struct {
	Name  string         `json:"name,omitempty"`
	Cat   string         `json:"cat,omitempty"`
	Ph    string         `json:"ph"`
	Ts    float64        `json:"ts"`
	Dur   *float64       `json:"dur,omitempty"`
	Pid   int            `json:"pid"`
	Tid   int            `json:"tid"`
	ID    string         `json:"id,omitempty"`
	S     string         `json:"s,omitempty"`
	Bp    string         `json:"bp,omitempty"`
	Cname string         `json:"cname,omitempty"`
	Args  map[string]any `json:"args,omitempty"`
}

// Trace is the JSON object format of the Trace Event Format.
type Trace struct {
	TraceEvents     []Event   `json:"traceEvents"`
	DisplayTimeUnit string    `json:"displayTimeUnit"`
	OtherData       OtherData `json:"otherData"`
}

// OtherData says what the trace covers; ts 0 is OriginUnixNs.
type OtherData struct {
	Producer     string `json:"producer"`
	OriginUnixNs int64  `json:"origin_unix_ns"`
	FromUnixNs   int64  `json:"from_unix_ns"`
	ToUnixNs     int64  `json:"to_unix_ns"`
	Requests     int    `json:"requests"`
	Steps        int    `json:"steps"`
	Kernels      int    `json:"kernels"`
	Samples      int    `json:"samples"`
	Flows        int    `json:"flows"`
	// KernelsSampled: kernels are the cupti receiver's sample
	// (spans.sampling_ratio), not every execution.
	KernelsSampled bool `json:"kernels_sampled"`
	// Truncated: the response reached timeline.max_response_mib and
	// EventsOmitted events were left out (the last ones drawn: GPU kernels
	// and counters first). Ask for a shorter window.
	Truncated     bool `json:"truncated"`
	EventsOmitted int  `json:"events_omitted,omitempty"`
}

// String is for test failure messages.
func (e Event) String() string {
	d := 0.0
	if e.Dur != nil {
		d = *e.Dur
	}
	return fmt.Sprintf("%s %q pid=%d tid=%d ts=%.3f dur=%.3f", e.Ph, e.Name, e.Pid, e.Tid, e.Ts, d)
}
