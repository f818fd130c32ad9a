// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package genai recognises the client-side GenAI spans of agent frameworks
// (agent runs, tool calls, model calls) as the real instrumentations write
// them, and reads what the agent assembly needs from them. The names differ
// between instrumentations; each key below is cited in
// ../../testdata/spans/README.md with the file and version it comes from:
//
//   - GenAI semantic conventions (semantic-conventions-genai model/gen-ai/
//     spans.yaml) and the OpenTelemetry contrib OpenAI Agents
//     instrumentation (openai-agents-v2 span_processor.py):
//     gen_ai.operation.name invoke_agent / execute_tool / chat /
//     text_completion / embeddings / generate_content, gen_ai.agent.name,
//     gen_ai.conversation.id, gen_ai.usage.*.
//   - OpenLLMetry (Traceloop) LangChain/LangGraph (callback_handler.py,
//     patch.py): the same gen_ai.operation.name values, and
//     traceloop.span.kind workflow / agent / task / tool on older releases;
//     llm.request.type on LLM spans of older releases.
//   - OpenInference (semconv trace/__init__.py, openai-agents _processor.py,
//     langchain _tracer.py): openinference.span.kind AGENT / TOOL / LLM /
//     EMBEDDING / RETRIEVER / CHAIN ..., agent.name, llm.model_name,
//     llm.token_count.*, session.id, user.id.
package genai // import "github.com/inferprof/inferprof/processor/agentrunprocessor/internal/genai"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Role is what a span is to an agent run.
type Role uint8

const (
	// RoleNone is a span no GenAI instrumentation wrote.
	RoleNone Role = iota
	// RoleAgent is an agent run (invoke_agent, OpenInference AGENT,
	// Traceloop agent/workflow).
	RoleAgent
	// RoleTool is a tool call, retrieval included (execute_tool,
	// OpenInference TOOL/RETRIEVER, Traceloop tool).
	RoleTool
	// RoleModel is a call to a model (chat, text_completion, embeddings,
	// generate_content; OpenInference LLM/EMBEDDING).
	RoleModel
	// RoleStep is other GenAI work: chains, tasks, guardrails, handoffs.
	RoleStep
)

// String names the role as the docs do.
func (r Role) String() string {
	switch r {
	case RoleAgent:
		return "agent"
	case RoleTool:
		return "tool"
	case RoleModel:
		return "model"
	case RoleStep:
		return "step"
	}
	return "none"
}

// Attribute keys read here and written by the instrumentations.
const (
	KeyOperation       = "gen_ai.operation.name"
	KeyAgentName       = "gen_ai.agent.name"
	KeyConversation    = "gen_ai.conversation.id"
	KeyRequestModel    = "gen_ai.request.model"
	KeyResponseModel   = "gen_ai.response.model"
	KeyProvider        = "gen_ai.provider.name"
	KeySystem          = "gen_ai.system"
	KeyInputTokens     = "gen_ai.usage.input_tokens"
	KeyOutputTokens    = "gen_ai.usage.output_tokens"
	KeyCacheRead       = "gen_ai.usage.cache_read.input_tokens"
	KeyPromptTokens    = "gen_ai.usage.prompt_tokens"     // deprecated semconv
	KeyCompletionToks  = "gen_ai.usage.completion_tokens" // deprecated semconv
	KeyTLCacheRead     = "gen_ai.usage.cache_read_input_tokens"
	KeyErrorType       = "error.type"
	KeyEndUser         = "enduser.id"
	KeyOIKind          = "openinference.span.kind"
	KeyOIAgentName     = "agent.name"
	KeyOIModel         = "llm.model_name"
	KeyOIEmbedModel    = "embedding.model_name"
	KeyOIProvider      = "llm.provider"
	KeyOISystem        = "llm.system"
	KeyOIPromptTokens  = "llm.token_count.prompt"
	KeyOICompleteToks  = "llm.token_count.completion"
	KeyOICacheRead     = "llm.token_count.prompt_details.cache_read"
	KeyOISession       = "session.id"
	KeyOIUser          = "user.id"
	KeyTLKind          = "traceloop.span.kind"
	KeyTLEntityName    = "traceloop.entity.name"
	KeyTLRequestType   = "llm.request.type"
	KeyTLUser          = "traceloop.association.properties.user_id"
	KeyUser            = "user"
	KeyAgentTimeModel  = "inferprof.agent.time_in_model" // written by an earlier inference processor
	keyTLWorkflowValue = "workflow"
)

// Info is what the assembly reads from a GenAI span. Strings point into the
// span.
type Info struct {
	Role         Role
	Operation    string // gen_ai.operation.name, else the instrumentation's kind
	AgentName    string
	Conversation string
	User         string
	Model        string
	Provider     string
	In, Out      int64
	Cached       int64
	HasIn        bool
	HasOut       bool
	HasCached    bool
	Failed       bool
	// Done: an earlier inference processor already wrote the agent figures.
	Done bool
}

