# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Fake of vllm/v1/core/sched/scheduler.py (vllm-project/vllm @00024d31).
Checked against vLLM 0.32.0 (the classes the hook reads: tools/hook_compat.py --fakes).

The parts the hook depends on follow the real Scheduler:
- schedule(): running requests first, each getting
  num_tokens_with_spec + num_output_placeholders - num_computed_tokens
  tokens within the token budget; when KV space runs out the last running
  request is preempted (status PREEMPTED, num_computed_tokens 0, back to
  the head of waiting); waiting requests are admitted only in a step
  without preemptions, WAITING ones as new, PREEMPTED ones as resumed
  (scheduled_cached_reqs.resumed_req_ids), WAITING_FOR_REMOTE_KVS ones
  skipped; so a schedule() can come back empty while requests wait.
- finished_req_ids of an output is the set of requests that finished since
  the previous schedule(), aborts included; _update_after_schedule then
  replaces the set and advances num_computed_tokens.
- update_from_output(scheduler_output, model_runner_output) appends the
  sampled tokens, skips requests that finished (or were aborted) while the
  batch ran, and returns dict[client_index, EngineCoreOutputs].
- finish_requests(ids, FINISHED_ABORTED) is how EngineCore aborts.

KV cache capacity is counted in tokens (kv_tokens), not blocks.

