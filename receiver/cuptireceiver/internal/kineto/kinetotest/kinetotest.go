// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package kinetotest builds large Kineto traces from the real ones in
// testdata, for benchmarks and memory tests.
package kinetotest // import "github.com/inferprof/inferprof/receiver/cuptireceiver/internal/kineto/kinetotest"

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/gzip"
)

// Fixture is the largest real trace in testdata: an 8-GPU NCCL training
// step recorded by PyTorch's profiler (HolisticTraceAnalysis test data).
const Fixture = "nccl_parser_config-nccl_data.json.gz"

// Trace is a real trace's events repeated, in the same document layout.
type Trace struct {
	head, tail []byte   // document before and after the events
	events     [][]byte // one trace's events, as written
}

// Load reads a real .json.gz trace.
func Load(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	var doc map[string]json.RawMessage
	if err := json.NewDecoder(zr).Decode(&doc); err != nil {
		return nil, err
	}
	var evs []json.RawMessage
	if err := json.Unmarshal(doc["traceEvents"], &evs); err != nil {
		return nil, err
	}
	t := &Trace{}
	var head, tail bytes.Buffer
	head.WriteString(`{"schemaVersion":1,"traceEvents":[`)
	tail.WriteString(`]`)
	for _, k := range []string{"deviceProperties", "distributedInfo", "traceName", "displayTimeUnit", "baseTimeNanoseconds"} {
		if v, ok := doc[k]; ok {
			fmt.Fprintf(&tail, ",%q:%s", k, v) // after the events, as PyTorch 2.x writes them
		}
	}
	tail.WriteString("}\n")
	t.head, t.tail = head.Bytes(), tail.Bytes()
	for _, e := range evs {
		t.events = append(t.events, []byte(e))
	}
	return t, nil
}

// Events is how many events one copy holds.
func (t *Trace) Events() int { return len(t.events) }

// Write writes the document with the events repeated copies times.
func (t *Trace) Write(w io.Writer, copies int) error {
	if _, err := w.Write(t.head); err != nil {
		return err
	}
	first := true
	for range copies {
		for _, e := range t.events {
			if !first {
				if _, err := w.Write([]byte{','}); err != nil {
					return err
				}
			}
			first = false
			if _, err := w.Write(e); err != nil {
				return err
			}
		}
	}
	_, err := w.Write(t.tail)
	return err
}

// Gzip returns the document, repeated copies times, gzipped as
// torch.profiler's export_chrome_trace(...".json.gz") would.
func (t *Trace) Gzip(copies int) ([]byte, error) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if err := t.Write(zw, copies); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
