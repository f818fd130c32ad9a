"""A fake of vllm.v1.engine.core, shaped like vLLM v1 (late 2025).

EngineCore.step schedules through scheduler.schedule(), "executes" the model
and returns (dict[client_index, EngineCoreOutputs], model_executed), binding
self.step_fn in __init__ exactly as vLLM does. The scheduler admits waiting
requests with their whole prompt (one prefill step that also yields the first
token), then decodes one token a step, or several with speculative decoding.
Requests can be preempted on a chosen step and are then recomputed.

Prompt and output token values exist only as guarded containers: reading a
value (rather than the length) raises, so tests prove the hook never does.
"""

import collections
import time


class Guarded(list):
    """A token list whose length may be read but whose values may not."""

    reads = 0

    def _deny(self, *a, **k):
        Guarded.reads += 1
        raise AssertionError("token values were read")

    __iter__ = _deny
    __getitem__ = _deny
    __contains__ = _deny
    __repr__ = _deny


class EngineCoreOutput:
    __slots__ = ("request_id", "new_token_ids", "finish_reason")

    def __init__(self, request_id, new_token_ids, finish_reason=None):
        self.request_id = request_id
        self.new_token_ids = new_token_ids
        self.finish_reason = finish_reason


class EngineCoreOutputs:
    __slots__ = ("outputs", "scheduler_stats", "engine_index")

    def __init__(self, outputs, engine_index=0):
        self.outputs = outputs
        self.scheduler_stats = None
        self.engine_index = engine_index


class NewRequestData:
    def __init__(self, req):
        self.req_id = req.request_id
        self._req = req

    @property
    def prompt_token_ids(self):
        return self._req.prompt_token_ids


class CachedRequestData:
    def __init__(self, req_ids, num_computed_tokens):
        self.req_ids = req_ids
        self.num_computed_tokens = num_computed_tokens


class SchedulerOutput:
    def __init__(self):
        self.scheduled_new_reqs = []
        self.scheduled_cached_reqs = CachedRequestData([], [])
        self.num_scheduled_tokens = {}
        self.total_num_scheduled_tokens = 0
        self.scheduled_spec_decode_tokens = {}
        self.preempted_req_ids = set()
        self.finished_req_ids = set()


class Request:
    def __init__(self, request_id, prompt_len, max_tokens, external_req_id=None,
                 accepted=None):
        self.request_id = request_id
        self.external_req_id = external_req_id
        self.prompt_token_ids = Guarded([0] * prompt_len)
        self.num_prompt_tokens = prompt_len
        self.num_computed_tokens = 0
        self.max_tokens = max_tokens
        self.num_output_tokens = 0
        # Tokens per decode step with speculative decoding (cycled), or None.
        self.accepted = accepted
        self.decode_steps = 0
        self.status = "WAITING"


class KVCacheManager:
    def __init__(self, scheduler, blocks):
        self._scheduler = scheduler
        self._blocks = blocks

    @property
    def usage(self):
        used = sum(r.num_computed_tokens for r in self._scheduler.running)
        return min(1.0, used / float(self._blocks))


class Scheduler:
    def __init__(self, max_running=8, kv_tokens=4096, preempt_at=None):
        self.requests = {}
        self.waiting = collections.deque()
        self.running = []
        self.kv_cache_manager = KVCacheManager(self, kv_tokens)
        self.max_running = max_running
        # step number -> request id to preempt on that step
        self.preempt_at = dict(preempt_at or {})
        self.steps = 0

    def add_request(self, req):
        self.requests[req.request_id] = req
        self.waiting.append(req)

    def has_requests(self):
        return bool(self.waiting or self.running)

    def schedule(self):
        self.steps += 1
        so = SchedulerOutput()
        victim = self.preempt_at.pop(self.steps, None)
        if victim is not None:
            req = self.requests[victim]
            self.running.remove(req)
            req.num_computed_tokens = 0
            req.status = "PREEMPTED"
            self.waiting.appendleft(req)
            so.preempted_req_ids.add(victim)
        for req in self.running:
            if req.accepted:
                k = req.accepted[req.decode_steps % len(req.accepted)]
                so.num_scheduled_tokens[req.request_id] = k
                so.scheduled_spec_decode_tokens[req.request_id] = [0] * (k - 1)
            else:
                so.num_scheduled_tokens[req.request_id] = 1
            so.scheduled_cached_reqs.req_ids.append(req.request_id)
            so.scheduled_cached_reqs.num_computed_tokens.append(req.num_computed_tokens)
        skipped = []
        while self.waiting and len(self.running) < self.max_running:
            req = self.waiting.popleft()
            if req.request_id == victim:
                skipped.append(req)  # not back in the step that preempted it
                continue
            req.status = "RUNNING"
            self.running.append(req)
            so.scheduled_new_reqs.append(NewRequestData(req))
            # A recomputed request prefills its prompt and earlier outputs.
            so.num_scheduled_tokens[req.request_id] = req.num_prompt_tokens + req.num_output_tokens
        self.waiting.extendleft(skipped)
        so.total_num_scheduled_tokens = sum(so.num_scheduled_tokens.values())
        return so

    def update_from_output(self, so, model_output):
        outs = []
        for rid, n_sched in so.num_scheduled_tokens.items():
            req = self.requests[rid]
            req.num_computed_tokens += n_sched
            if req.accepted and rid in so.scheduled_spec_decode_tokens:
                n = n_sched
                req.decode_steps += 1
            else:
                n = 1
            n = min(n, req.max_tokens - req.num_output_tokens)
            req.num_output_tokens += n
            finish = None
            if req.num_output_tokens >= req.max_tokens:
                finish = "length"
                self.running.remove(req)
                del self.requests[rid]
            outs.append(EngineCoreOutput(rid, Guarded([0] * n), finish))
        return {0: EngineCoreOutputs(outs)}


class Executor:
    def __init__(self, step_time=0.0):
        self.step_time = step_time

    def execute_model(self, so):
        if self.step_time:
            time.sleep(self.step_time)
        return object()


class EngineCore:
    """Inner loop of the fake engine, shaped like vLLM's."""

    def __init__(self, scheduler, step_time=0.0, batch_queue_size=1, engine_index=0):
        self.scheduler = scheduler
        self.model_executor = Executor(step_time)
        self.engine_index = engine_index
        self.batch_queue_size = batch_queue_size
        self.batch_queue = collections.deque() if batch_queue_size > 1 else None
        self.step_fn = self.step if self.batch_queue is None else self.step_with_batch_queue

    def step(self):
        if not self.scheduler.has_requests():
            return {}, False
        so = self.scheduler.schedule()
        model_output = self.model_executor.execute_model(so)
        outputs = self.scheduler.update_from_output(so, model_output)
        return outputs, so.total_num_scheduled_tokens > 0

    def step_with_batch_queue(self):
        """Fills the queue first; returns None outputs while a batch is only scheduled."""
        bq = self.batch_queue
        if self.scheduler.has_requests() and len(bq) < self.batch_queue_size - 1:
            so = self.scheduler.schedule()
            bq.appendleft((self.model_executor.execute_model(so), so))
            return None, True
        if not bq:
            if not self.scheduler.has_requests():
                return None, False
            so = self.scheduler.schedule()
            bq.appendleft((self.model_executor.execute_model(so), so))
        model_output, so = bq.pop()
        return self.scheduler.update_from_output(so, model_output), True


class EngineCoreProc(EngineCore):
    """The background-process subclass; inherits step as in vLLM."""