For the tests, every batch is also recorded as ground truth, from the
scheduler's own bookkeeping rather than from SchedulerOutput fields:
self.truth gets one dict per update_from_output, in order.
"""

import collections

from guard import grow
from vllm.v1.core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput
from vllm.v1.engine import EngineCoreOutput, EngineCoreOutputs
from vllm.v1.request import RequestStatus


class KVCacheManager:
    def __init__(self, scheduler, capacity):
        self._scheduler = scheduler
        self.capacity = capacity

    @property
    def usage(self):
        return min(1.0, self._scheduler.kv_used() / float(self.capacity))


class Scheduler:
    def __init__(self, max_num_seqs=8, max_num_batched_tokens=2048, kv_tokens=4096):
        self.requests = {}
        self.waiting = collections.deque()
        self.running = []
        self.finished_req_ids = set()
        self.prev_step_scheduled_req_ids = set()
        self.max_num_running_reqs = max_num_seqs
        self.max_num_scheduled_tokens = max_num_batched_tokens
        self.kv_cache_manager = KVCacheManager(self, kv_tokens)
        # Ground truth, see the module doc.
        self.truth = []
        self._pending_truth = {}
        self.external = {}  # engine id -> API id, for the truth only

    # -- requests ---------------------------------------------------------

    def add_request(self, request):
        self.requests[request.request_id] = request
        self.waiting.append(request)

    def has_requests(self):
        return bool(self.waiting or self.running or self.finished_req_ids)

    def finish_requests(self, request_ids, finished_status):
        if request_ids is None:
            request_ids = list(self.requests)
        for rid in request_ids:
            req = self.requests.get(rid)
            if req is None or req.is_finished():
                continue
            if req.status == RequestStatus.RUNNING:
                self.running.remove(req)
            else:
                self.waiting.remove(req)
            req.status = finished_status
            self._free_request(req)

    def _free_request(self, req):
        self.finished_req_ids.add(req.request_id)
        del self.requests[req.request_id]

    def kv_used(self):
        return sum(r.num_computed_tokens for r in self.running)

    def _allocate(self, req, n):
        return self.kv_used() + n <= self.kv_cache_manager.capacity

    def _preempt_request(self, req):
        req.status = RequestStatus.PREEMPTED
        req.num_computed_tokens = 0
        req.spec_token_ids = []
        req.num_preemptions += 1
        req.prefilled = False
        self.waiting.appendleft(req)

    # -- schedule ---------------------------------------------------------

    def schedule(self, throttle_prefills=False):
        new, resumed, running, preempted = [], [], [], []
        num_scheduled = {}
        spec = {}
        budget = self.max_num_scheduled_tokens
        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            if (req.num_output_placeholders > 0
                    and req.num_computed_tokens + 2 - req.num_output_placeholders
                    >= req.num_prompt_tokens + req.max_tokens):
                i += 1  # async: the step in flight reaches max_tokens
                continue
            n = min(req.num_tokens_with_spec + req.num_output_placeholders - req.num_computed_tokens, budget)
            if n <= 0:
                i += 1
                continue
            while not self._allocate(req, n):
                victim = self.running.pop()
                if victim in running:
                    running.remove(victim)
                    budget += num_scheduled.pop(victim.request_id)
                    spec.pop(victim.request_id, None)
                self._preempt_request(victim)
                preempted.append(victim)
                if victim is req:
                    break
            if req in preempted:
                break
            running.append(req)
            num_scheduled[req.request_id] = n
            budget -= n
            i += 1
            if req.spec_token_ids:
                k = n + req.num_computed_tokens - req.num_tokens - req.num_output_placeholders
                if k > 0:
                    spec[req.request_id] = req.spec_token_ids[:k]
                req.spec_token_ids = []
        if not preempted and not throttle_prefills:
            skipped = []
            while self.waiting and budget > 0 and len(self.running) < self.max_num_running_reqs:
                req = self.waiting[0]
                if req.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
                    if req.remote_kv_wait > 0:
                        req.remote_kv_wait -= 1
                        skipped.append(self.waiting.popleft())
                        continue
                    req.status = RequestStatus.PREEMPTED if req.num_preemptions else RequestStatus.WAITING
                n = min(req.num_tokens - req.num_computed_tokens, budget)
                if not self._allocate(req, n):
                    break
                self.waiting.popleft()
                self.running.append(req)
                (new if req.status == RequestStatus.WAITING else resumed).append(req)
                req.status = RequestStatus.RUNNING
                num_scheduled[req.request_id] = n
                budget -= n
            self.waiting.extendleft(reversed(skipped))

        cached = CachedRequestData.make_empty()
        for req in running + resumed:
            cached.req_ids.append(req.request_id)
            cached.num_computed_tokens.append(req.num_computed_tokens)
            cached.num_output_tokens.append(req.num_output_tokens + req.num_output_placeholders)
        cached.resumed_req_ids = {r.request_id for r in resumed}
        so = SchedulerOutput(
            scheduled_new_reqs=[NewRequestData(r.request_id, r.prompt_token_ids, r.num_computed_tokens)
                                for r in new],
            scheduled_cached_reqs=cached,
            num_scheduled_tokens=num_scheduled,
            total_num_scheduled_tokens=sum(num_scheduled.values()),
            scheduled_spec_decode_tokens=spec,
            finished_req_ids=self.finished_req_ids,
            preempted_req_ids={r.request_id for r in preempted},
        )
        self._record_schedule(so, new + resumed + running, preempted, resumed)
        self.prev_step_scheduled_req_ids = set(num_scheduled)
        self._update_after_schedule(so)
        return so

    def get_grammar_bitmask(self, so):
        """The grammar bitmask of so's structured-output requests: CPU work
        (StructuredOutputManager.grammar_bitmask); none here."""
        return None

    def _update_after_schedule(self, so):
        for rid, n in so.num_scheduled_tokens.items():
            req = self.requests[rid]
            req.num_computed_tokens += n
            req.is_prefill_chunk = req.num_computed_tokens < req.num_tokens + req.num_output_placeholders
            if not req.is_prefill_chunk:
                req.prefilled = True
        # Not clear(): the set is the one this output carries.
        self.finished_req_ids = set()

    def _record_schedule(self, so, scheduled, preempted, resumed):
        ext = self.external
        phases = [getattr(r, "prefilled", False) for r in scheduled]
        self._pending_truth[id(so)] = {
            "prefill": phases.count(False),
            "decode": phases.count(True),
            "scheduled_tokens": so.total_num_scheduled_tokens,
            "preempted": sorted(ext.get(r.request_id, r.request_id) for r in preempted),
            "resumed": sorted(ext.get(r.request_id, r.request_id) for r in resumed),
        }

    def note_batch(self, so, n):
        """The executor numbered so's batch n (ground truth only)."""
        t = self._pending_truth.get(id(so))
        if t is not None:
            t["batch"] = n

    def update_draft_token_ids(self, drafts):
        for rid, ids in drafts.items():
            req = self.requests.get(rid)
            if req is not None and not req.is_finished() and not req.is_prefill_chunk:
                req.spec_token_ids = ids

    # -- update -----------------------------------------------------------

    def _update_request_with_output(self, req, new_token_ids):
        n = len(new_token_ids)
        room = req.max_tokens - req.num_output_tokens
        stopped = n >= room
        if stopped:
            del new_token_ids[room:]
            req.status = RequestStatus.FINISHED_LENGTH_CAPPED
        grow(req._output_token_ids, len(new_token_ids))
        return new_token_ids, stopped

    def update_from_output(self, scheduler_output, model_runner_output):
        outputs = collections.defaultdict(list)
        stopped_reqs = set()
        sampled = model_runner_output.sampled_token_ids
        for rid, n_sched in scheduler_output.num_scheduled_tokens.items():
            req = self.requests.get(rid)
            if req is None or req.is_finished():
                continue  # finished or aborted while the batch ran
            idx = model_runner_output.req_id_to_index[rid]
            generated = sampled[idx] if sampled else []
            drafts = scheduler_output.scheduled_spec_decode_tokens.get(rid)
            if drafts and len(generated):
                rejected = len(drafts) - (len(generated) - 1)
                req.num_computed_tokens -= rejected
                if req.num_output_placeholders > 0:
                    req.num_output_placeholders -= rejected
            new_ids, stopped = generated, False
            if len(new_ids):
                new_ids, stopped = self._update_request_with_output(req, new_ids)
            finish = None
            if stopped:
                finish = req.get_finished_reason()
                self._free_request(req)
                stopped_reqs.add(req)
            if len(new_ids) or stopped:
                outputs[req.client_index].append(EngineCoreOutput(rid, new_ids, finish))
        if stopped_reqs:
            self.running = [r for r in self.running if r not in stopped_reqs]
            # A request preempted while its batch ran can still finish.
            for r in stopped_reqs:
                if r in self.waiting:
                    self.waiting.remove(r)
        out = {ci: EngineCoreOutputs(outs) for ci, outs in outputs.items()}
        self._record_update(scheduler_output, out)
        return out

    def _record_update(self, so, out):
        t = self._pending_truth.pop(id(so))
        ids, toks = [], []
        for eco in out.values():
            for o in eco.outputs:
                if len(o.new_token_ids):
                    ids.append(self.external.get(o.request_id, o.request_id))
                    toks.append(len(o.new_token_ids))
        t["request_ids"], t["request_tokens"] = ids, toks
        self.truth.append(t)


class AsyncScheduler(Scheduler):
    """Fake of vllm/v1/core/sched/async_scheduler.py (@014b2350): a request
    that will sample in the scheduled step gets an output placeholder, so it
    can be scheduled again before its token is known."""

    def _update_after_schedule(self, so):
        super()._update_after_schedule(so)
        for rid in so.num_scheduled_tokens:
            req = self.requests[rid]
            if req.is_prefill_chunk:
                continue
            # The grammar needs the token still in flight: sampling waits
            # for the previous batch's update (core.py's deferred branch).
            so.pending_structured_output_tokens |= (
                req.use_structured_output and req.num_output_placeholders > 0)
            req.num_output_placeholders += 1 + len(so.scheduled_spec_decode_tokens.get(rid, ()))

    def _update_request_with_output(self, req, new_token_ids):
        new_token_ids, stopped = super()._update_request_with_output(req, new_token_ids)
        req.num_output_placeholders = max(0, req.num_output_placeholders - len(new_token_ids))
        return new_token_ids, stopped
