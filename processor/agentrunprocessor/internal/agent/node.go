// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package agent // import "github.com/inferprof/inferprof/processor/agentrunprocessor/internal/agent"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/cost"
	"github.com/inferprof/inferprof/processor/agentrunprocessor/internal/genai"
)

// Role is what a recorded span is to the assembly.
type Role uint8

const (
	// Plain is any other span of an agent trace: it links a model call to
	// the engine request under it, or an agent run to the process entry
	// above it.
	Plain Role = iota
	// Agent is an agent run.
	Agent
	// Tool is a tool call.
	Tool
	// Model is a call to a model.
	Model
	// Step is other GenAI work (chains, tasks, guardrails).
	Step
	// Engine is an engine request span (vLLM, SGLang, TensorRT-LLM, TGI)
	// the inference processor normalised.
	Engine
)

// FromGenAI maps a classified GenAI span's role.
func FromGenAI(r genai.Role) Role {
	switch r {
	case genai.RoleAgent:
		return Agent
	case genai.RoleTool:
		return Tool
	case genai.RoleModel:
		return Model
	case genai.RoleStep:
		return Step
	}
	return Plain
}

// Interval is a stretch of time in unix nanoseconds; empty unless End > Start.
type Interval struct{ Start, End int64 }

func (i Interval) ok() bool { return i.End > i.Start }

// Node is one span of a trace as the assembly keeps it.
type Node struct {
	ID, Parent pcommon.SpanID
	Start, End int64
	Kind       ptrace.SpanKind
	Role       Role
	Failed     bool
	// Name is the span name (the bottleneck is named by it).
	Name         string
	AgentName    string
	Conversation string
	User         string
	Model        string
	Provider     string
	Tokens       cost.Tokens

	// Engine request spans: the phases on the engine's clock, and which the
	// engine reported (a phase may last 0 s).
	Queue, Prefill, Decode       Interval
	HasQueue, HasPrefill, HasDec bool
	// Cost of the request: an engine span's GPU cost, a model call's price.
	Cost    cost.Cost
	HasCost bool

	held     bool // the span itself waits in the table
	released bool // its trace was released; the node stays as a record
}

// NewNode fills the parts of a node every span has.
func NewNode(span ptrace.Span, role Role) Node {
	return Node{
		ID: span.SpanID(), Parent: span.ParentSpanID(),
		Start: int64(span.StartTimestamp()), End: int64(span.EndTimestamp()),
		Kind: span.Kind(), Role: role, Name: span.Name(),
		Failed: span.Status().Code() == ptrace.StatusCodeError,
	}
}

// FromInfo copies what genai.Read found.
func (n *Node) FromInfo(in *genai.Info) {
	n.Failed = n.Failed || in.Failed
	n.AgentName, n.Conversation, n.User = in.AgentName, in.Conversation, in.User
	n.Model, n.Provider = in.Model, in.Provider
	n.Tokens = cost.Tokens{In: in.In, Cached: in.Cached, Out: in.Out, HasIn: in.HasIn, HasOut: in.HasOut, HasCch: in.HasCached}
}

// boundary reports whether a node is where its process's part of the trace
// starts: the root, or the entry of a process (a server or consumer span)
// other than an engine's request span.
func (n *Node) boundary() bool {
	if n.Parent.IsEmpty() {
		return true
	}
	return n.Role != Engine && (n.Kind == ptrace.SpanKindServer || n.Kind == ptrace.SpanKindConsumer)
}

func (n *Node) duration() int64 { return max(0, n.End-n.Start) }
