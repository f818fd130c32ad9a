// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate

// The agent and cost families: agent runs (by agent name and error), the
// cost of priced requests (by model, provider, user, agent and currency) and
// finished conversations (by agent name). Each series holds one of them.

// BoundsAgentRun are for agent runs and their parts: seconds to many
// minutes.
var BoundsAgentRun = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640}

// BoundsTurns count turns per conversation.
var BoundsTurns = []float64{1, 2, 3, 4, 5, 7, 10, 15, 20, 30, 50, 100}

func (st *Store) newAgentStats() *AgentStats {
	ex := st.set.MaxExemplars
	return &AgentStats{
		Duration: newHistogram(BoundsAgentRun, ex),
		Model:    newHistogram(BoundsAgentRun, 0),
		Tools:    newHistogram(BoundsAgentRun, 0),
		Other:    newHistogram(BoundsAgentRun, 0),
	}
}

func (st *Store) newTurnStats() *TurnStats {
	return &TurnStats{Turns: newHistogram(BoundsTurns, 0)}
}

// newFamily gives a new series the stats of its kind.
func (st *Store) newFamily(s *Series, kind Kind) {
	switch kind {
	case KindAgent:
		s.Agent = st.newAgentStats()
	case KindCost:
		s.Cost = &CostStats{}
	case KindTurns:
		s.Turn = st.newTurnStats()
	}
}

// takeFamily moves a delta series' agent, cost or turn interval into e and
// gives the series empty stats.
func (st *Store) takeFamily(s *Series, e *txEntry) {
	e.agent, e.cost, e.turn = s.Agent, s.Cost, s.Turn
	if s.Agent != nil {
		s.Agent = st.newAgentStats()
	}
	if s.Cost != nil {
		s.Cost = &CostStats{}
	}
	if s.Turn != nil {
		s.Turn = st.newTurnStats()
	}
}

// restoreFamily merges a refused interval back.
func restoreFamily(s *Series, e txEntry) {
	if e.agent != nil {
		s.Agent.merge(e.agent)
	}
	if e.cost != nil {
		s.Cost.merge(e.cost)
	}
	if e.turn != nil {
		s.Turn.merge(e.turn)
	}
}

// clearFamilyExemplars drops a cumulative series' exemplars after a flush.
func clearFamilyExemplars(s *Series) {
	if s.Agent != nil {
		s.Agent.Duration.exemplars = s.Agent.Duration.exemplars[:0]
	}
}
