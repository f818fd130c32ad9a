# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Fake of vllm/v1/executor/multiproc_executor.py (vllm-project/vllm
Checked against vLLM 0.32.0 (the classes the hook reads: tools/hook_compat.py --fakes).
@00f6c9bf; the async output thread and the ordered futures of later
versions, as described in its current form: handle_output /
async_output_busy_loop, FutureWrapper).

The call structure is the real one:
- MultiprocExecutor starts one WorkerProc process per rank
  (make_worker_process, a "spawn" context here, as vLLM forces when CUDA is
  initialised; the engine process is their parent) and waits until each
  says READY.
- collective_rpc(method, args) enqueues (method, args, kwargs,
  unique_reply_rank) on the broadcast queue every worker reads, and hands
  back a future that takes the reply of the output rank; replies come in
  the order of the calls (FutureWrapper drains older futures first).
- execute_model and sample_tokens are two such calls per batch.
- WorkerProc.worker_busy_loop: the worker's main thread takes each call off
  the queue when it gets to it and runs getattr(self.worker, method) on its
  WorkerWrapperBase; that is where the batch's kernels are launched. With
  async scheduling its output goes to async_output_busy_loop, a second
  thread that waits for the GPU result (AsyncModelRunnerOutput.get_output)
  and replies, so the main thread goes on to the next call.

The GPU runs behind the CPU, as it does when the model is what takes the
time: a batch's result comes back only after every worker launched the
next batch, if the engine already enqueued it (step_with_batch_queue
enqueues batch N+1 before it waits for N). The fake GPU's own timing would
give that only on an idle machine; on a loaded one a worker can get to
N+1 after N's result is back, so the executor waits for the workers'
count of execute_model calls done (a shared counter) before it takes a
reply: deterministic, whatever the scheduling.

