// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agentrecording // import "github.com/inferprof/inferprof/internal/agentrecording"

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// EnvDir names a folder a fresh make agents-real wrote, read in place of
// the committed recordings.
const EnvDir = "INFERPROF_AGENTS_RECORDINGS"

// Recording is one SDK's run of e2e/agents/agent.py against the tiny CPU
// vLLM: every OTLP request the collector got for its traces (its own spans
// and vLLM's llm_request spans), in arrival order, and the script's own
// clock around each model call, tool call and run.
type Recording struct {
	SDK      string            `json:"sdk"`
	Packages map[string]string `json:"packages"`
	Clock    struct {
		Model []ClockEntry `json:"model"`
		Tool  []ClockEntry `json:"tool"`
		Run   []ClockEntry `json:"run"`
	} `json:"clock"`
	Lines   [][]byte        `json:"-"` // the requests as sent (OTLP/JSON)
	Batches []ptrace.Traces `json:"-"` // the same, decoded
}

// Conversational: the contrib instrumentation exports no conversation id,
// the other two do (OpenInference's session.id, the LangGraph thread_id
// agent.py's invoke_agent span carries as gen_ai.conversation.id).
func (r Recording) Conversational() bool { return r.SDK != "openai-agents-contrib" }

// ClockEntry is one interval of agent.py's clock, in seconds.
type ClockEntry struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	Turn  int     `json:"turn"`
}

// Seconds is the entry's length.
func (c ClockEntry) Seconds() float64 { return c.End - c.Start }

// Dir is the folder of the recordings: $INFERPROF_AGENTS_RECORDINGS, or
// e2e/agents/testdata under the repository root given.
func Dir(repoRoot string) string {
	if d := os.Getenv(EnvDir); d != "" {
		return d
	}
	return filepath.Join(repoRoot, "e2e", "agents", "testdata")
}

// Load reads every <sdk>.json in dir with its <sdk>.jsonl, one request a
// line.
func Load(dir string) ([]Recording, error) {
	metas, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(metas) == 0 {
		return nil, fmt.Errorf("no recordings in %s", dir)
	}
	out := make([]Recording, 0, len(metas))
	for _, m := range metas {
		r, err := load(m)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func load(meta string) (Recording, error) {
	var r Recording
	b, err := os.ReadFile(meta)
	if err != nil {
		return r, err
	}
	if err = json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", meta, err)
	}
	path := strings.TrimSuffix(meta, ".json") + ".jsonl"
	if r.Lines, err = readLines(path); err != nil {
		return r, err
	}
	for i, l := range r.Lines {
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(l)
		if err != nil {
			return r, fmt.Errorf("%s line %d: %w", path, i+1, err)
		}
		r.Batches = append(r.Batches, td)
	}
	return r, nil
}

func readLines(path string) (out [][]byte, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			out = append(out, slices.Clone(l))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// ClockWithin is the entries of all that lie inside run.
func ClockWithin(all []ClockEntry, run ClockEntry) []ClockEntry {
	var out []ClockEntry
	for _, c := range all {
		if c.Start >= run.Start && c.End <= run.End {
			out = append(out, c)
		}
	}
	return out
}

// SumSeconds is the entries' total length.
func SumSeconds(cs []ClockEntry) float64 {
	var s float64
	for _, c := range cs {
		s += c.Seconds()
	}
	return s
}

// KindOfLongest is "tool" where the longest tool call by the clock is
// longer than the longest model call, else "model": the bottleneck's kind.
func KindOfLongest(calls, tools []ClockEntry) string {
	var m, tl float64
	for _, c := range calls {
		m = max(m, c.Seconds())
	}
	for _, c := range tools {
		tl = max(tl, c.Seconds())
	}
	if tl > m {
		return "tool"
	}
	return "model"
}
