// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package timeline

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// FuzzTimeline feeds arbitrary OTLP traces (protobuf, as the otlp receiver
// decodes them) to the store and renders every window: it must never
// panic, and the trace must stay valid JSON whose slices nest on every
// thread. Seed: the structure test's fixture, in testdata/fuzz.
func FuzzTimeline(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var u ptrace.ProtoUnmarshaler
		td, err := u.UnmarshalTraces(data)
		if err != nil {
			return
		}
		s := New(1<<20, time.Hour, func() time.Time { return base.Add(time.Minute) })
		s.ConsumeTraces(td)
		if s.Used() > 1<<20 {
			t.Fatalf("store holds %d bytes over its 1 MiB budget", s.Used())
		}
		tr := Render(s.Snapshot(0, math.MaxInt64))
		out, err := json.Marshal(tr)
		if err != nil {
			t.Fatalf("render: %v", err)
		}
		var back rawTrace
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("not JSON: %v", err)
		}
		checkStructure(t, back)
	})
}