What is not real: each worker has its own queue standing in for the one
shared-memory broadcast queue, and only what the fake worker reads of the
SchedulerOutput is sent (WorkerSchedulerOutput); the sampled tokens are
computed in the engine process (model_output) and returned once the output
rank's reply arrives.
"""

import collections
import multiprocessing
import os
import queue
import threading

from vllm.v1.executor import model_output
from vllm.v1.outputs import EMPTY_MODEL_RUNNER_OUTPUT
from vllm.v1.worker.worker_base import WorkerWrapperBase


class WorkerSchedulerOutput:
    """The fields of SchedulerOutput the fake worker reads."""

    def __init__(self, so):
        self.total_num_scheduled_tokens = so.total_num_scheduled_tokens
        self.scheduled_new_reqs = [nr.req_id for nr in so.scheduled_new_reqs]
        self.num_scheduled_tokens = dict(so.num_scheduled_tokens)


class FutureWrapper:
    """A reply that arrives in call order: result() first takes the replies
    of older calls."""

    def __init__(self, futures_queue, get_response, value=lambda r: r):
        self.futures_queue = futures_queue
        self.get_response = get_response
        self.value = value
        self._done = False
        self._result = None
        futures_queue.appendleft(self)

    def done(self):
        return self._done

    def result(self):
        while not self._done:
            self.futures_queue.pop()._wait_for_response()
        return self._result

    def _wait_for_response(self):
        self._result = self.value(self.get_response())
        self._done = True


class MultiprocExecutor:
    def __init__(self, scheduler, world_size=2, prep_ms=0.0, scale=1.0):
        self.scheduler = scheduler
        self.world_size = world_size
        self.output_rank = 0
        self.futures_queue = collections.deque()
        self.batches = 0  # ground truth, as Executor's
        self._pending = None
        ctx = multiprocessing.get_context("spawn")
        self.rpc_broadcast_mq = [ctx.Queue() for _ in range(world_size)]
        self.worker_response_mq = [ctx.Queue() for _ in range(world_size)]
        # Per worker, the execute_model calls it has run (launched), and
        # the condition it signals after each.
        self.executed = [ctx.Value("q", 0, lock=False) for _ in range(world_size)]
        self.progress = ctx.Condition()
        self.procs = []
        for rank in range(world_size):
            p = ctx.Process(target=WorkerProc.worker_main, name="VllmWorker-%d" % rank, daemon=True,
                            kwargs={"rank": rank, "rpc": self.rpc_broadcast_mq[rank],
                                    "response": self.worker_response_mq[rank],
                                    "progress": (self.executed[rank], self.progress),
                                    "worker_kwargs": {"rank": rank, "prep_ms": prep_ms, "scale": scale}})
            p.start()
            self.procs.append(p)
        self.worker_pids = []
        for rank in range(world_size):
            status, pid = self.worker_response_mq[rank].get(timeout=60)
            assert status == WorkerProc.READY_STR
            self.worker_pids.append(pid)
        self.logs = []

    def collective_rpc(self, method, args=(), kwargs=None, non_block=False, unique_reply_rank=None,
                       value=lambda r: r):
        for q in self.rpc_broadcast_mq:
            q.put((method, args, kwargs or {}, unique_reply_rank))
        if unique_reply_rank is None:
            return [value(q.get()) for q in self.worker_response_mq]
        get = self.worker_response_mq[unique_reply_rank].get
        if method in ("execute_model", "sample_tokens"):
            n = self.batches
            get = lambda: (self._behind(n), self.worker_response_mq[unique_reply_rank].get())[1]  # noqa: E731
        fut = FutureWrapper(self.futures_queue, get, value)
        return fut if non_block else fut.result()

    def _behind(self, n):
        """Before batch n's reply: if batch n+1 is enqueued, waits until
        every worker has launched it (the GPU behind the CPU)."""
        if self.batches <= n:
            return
        with self.progress:
            ok = self.progress.wait_for(lambda: all(e.value > n for e in self.executed), timeout=60)
        assert ok, "workers never got to batch %d" % (n + 1)

    def execute_model(self, scheduler_output, non_block=False):
        self.batches += 1
        self.scheduler.note_batch(scheduler_output, self.batches)
        if scheduler_output.total_num_scheduled_tokens:
            self._pending = model_output(self.scheduler, scheduler_output)
            value = lambda r: None if r is None else EMPTY_MODEL_RUNNER_OUTPUT  # noqa: E731
        else:
            self._pending = None
            value = lambda r: EMPTY_MODEL_RUNNER_OUTPUT  # noqa: E731
        return self.collective_rpc("execute_model", (WorkerSchedulerOutput(scheduler_output),),
                                   non_block=non_block, unique_reply_rank=self.output_rank, value=value)

    def sample_tokens(self, grammar_output, non_block=False):
        out, self._pending = self._pending, None
        return self.collective_rpc("sample_tokens", (grammar_output,), non_block=non_block,
                                   unique_reply_rank=self.output_rank, value=lambda r: out)

    def take_draft_token_ids(self):
        return {}

    def shutdown(self):
        """Collects each worker's GPU records (the test's ground truth),
        then stops the workers."""
        if not self.procs:
            return
        for f in list(self.futures_queue):
            f.result()
        logs = self.collective_rpc("gpu_log")
        self.logs = [{"pid": pid, "gpu": log} for pid, log in zip(self.worker_pids, logs)]
        for q in self.rpc_broadcast_mq:
            q.put(None)
        for p in self.procs:
            p.join(timeout=30)
        self.procs = []


class WorkerProc:
    """Runs one worker in its own process."""

    READY_STR = "READY"

    def __init__(self, rank, rpc, response, worker_kwargs, progress=None):
        self.rank = rank
        self.executed, self.progress = progress or (None, None)
        wrapper = WorkerWrapperBase(rpc_rank=rank)
        all_kwargs = [{} for _ in range(rank + 1)]
        all_kwargs[rank] = worker_kwargs
        wrapper.init_worker(all_kwargs)
        self.worker = wrapper
        self.rpc_broadcast_mq = rpc
        self.worker_response_mq = response
        self.async_output_queue = queue.Queue()
        self.async_output_copy_thread = threading.Thread(target=self.async_output_busy_loop, daemon=True,
                                                         name="WorkerAsyncOutputCopy")
        self.async_output_copy_thread.start()

    @staticmethod
    def worker_main(rank, rpc, response, worker_kwargs, progress):
        worker = WorkerProc(rank, rpc, response, worker_kwargs, progress)
        response.put((WorkerProc.READY_STR, os.getpid()))
        worker.worker_busy_loop()
        worker.async_output_queue.put(None)
        worker.async_output_copy_thread.join()

    def handle_output(self, output):
        self.async_output_queue.put(output)

    def async_output_busy_loop(self):
        while True:
            output = self.async_output_queue.get()
            if output is None:
                return
            self.worker_response_mq.put(self.worker.wait(output[0]) if output[1] else output[0])

    def worker_busy_loop(self):
        while True:
            item = self.rpc_broadcast_mq.get()
            if item is None:
                return
            method, args, kwargs, output_rank = item
            output = getattr(self.worker, method)(*args, **kwargs)
            if method == "execute_model" and self.progress is not None:
                with self.progress:
                    self.executed.value += 1
                    self.progress.notify_all()
            if output_rank is None or self.rank == output_rank:
                self.handle_output((output, method == "sample_tokens"))
