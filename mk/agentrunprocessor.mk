# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# agent_run processor (processor/agentrunprocessor, issue 28: agent runs and
# cost, split out of inference).

.PHONY: bench-agents
BENCH_TARGETS += bench-agents

## bench-agents: the agent assembly's cost on spans no engine or GenAI
## instrumentation wrote, assembly on against off in the same run, and per
## whole agent run.
bench-agents: $(BENCHSTAT)
	@mkdir -p $(BENCH_OUT)
	$(GO) test -run '^$$' -bench '^(BenchmarkNonAgentSpans|BenchmarkAgentRun)$$' -cpu 1 -count $(BENCHCOUNT) ./processor/agentrunprocessor/ | tee $(BENCH_OUT)/agents.txt
	$(BENCHSTAT) -col /agents -filter '.name:NonAgentSpans' $(BENCH_OUT)/agents.txt
