# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""SGLang's scheduler loops for bench_hook.py: one steady decode step of n
requests, each getting one token, with the engine's own work left out, so
that the difference between the hooked and the bare step is the hook's.

Every loop calls the methods the hook wraps in the order SGLang's own loop
calls them, on the fakes' ScheduleBatch and Req (tests/fakes/sglang):

  sglang-overlap  Scheduler.event_loop_overlap, SGLang's default, at
                  python/sglang/srt/managers/scheduler.py
                  @0003215cf1464f44b389cd0b18d0b4c56f2a3da6: get_next_batch_to_run
                  (which calls update_running_batch for a decode batch),
                  is_disable_overlap_for_batch, run_batch(N),
                  result_queue.append((batch.copy(), result)),
                  process_batch_result(copy of N-1, result of N-1),
                  launch_batch_sample_if_needed(result of N, N);
  sglang-normal   Scheduler.event_loop_normal, same file: get_next_batch_to_run,
                  run_batch(N), process_batch_result(N, result);
  sglang-thread   the overlap loop of the forward-thread era, scheduler.py
                  @0045f98eb3b122ae69e82722b3e0ff5392547f7a: get_next_batch_to_run()
                  and update_running_batch() take no batch; run_batch hands
                  (model_worker_batch, future_token_ids_ct) to
                  TpModelWorkerClient.input_queue (tp_worker_overlap_thread.py,
                  same commit), whose forward thread takes it off with
                  input_queue.get(); the loop has no launch_batch_sample_if_needed.
                  The hook gives that module a Queue that times each batch's
                  iteration of the forward thread (sglang.patch_overlap_thread);
                  here the forward thread's get runs inline after run_batch, on
                  the scheduler thread, so that time.process_time sees it (CPU
                  time of the process counts every thread; what a second thread
                  would add in context switches is not the hook's).

Steady decode: nothing waits (get_new_batch_prefill returns None at once),
nothing finished and the KV pool has room, so update_running_batch returns
the batch as it came. What is left out of the engine's work (receiving
requests, filtering, KV slots, the forward, the D2H copy and its wait,
streaming output) costs the same with and without the hook; leaving it out
keeps the bare step small, so its noise does not hide the hook's cost.
process_batch_result keeps the one piece of it the hook reads: each
request's output_ids grows by one token. Request ids are 32 hex digits:
GenerateReqInput (managers/io_struct.py) sets rid = uuid.uuid4().hex when
the client gives none.
"""

import collections
import queue
import types

LOOPS = ("sglang-overlap", "sglang-normal", "sglang-thread")


def make_scheduler(n, loop):
    """A factory: make(hooked) is a scheduler of loop ("sglang-overlap",
    "sglang-normal" or "sglang-thread") whose running batch decodes n
    requests, with the hook's wrappers on its class if hooked. Its step()
    runs one iteration of the loop; between() trims the output lists, for
    a timeit setup."""
    if loop not in LOOPS:
        raise ValueError("unknown SGLang loop %r" % (loop,))
    from sglang.srt.managers.schedule_batch import Req, ScheduleBatch
    from sglang.srt.managers.scheduler import GenerationBatchResult, NextBatchPlan, ServerArgs
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    overlap = loop != "sglang-normal"

    def requests():
        return [Req("%032x" % i, 100, 1 << 30) for i in range(n)]

    class Allocator:
        """available_size is O(1) in SGLang: the lengths of two tensors
        (mem_cache/allocator.py @02e29cb1, TokenToKVPoolAllocator)."""

        def __init__(self, free):
            self.free = free

        def available_size(self):
            return self.free

    class TreeCache:
        def evictable_size(self):
            return 0  # RadixCache keeps a running evictable_size_

    class Scheduler:
        """scheduler.py @0003215c, as its two loops see it in steady decode."""

        def __init__(self):
            from sglang.srt.distributed.parallel_state_wrapper import ParallelState

            self.server_args = ServerArgs(disable_overlap_schedule=not overlap)
            self.ps = ParallelState(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, dp_rank=None, dp_size=1,
                                    attn_tp_rank=0, attn_tp_size=1, attn_cp_rank=0, attn_cp_size=1,
                                    attn_dp_rank=0, attn_dp_size=1)
            self.enable_overlap = overlap
            self.is_generation = True
            self.waiting_queue = []
            self.reqs = requests()
            self.running_batch = ScheduleBatch(self.reqs, ForwardMode.DECODE, enable_overlap=overlap)
            self.last_batch = None
            self.cur_batch_for_debug = None
            self.max_total_num_tokens = 1 << 20
            self.token_to_kv_pool_allocator = Allocator(self.max_total_num_tokens // 2)
            self.tree_cache = TreeCache()
            self.result_queue = collections.deque()
            self.forward_ct = 0

        def get_next_batch_to_run(self, running_batch, last_batch):
            running_batch = self.update_running_batch(running_batch)
            ret = running_batch if not running_batch.is_empty() else None
            return NextBatchPlan(batch_to_run=ret, running_batch=running_batch)

        def update_running_batch(self, batch):
            return batch

        def is_disable_overlap_for_batch(self, batch, last_batch):
            return False  # SGLANG_DISABLE_CONSECUTIVE_PREFILL_OVERLAP is off, and this is decode

        def run_batch(self, batch, pp_proxy_tensors=None):
            self.forward_ct += 1
            return GenerationBatchResult(0.0, None, self.forward_ct)

        def process_batch_result(self, batch, result):
            for r in batch.reqs:
                r.output_ids.append(0)

        def launch_batch_sample_if_needed(self, batch_result, cur_batch):
            if batch_result is None or batch_result.delay_sample_func is None:
                return

        def pop_and_process(self):
            tmp_batch, tmp_result = self.result_queue.popleft()
            self.process_batch_result(tmp_batch, tmp_result)

        def overlap_step(self):
            """One iteration of event_loop_overlap (scheduler.py @0003215c)."""
            plan = self.get_next_batch_to_run(running_batch=self.running_batch, last_batch=self.last_batch)
            self.running_batch = plan.running_batch
            batch = plan.batch_to_run
            self.cur_batch_for_debug = batch
            disable_overlap_for_batch = self.is_disable_overlap_for_batch(batch, last_batch=self.last_batch)
            if disable_overlap_for_batch:
                self.pop_and_process()
            if batch:
                batch_result = self.run_batch(batch)
                self.result_queue.append((batch.copy(), batch_result))
            else:
                batch_result = None
            if self.last_batch:
                if not disable_overlap_for_batch:
                    self.pop_and_process()
            if self.is_generation:
                self.launch_batch_sample_if_needed(batch_result, batch)
            self.last_batch = batch

        def normal_step(self):
            """One iteration of event_loop_normal (scheduler.py @0003215c)."""
            plan = self.get_next_batch_to_run(running_batch=self.running_batch, last_batch=self.last_batch)
            self.running_batch = plan.running_batch
            batch = plan.batch_to_run
            self.cur_batch_for_debug = batch
            if batch:
                result = self.run_batch(batch)
                self.process_batch_result(batch, result)
            self.last_batch = batch

        step = overlap_step if overlap else normal_step

        def between(self):
            for r in self.reqs:
                list.clear(r.output_ids)

    class ModelWorkerBatch:
        """What ScheduleBatch.get_model_worker_batch builds for the worker."""

        def __init__(self, bid, size):
            self.bid = bid
            self.seq_lens = range(size)

    def old_scheduler(queue_type):
        class TpModelWorkerClient:
            """tp_worker_overlap_thread.py @0045f98e: the scheduler's side
            (forward_batch_generation) and one iteration of the forward
            thread's loop (forward_thread_func_)."""

            def __init__(self):
                self.input_queue = queue_type()
                self.future_token_ids_ct = 0
                self.future_token_ids_limit = 3 * max(n, 1)
                self.cur_sampling_info = None

            def forward_batch_generation(self, model_worker_batch):
                self.input_queue.put((model_worker_batch, self.future_token_ids_ct))
                bs = len(model_worker_batch.seq_lens)
                self.future_token_ids_ct = (self.future_token_ids_ct + bs) % self.future_token_ids_limit
                return None, None

            def forward_thread_iteration(self):
                model_worker_batch, future_token_ids_ct = self.input_queue.get()
                return model_worker_batch

        class OldScheduler:
            """scheduler.py @0045f98e, as its overlap loop sees it in steady
            decode. Its KV attributes are token_to_kv_pool, not the
            token_to_kv_pool_allocator the hook reads, so the hook reports
            no KV usage there (degraded), as on a real SGLang of that age."""

            def __init__(self):
                self.server_args = ServerArgs()
                self.tp_rank = 0
                self.dp_rank = None
                self.enable_overlap = True
                self.is_generation = True
                self.waiting_queue = []
                self.reqs = requests()
                self.running_batch = ScheduleBatch(self.reqs, ForwardMode.DECODE, enable_overlap=True)
                self.last_batch = self.cur_batch = None
                self.max_total_num_tokens = 1 << 20
                self.token_to_kv_pool = Allocator(self.max_total_num_tokens // 2)
                self.tree_cache = TreeCache()
                self.result_queue = collections.deque()
                self.forward_ct = 0
                self.batch_is_full = False
                self.tp_worker = TpModelWorkerClient()

            def get_next_batch_to_run(self):
                if self.running_batch is None:
                    return None
                before_bs = self.running_batch.batch_size()
                self.update_running_batch()
                if not self.running_batch:
                    self.batch_is_full = False
                    return None
                if before_bs != self.running_batch.batch_size():
                    self.batch_is_full = False
                return self.running_batch

            def update_running_batch(self):
                return None

            def run_batch(self, batch):
                self.forward_ct += 1
                model_worker_batch = ModelWorkerBatch(self.forward_ct, len(batch.reqs))
                logits_output, next_token_ids = self.tp_worker.forward_batch_generation(model_worker_batch)
                batch.output_ids = next_token_ids
                return logits_output, next_token_ids, model_worker_batch.bid

            def process_batch_result(self, batch, result):
                for r in batch.reqs:
                    r.output_ids.append(0)

            def step(self):
                """One iteration of event_loop_overlap (scheduler.py
                @0045f98e), the forward thread's iteration for the batch
                just launched inline after run_batch."""
                batch = self.get_next_batch_to_run()
                self.cur_batch = batch
                if batch:
                    result = self.run_batch(batch)
                    self.result_queue.append((batch.copy(), result))
                    self.tp_worker.forward_thread_iteration()
                if self.last_batch:
                    tmp_batch, tmp_result = self.result_queue.popleft()
                    tmp_batch.next_batch_sampling_info = self.tp_worker.cur_sampling_info if batch else None
                    self.process_batch_result(tmp_batch, tmp_result)
                self.last_batch = batch

            between = Scheduler.between

        return OldScheduler

    def make(hooked):
        from inferprof_hook import sglang as shook

        if loop == "sglang-thread":
            module = types.SimpleNamespace(Queue=queue.Queue, TpModelWorkerClient=object)
            if hooked and not shook.patch_overlap_thread(module):
                raise SystemExit("the hook did not wrap the forward thread's Queue")
            cls = old_scheduler(module.Queue)
        else:
            cls = type("Scheduler", (Scheduler,), {})
            # The hook wraps what the class itself defines, as on SGLang's.
            for name in ("get_next_batch_to_run", "update_running_batch", "run_batch",
                         "process_batch_result", "launch_batch_sample_if_needed"):
                setattr(cls, name, Scheduler.__dict__[name])
        if hooked:
            shook.patch(types.SimpleNamespace(Scheduler=cls))
        return cls()

    return make
