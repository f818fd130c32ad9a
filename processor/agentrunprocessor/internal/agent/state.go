// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/internal/tracetable"
	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/cost"
)

// The assembly's shared state: its settings and counts, what it keeps per
// trace, and the Assembler with its constructor. It stands below the files
// that drive the assembly, so their references run down.

// Settings bound the assembly.
type Settings struct {
	// Wait is how long a complete trace waits for late spans from other
	// processes before its figures are written; 0 releases at once.
	Wait time.Duration
	// MaxHold is the longest a span is held when its trace never
	// completes, and how long the records of a trace are kept.
	MaxHold time.Duration
	// EngineWait holds an engine request span that has a parent this long
	// for its caller's spans, so its cost gets the caller's agent and user.
	// 0: an engine span is held only when its caller is already held.
	EngineWait time.Duration
	// MaxSpans caps recorded plus held spans, all traces together.
	MaxSpans int
	// MaxSpansPerTrace caps the spans recorded for one trace; held spans
	// are always kept.
	MaxSpansPerTrace int
	// MaxConversations and ConversationIdle bound the turn counters.
	MaxConversations int
	ConversationIdle time.Duration
	// Pricer prices model calls that did not reach an engine; nil: none.
	Pricer *cost.Pricer
}

// Stats are counted since the last TakeStats.
type Stats struct {
	Runs          int64 // agent runs given figures
	Timeouts      int64 // traces released at MaxHold without their top
	Evicted       int64 // traces pushed out at MaxSpans
	Truncated     int64 // spans not recorded past MaxSpansPerTrace
	Cycles        int64 // parent loops met while walking a trace
	Unjoined      int64 // engine request spans no model call could be found for
	Conversations int64 // conversations forgotten at MaxConversations
	CostConflicts int64 // engine spans not priced because their caller was
}

// Release is a group of held spans let go, with their attributes written.
type Release struct {
	Spans []ptrace.Traces // one span each
}

// Partial reasons, written to inferprof.agent.partial.
const (
	ReasonTimeout   = "timeout"
	ReasonEvicted   = "evicted"
	ReasonShutdown  = "shutdown"
	ReasonTruncated = "truncated"
)

type heldSpan struct {
	node *Node
	td   ptrace.Traces
}

type traceState struct {
	traceID   pcommon.TraceID
	nodes     map[pcommon.SpanID]*Node
	held      []heldSpan
	heldGenAI int // held agent runs and model calls
	heldRuns  int // held agent runs
	truncated bool
	released  bool // figures were written once; the nodes stay as records
}

func (tr *traceState) weight() int { return len(tr.nodes) + len(tr.held) }

// start is the earliest start of the trace's held spans.
func (tr *traceState) start() int64 {
	var s int64
	for i, h := range tr.held {
		if i == 0 || h.node.Start < s {
			s = h.node.Start
		}
	}
	return s
}

// Assembler is safe for concurrent use.
type Assembler struct {
	set     Settings
	mu      sync.Mutex
	tab     *tracetable.Table[*traceState]
	conv    *conversations
	dirty   map[pcommon.TraceID]struct{}
	stats   Stats
	entries atomic.Int64
}

// New returns an empty assembler.
func New(set Settings) *Assembler {
	return &Assembler{
		set:   set,
		tab:   tracetable.New[*traceState](set.MaxSpans, set.Wait, set.EngineWait, set.MaxHold, set.MaxHold),
		conv:  newConversations(set.MaxConversations, set.ConversationIdle),
		dirty: map[pcommon.TraceID]struct{}{},
	}
}

// Context is what an engine request span learns from its caller.
type Context struct {
	AgentName, User string
	// CallPriced: the model call above it already carries the cost.
	CallPriced bool
	Known      bool
}

func (s Settings) maxHops() int { return 256 }
