// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector // import "github.com/inferprof/inferprof/connector/inferencemetricsconnector"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprof/inferprof/connector/inferencemetricsconnector/internal/aggregate"
	"github.com/inferprof/inferprof/internal/names"
)

// extras are the agent-run and cost figures of a span. Strings point into it.
type extras struct {
	cost                  float64
	costOK                bool
	currency              string
	model, provider, user string
	agent, conversation   string
	out                   int64
	outOK                 bool
	model0, tools, other  float64
	turn                  int64
	turnOK                bool
}

// readExtras reads, in one pass, the names the cost and agent series use:
// the semconv names first, then the OpenInference and older ones the
// processor leaves as the instrumentation wrote them.
func readExtras(span ptrace.Span, x *extras, n *counts) {
	var respModel, oiModel, system, oiProvider, userID, plainUser, session string
	for k, v := range span.Attributes().All() {
		switch k {
		case names.AttrRequestCost:
			x.costOK = seconds(v, &x.cost, 1, n) != 0 // any non-negative finite number
		case names.AttrRequestCostCurrency:
			x.currency = str(v, n)
		case names.AttrRequestModel:
			x.model = str(v, n)
		case "gen_ai.response.model":
			respModel = str(v, n)
		case "llm.model_name":
			oiModel = str(v, n)
		case names.AttrProviderName:
			x.provider = str(v, n)
		case "gen_ai.system":
			system = str(v, n)
		case "llm.provider":
			oiProvider = str(v, n)
		case names.AttrEndUserID:
			x.user = str(v, n)
		case "user.id":
			userID = str(v, n)
		case "user":
			plainUser = str(v, n)
		case names.AttrAgentName:
			x.agent = str(v, n)
		case names.AttrConversationID:
			x.conversation = str(v, n)
		case "session.id":
			session = str(v, n)
		case names.AttrOutputTokens, "gen_ai.usage.completion_tokens", "llm.token_count.completion":
			if !x.outOK {
				x.outOK = count(v, &x.out, 1, n) != 0
			}
		case names.AttrAgentTimeInModel:
			seconds(v, &x.model0, 1, n)
		case names.AttrAgentTimeInTools:
			seconds(v, &x.tools, 1, n)
		case names.AttrAgentTimeInOther:
			seconds(v, &x.other, 1, n)
		case names.AttrAgentTurn:
			x.turnOK = count(v, &x.turn, 1, n) != 0
		}
	}
	x.model = firstOf(x.model, respModel, oiModel)
	x.provider = firstOf(x.provider, system, oiProvider)
	x.user = firstOf(x.user, userID, plainUser)
	x.conversation = firstOf(x.conversation, session)
}

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// aggregateAgentCost adds a priced request to its cost series and an agent
// run to its agent series, and notes a conversation's turn.
func (c *metricsConnector) aggregateAgentCost(now pcommon.Timestamp, resKey aggregate.ResourceKey, resAttrs pcommon.Map, span ptrace.Span, r *request, n *counts) {
	var x extras
	readExtras(span, &x, n)
	if r.is(hasCost) && x.costOK && x.currency != "" {
		s := c.seriesFor(now, resKey, resAttrs, aggregate.KindCost, n,
			kv{names.AttrRequestModel, x.model}, kv{names.AttrProviderName, x.provider},
			kv{names.AttrEndUserID, x.user}, kv{names.AttrAgentName, x.agent}, kv{names.AttrCostCurrency, x.currency})
		s.Cost.Cost += x.cost
		s.Cost.Requests++
		if x.outOK {
			s.Cost.OutputTokens += uint64(x.out)
			s.Cost.OutputCost += x.cost
		}
		s.Touch(now)
	}
	if !r.is(hasAgent) {
		return
	}
	agentName := x.agent
	if agentName == "" {
		agentName = span.Name()
	}
	errType := r.errType
	if errType == "" && span.Status().Code() == ptrace.StatusCodeError {
		errType = names.ErrorTypeOther
	}
	s := c.seriesFor(now, resKey, resAttrs, aggregate.KindAgent, n, kv{names.AttrAgentName, agentName}, kv{names.AttrErrorType, errType})
	a := s.Agent
	a.Runs++
	a.Duration.ObserveExemplar(spanSeconds(span), span.EndTimestamp(), span.TraceID(), span.SpanID())
	a.Model.Observe(x.model0)
	a.Tools.Observe(x.tools)
	a.Other.Observe(x.other)
	s.Touch(now)
	if x.turnOK && x.conversation != "" {
		if early := c.convs.see(x.conversation, agentName, x.turn, resKey, resAttrs, c.clock.Now()); early != nil {
			c.convs.release(early, c.observeTurn)
			n.earlyConversations++
		}
	}
}

type kv struct{ k, v string }

// series finds or makes the series of kind with the given attributes
// (empty values left out) under the resource.
func (c *metricsConnector) seriesFor(now pcommon.Timestamp, resKey aggregate.ResourceKey, resAttrs pcommon.Map, kind aggregate.Kind, n *counts, attrs ...kv) *aggregate.Series {
	st := c.store
	st.BeginKey(resKey, kind)
	for _, a := range attrs {
		st.AddKeyPart(a.v)
	}
	s := st.Lookup()
	if s != nil {
		return s
	}
	s, fresh := st.Create(now, resKey, resAttrs, kind)
	if !fresh {
		n.overflow++
		return s
	}
	for _, a := range attrs {
		putNonEmpty(s.Attributes(), a.k, a.v)
	}
	return s
}

// observeTurns moves ended conversations (all of them at shutdown) into
// their turn series. The caller holds the lock.
func (c *metricsConnector) observeTurns(all bool) {
	c.convs.ended(c.clock.Now(), all, c.observeTurn)
}

func (c *metricsConnector) observeTurn(st *convState, resAttrs pcommon.Map) {
	ts := pcommon.NewTimestampFromTime(c.clock.Now())
	var n counts
	s := c.seriesFor(ts, st.res, resAttrs, aggregate.KindTurns, &n, kv{names.AttrAgentName, st.agent})
	s.Turn.Turns.Observe(float64(st.turns))
	s.Turn.Conversations++
	s.Touch(ts)
	c.turnOverflow += n.overflow
}
