// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package genai

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func span(kv ...any) ptrace.Span {
	s := ptrace.NewSpan()
	for i := 0; i+1 < len(kv); i += 2 {
		switch v := kv[i+1].(type) {
		case string:
			s.Attributes().PutStr(kv[i].(string), v)
		case int:
			s.Attributes().PutInt(kv[i].(string), int64(v))
		case float64:
			s.Attributes().PutDouble(kv[i].(string), v)
		}
	}
	return s
}

func TestRoles(t *testing.T) {
	for _, tc := range []struct {
		name string
		span ptrace.Span
		role Role
	}{
		{"semconv agent", span(KeyOperation, "invoke_agent"), RoleAgent},
		{"semconv tool", span(KeyOperation, "execute_tool"), RoleTool},
		{"semconv chat", span(KeyOperation, "chat"), RoleModel},
		{"semconv text completion", span(KeyOperation, "text_completion"), RoleModel},
		{"semconv embeddings", span(KeyOperation, "embeddings"), RoleModel},
		{"semconv retrieval", span(KeyOperation, "retrieval"), RoleTool},
		{"traceloop task", span(KeyOperation, "execute_task", KeyTLKind, "task"), RoleStep},
		{"traceloop workflow, old release", span(KeyTLKind, "workflow", KeyTLEntityName, "graph"), RoleAgent},
		{"traceloop llm, old release", span(KeyTLRequestType, "chat"), RoleModel},
		{"openinference agent", span(KeyOIKind, "AGENT"), RoleAgent},
		{"openinference llm", span(KeyOIKind, "LLM"), RoleModel},
		{"openinference retriever", span(KeyOIKind, "RETRIEVER"), RoleTool},
		{"openinference chain", span(KeyOIKind, "CHAIN"), RoleStep},
		{"operation wins over a kind", span(KeyOIKind, "CHAIN", KeyOperation, "chat"), RoleModel},
		{"contrib handoff", span(KeyOperation, "agent_handoff"), RoleStep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in Info
			assert.True(t, Read(tc.span, &in))
			assert.Equal(t, tc.role, in.Role)
		})
	}
	var in Info
	assert.False(t, Read(span("http.request.method", "POST", "gen_ai.request.model", "m"), &in), "a model name alone says nothing")
}

func TestReadNames(t *testing.T) {
	var in Info
	Read(span(KeyOIKind, "LLM", KeyOIModel, "m", KeyOIPromptTokens, 100, KeyOICompleteToks, 7.0,
		KeyOICacheRead, 40, KeyOISession, "s", KeyOIUser, "u", KeyOIAgentName, "a", KeyOISystem, "openai"), &in)
	assert.Equal(t, Info{Role: RoleModel, Operation: "LLM", AgentName: "a", Conversation: "s", User: "u", Model: "m",
		Provider: "openai", In: 100, Out: 7, Cached: 40, HasIn: true, HasOut: true, HasCached: true}, in)

	Read(span(KeyOperation, "chat", KeyResponseModel, "r", KeyRequestModel, "q", KeyUser, "plain", KeyEndUser, "e",
		KeySystem, "sys", KeyProvider, "p", KeyInputTokens, -1), &in)
	assert.Equal(t, "q", in.Model, "the requested model first")
	assert.Equal(t, "e", in.User, "enduser.id first")
	assert.Equal(t, "p", in.Provider)
	assert.False(t, in.HasIn, "a negative count is no count")

	s := span(KeyOperation, "execute_tool")
	s.Status().SetCode(ptrace.StatusCodeError)
	Read(s, &in)
	assert.True(t, in.Failed)
}