// Read classifies span and fills info in one pass over its attributes. It
// returns false, leaving the rest of info unspecified, for a span no GenAI
// instrumentation wrote.
func Read(span ptrace.Span, info *Info) bool {
	if !marked(span.Attributes()) {
		return false
	}
	*info = Info{}
	var op, oiKind, tlKind, reqType, oiAgent, tlEntity string
	var sysProv, oiModel, oiProvider, respModel string
	var endUser, oiUser, tlUser, plainUser string
	var session string
	found := false
	for k, v := range span.Attributes().All() {
		switch k {
		case KeyOperation:
			op, found = str(v), true
		case KeyOIKind:
			oiKind, found = str(v), true
		case KeyTLKind:
			tlKind, found = str(v), true
		case KeyTLRequestType:
			reqType, found = str(v), true
		case KeyAgentName:
			info.AgentName = str(v)
		case KeyOIAgentName:
			oiAgent = str(v)
		case KeyTLEntityName:
			tlEntity = str(v)
		case KeyConversation:
			info.Conversation = str(v)
		case KeyOISession:
			session = str(v)
		case KeyRequestModel:
			info.Model = str(v)
		case KeyResponseModel:
			respModel = str(v)
		case KeyOIModel, KeyOIEmbedModel:
			oiModel = str(v)
		case KeyProvider:
			info.Provider = str(v)
		case KeySystem:
			sysProv = str(v)
		case KeyOIProvider:
			oiProvider = str(v)
		case KeyOISystem:
			if oiProvider == "" {
				oiProvider = str(v)
			}
		case KeyInputTokens, KeyPromptTokens, KeyOIPromptTokens:
			if !info.HasIn {
				info.In, info.HasIn = count(v)
			}
		case KeyOutputTokens, KeyCompletionToks, KeyOICompleteToks:
			if !info.HasOut {
				info.Out, info.HasOut = count(v)
			}
		case KeyCacheRead, KeyTLCacheRead, KeyOICacheRead:
			if !info.HasCached {
				info.Cached, info.HasCached = count(v)
			}
		case KeyErrorType:
			info.Failed = true
		case KeyEndUser:
			endUser = str(v)
		case KeyOIUser:
			oiUser = str(v)
		case KeyTLUser:
			tlUser = str(v)
		case KeyUser:
			plainUser = str(v)
		case KeyAgentTimeModel:
			info.Done = true
		}
	}
	if !found {
		return false
	}
	info.Role, info.Operation = role(op, oiKind, tlKind, reqType)
	if info.Role == RoleNone {
		return false
	}
	if span.Status().Code() == ptrace.StatusCodeError {
		info.Failed = true
	}
	if info.AgentName == "" {
		info.AgentName = oiAgent
	}
	if info.AgentName == "" && info.Role == RoleAgent && (tlKind == "agent" || tlKind == keyTLWorkflowValue) {
		info.AgentName = tlEntity
	}
	if info.Conversation == "" {
		info.Conversation = session
	}
	info.Model = first(info.Model, respModel, oiModel)
	info.Provider = first(info.Provider, sysProv, oiProvider)
	info.User = first(endUser, oiUser, tlUser, plainUser)
	return true
}

// marked reports whether the attributes hold one of the keys that make a
// GenAI span, in a pass that mostly compares lengths: most spans that reach
// here are not GenAI spans, and their keys are not read further.
func marked(attrs pcommon.Map) bool {
	for k := range attrs.All() {
		switch len(k) {
		case len(KeyOperation):
			if k == KeyOperation {
				return true
			}
		case len(KeyOIKind):
			if k == KeyOIKind {
				return true
			}
		case len(KeyTLKind):
			if k == KeyTLKind {
				return true
			}
		case len(KeyTLRequestType):
			if k == KeyTLRequestType {
				return true
			}
		}
	}
	return false
}

// role maps the instrumentations' kinds to a role: gen_ai.operation.name
// first (semconv, the contrib OpenAI Agents processor and Traceloop 0.62
// write it), then OpenInference's span kind, then Traceloop's older kinds.
func role(op, oiKind, tlKind, reqType string) (Role, string) {
	switch op {
	case "invoke_agent":
		return RoleAgent, op
	case "execute_tool", "retrieval", "vector_db_retrieve":
		return RoleTool, op
	case "chat", "text_completion", "embeddings", "generate_content", "transcription", "speech_generation":
		return RoleModel, op
	case "":
	default:
		return RoleStep, op
	}
	switch oiKind {
	case "AGENT":
		return RoleAgent, oiKind
	case "TOOL", "RETRIEVER", "RERANKER":
		return RoleTool, oiKind
	case "LLM", "EMBEDDING":
		return RoleModel, oiKind
	case "":
	default:
		return RoleStep, oiKind
	}
	switch tlKind {
	case "agent", keyTLWorkflowValue:
		return RoleAgent, tlKind
	case "tool":
		return RoleTool, tlKind
	case "":
	default:
		return RoleStep, tlKind
	}
	switch reqType {
	case "chat", "completion", "embedding":
		return RoleModel, reqType
	case "":
		return RoleNone, ""
	}
	return RoleStep, reqType
}

func str(v pcommon.Value) string {
	if v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
}

// count reads a non-negative whole token count.
func count(v pcommon.Value) (int64, bool) {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		if v.Int() >= 0 {
			return v.Int(), true
		}
	case pcommon.ValueTypeDouble:
		if f := v.Double(); f >= 0 && f < 1<<53 && f == float64(int64(f)) {
			return int64(f), true
		}
	}
	return 0, false
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
