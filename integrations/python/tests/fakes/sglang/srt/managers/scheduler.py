"""A fake of sglang.srt.managers.scheduler, shaped like SGLang's Scheduler.

event_loop_normal runs get_next_batch_to_run, run_batch and
process_batch_result in turn; event_loop_overlap processes the previous
batch's result after launching the next one, as SGLang's overlap scheduler
does. process_batch_result appends to req.output_ids; token values are
guarded as in the vLLM fake.
"""

import collections

from vllm.v1.engine.core import Guarded  # noqa: F401  (shared guard type)


class ForwardMode:
    EXTEND = 1
    DECODE = 2
    IDLE = 3

    def __init__(self, mode):
        self.mode = mode

    def is_extend(self):
        return self.mode == ForwardMode.EXTEND

    def is_decode(self):
        return self.mode == ForwardMode.DECODE

    def is_idle(self):
        return self.mode == ForwardMode.IDLE


class Req:
    def __init__(self, rid, prompt_len, max_new_tokens, accepted=None):
        self.rid = rid
        self.origin_input_ids = Guarded([0] * prompt_len)
        self.output_ids = Guarded([])
        self.max_new_tokens = max_new_tokens
        self.finished_reason = None
        self.accepted = accepted
        self.decode_steps = 0

    def finished(self):
        return self.finished_reason is not None


class ScheduleBatch:
    def __init__(self, reqs, mode):
        self.reqs = list(reqs)
        self.forward_mode = ForwardMode(mode)
        self.decoding_reqs = None
        self.extend_num_tokens = sum(len(r.origin_input_ids) for r in reqs) \
            if mode == ForwardMode.EXTEND else 0

    def batch_size(self):
        return len(self.reqs)


class Allocator:
    def __init__(self, sched, size):
        self._sched = sched
        self.size = size

    def available_size(self):
        used = sum(len(r.origin_input_ids) + len(r.output_ids) for r in self._sched.running_batch.reqs)
        return self.size - used


class TreeCache:
    def evictable_size(self):
        return 0


class Scheduler:
    def __init__(self, tp_rank=0, dp_rank=None, kv_tokens=4096):
        self.tp_rank = tp_rank
        self.dp_rank = dp_rank
        self.waiting_queue = []
        self.running_batch = ScheduleBatch([], ForwardMode.DECODE)
        self.max_total_num_tokens = kv_tokens
        self.token_to_kv_pool_allocator = Allocator(self, kv_tokens)
        self.tree_cache = TreeCache()
        self.last_batch = None

    def add(self, req):
        self.waiting_queue.append(req)

    def get_next_batch_to_run(self):
        self.running_batch.reqs = [r for r in self.running_batch.reqs if not r.finished()]
        if self.waiting_queue:
            new = self.waiting_queue
            self.waiting_queue = []
            return ScheduleBatch(new, ForwardMode.EXTEND)
        if self.running_batch.reqs:
            return ScheduleBatch(self.running_batch.reqs, ForwardMode.DECODE)
        return None

    def run_batch(self, batch):
        return {"batch": batch}

    def process_batch_result(self, batch, result):
        for r in batch.reqs:
            if batch.forward_mode.is_decode() and r.accepted:
                n = r.accepted[r.decode_steps % len(r.accepted)]
                r.decode_steps += 1
            else:
                n = 1
            n = min(n, r.max_new_tokens - len(r.output_ids))
            list.extend(r.output_ids, [0] * n)
            if len(r.output_ids) >= r.max_new_tokens:
                r.finished_reason = "length"
        if batch.forward_mode.is_extend():
            self.running_batch.reqs.extend(r for r in batch.reqs if not r.finished())

    def event_loop_normal(self, max_steps):
        for _ in range(max_steps):
            batch = self.get_next_batch_to_run()
            if not batch:
                return
            result = self.run_batch(batch)
            self.process_batch_result(batch, result)
            self.last_batch = batch

    def event_loop_overlap(self, max_steps):
        pending = collections.deque()
        for _ in range(max_steps):
            batch = self.get_next_batch_to_run()
            if batch:
                pending.append((batch, self.run_batch(batch)))
            if pending and (len(pending) > 1 or not batch):
                b, res = pending.popleft()
                self.process_batch_result(b, res)
            elif not batch:
                return
