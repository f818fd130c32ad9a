# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Fake of vllm/v1/engine/core.py (vllm-project/vllm @00080ee1).
Checked against vLLM 0.32.0 (the classes the hook reads: tools/hook_compat.py --fakes).

The call structure is the real one:
- EngineCore.__init__ builds the scheduler and binds self.step_fn to step,
  or to step_with_batch_queue when max_concurrent_batches > 1 (async
  scheduling, vLLM's default).
- step(): schedule, execute_model(non_block), sample_tokens when the
  execute future holds None, _process_aborts_queue, then
  scheduler.update_from_output(scheduler_output, model_output).
- step_with_batch_queue(): schedules a new batch and launches it; while the
  queue is not full it returns (None, executed) without waiting. Once full,
  it pops the oldest batch, waits for it, and calls update_from_output for
  that batch, so the call that schedules batch N+1 returns batch N. A batch
  whose structured-output request still has a token in flight
  (pending_structured_output_tokens, set by AsyncScheduler) is executed but
  not sampled: after update_from_output of the previous batch, the same
  call computes its grammar bitmask, calls sample_tokens and queues it.
- post_step() hands draft tokens to the scheduler (sync scheduling only).
- preprocess_add_request(EngineCoreRequest) runs on the input thread and
  returns (Request, wave); add_request puts the Request into the scheduler.
- EngineCoreProc: the busy loop. Its input thread (process_input_sockets;
  here fed by a queue standing in for ZMQ) preprocesses ADD requests and
  puts aborts on both the input queue and aborts_queue; a step that
  executed nothing while requests remain sleeps 1 ms and steps again.

Scheduler, executor and requests are the fakes in this package. Tests pass
them in instead of a VllmConfig.
"""

import collections
import queue
import threading
import time

from vllm.v1.core.sched.scheduler import AsyncScheduler, Scheduler
from vllm.v1.engine import EngineCoreRequest, EngineCoreRequestType
from vllm.v1.engine.input_processor import InputProcessor
from vllm.v1.executor import Executor
from vllm.v1.request import Request, RequestStatus


class ParallelConfig:
    def __init__(self, data_parallel_rank=0):
        self.data_parallel_rank = data_parallel_rank


class VllmConfig:
    def __init__(self, data_parallel_rank=0, async_scheduling=False):
        self.parallel_config = ParallelConfig(data_parallel_rank)
        self.async_scheduling = async_scheduling

    @property
    def max_concurrent_batches(self):
        return 2 if self.async_scheduling else 1


class EngineCore:
    """Inner loop of the fake engine."""

    def __init__(self, scheduler=None, step_time=0.0, async_scheduling=False, data_parallel_rank=0,
                 executor=None, gpu=None):
        self.vllm_config = VllmConfig(data_parallel_rank, async_scheduling)
        if scheduler is None:
            scheduler = (AsyncScheduler if async_scheduling else Scheduler)()
        self.scheduler = scheduler
        self.model_executor = executor or Executor(scheduler, step_time, gpu)
        self.batch_queue_size = self.vllm_config.max_concurrent_batches
        self.batch_queue = None
        if self.batch_queue_size > 1:
            self.batch_queue = collections.deque(maxlen=self.batch_queue_size)
        self.step_fn = self.step if self.batch_queue is None else self.step_with_batch_queue
        self.async_scheduling = async_scheduling
        self.aborts_queue = queue.Queue()
        self.check_for_draft_tokens = True
        # Ground truth for the tests: deferred structured-output samplings.
        self.deferred_samples = 0

    def add_request(self, request, request_wave=0):
        if not isinstance(request.request_id, str):
            raise TypeError("request_id must be a string")
        self.scheduler.add_request(request)

    def abort_requests(self, request_ids):
        self.scheduler.finish_requests(request_ids, RequestStatus.FINISHED_ABORTED)

    def preprocess_add_request(self, request):
        req = Request.from_engine_core_request(request)
        # Ground truth only: which API id an engine id stands for.
        self.scheduler.external[request.request_id] = request.external_req_id or request.request_id
        return req, request.current_wave

    def _should_throttle_prefills(self):
        return False

    def step(self):
        if not self.scheduler.has_requests():
            return {}, False
        scheduler_output = self.scheduler.schedule(self._should_throttle_prefills())
        future = self.model_executor.execute_model(scheduler_output, non_block=True)
        model_output = future.result()
        if model_output is None:
            model_output = self.model_executor.sample_tokens(None)
        self._process_aborts_queue()
        engine_core_outputs = self.scheduler.update_from_output(scheduler_output, model_output)
        return engine_core_outputs, scheduler_output.total_num_scheduled_tokens > 0

    def post_step(self, model_executed):
        if self.check_for_draft_tokens and not self.async_scheduling and model_executed:
            drafts = self.model_executor.take_draft_token_ids()
            if drafts:
                self.scheduler.update_draft_token_ids(drafts)

    def step_with_batch_queue(self):
        batch_queue = self.batch_queue
        assert len(batch_queue) < self.batch_queue_size
        model_executed = False
        deferred_scheduler_output = None
        if self.scheduler.has_requests():
            scheduler_output = self.scheduler.schedule(self._should_throttle_prefills())
            exec_future = self.model_executor.execute_model(scheduler_output, non_block=True)
            model_executed = scheduler_output.total_num_scheduled_tokens > 0
            if not model_executed:
                future = exec_future  # nothing to sample
            elif not scheduler_output.pending_structured_output_tokens:
                grammar_output = self.scheduler.get_grammar_bitmask(scheduler_output)
                future = self.model_executor.sample_tokens(grammar_output, non_block=True)
            else:
                # Sampling waits until the previous batch's output is in.
                deferred_scheduler_output = scheduler_output
            if not deferred_scheduler_output:
                batch_queue.appendleft((future, scheduler_output, exec_future))
                if len(batch_queue) < self.batch_queue_size and (
                        model_executed or self.scheduler.has_requests()):
                    return None, model_executed
        elif not batch_queue:
            return None, False
        future, scheduler_output, exec_future = batch_queue.pop()
        model_output = future.result()
        self._process_aborts_queue()
        engine_core_outputs = self.scheduler.update_from_output(scheduler_output, model_output)
        if deferred_scheduler_output:
            # The grammar can now take the previous batch's tokens.
            self.deferred_samples += 1
            grammar_output = self.scheduler.get_grammar_bitmask(deferred_scheduler_output)
            future = self.model_executor.sample_tokens(grammar_output, non_block=True)
            batch_queue.appendleft((future, deferred_scheduler_output, exec_future))
        return engine_core_outputs, model_executed

    def _process_aborts_queue(self):
        if not self.aborts_queue.empty():
            request_ids = []
            while not self.aborts_queue.empty():
                ids = self.aborts_queue.get_nowait()
                request_ids.extend((ids,) if isinstance(ids, str) else ids)
            self.abort_requests(request_ids)


class EngineCoreProc(EngineCore):
    """The background-process engine: busy loop plus an input thread."""

    def __init__(self, *args, engine_index=0, **kwargs):
        self.input_queue = queue.Queue()
        self.output_queue = queue.Queue()
        self.engine_index = engine_index
        self.engines_running = False
        # Stands in for the ZMQ input socket of process_input_sockets.
        self.client_queue = queue.Queue()
        super().__init__(*args, data_parallel_rank=engine_index, **kwargs)
        self.input_thread = threading.Thread(target=self.process_input_sockets, daemon=True)
        self.input_thread.start()

    def process_input_sockets(self):
        """Input socket IO thread."""
        while True:
            item = self.client_queue.get()
            if item is None:
                self.client_queue.task_done()
                return
            request_type, request = item
            if request_type == EngineCoreRequestType.ADD:
                request = self.preprocess_add_request(request)
            elif request_type == EngineCoreRequestType.ABORT:
                self.aborts_queue.put_nowait(request)
            self.input_queue.put_nowait((request_type, request))
            self.client_queue.task_done()

    def has_work(self):
        return self.engines_running or self.scheduler.has_requests() or bool(self.batch_queue)

    def _process_input_queue(self):
        while not self.input_queue.empty():
            self._handle_client_request(*self.input_queue.get_nowait())

    def _handle_client_request(self, request_type, request):
        if request_type == EngineCoreRequestType.ADD:
            req, request_wave = request
            self.add_request(req, request_wave)
        elif request_type == EngineCoreRequestType.ABORT:
            self.abort_requests(request)

    def _process_engine_step(self):
        outputs, model_executed = self.step_fn()
        for output in outputs.items() if outputs else ():
            self.output_queue.put_nowait(output)
        self.post_step(model_executed)
        if not model_executed and self.scheduler.has_requests():
            time.sleep(0.001)
        return model_executed

    def shutdown(self):
        self.client_queue.put(None)
        self.input_thread.join()
        stop = getattr(self.model_executor, "shutdown", None)
        if stop is not None:
            stop()


class Client:
    """The frontend side: AsyncLLM's InputProcessor assigns ids, the core
    client sends ADD and ABORT to the engine's input socket."""

    def __init__(self, proc):
        self.proc = proc
        self.ids = {}  # API id -> engine id

    def add(self, request_id, prompt_len, max_tokens, **knobs):
        req = EngineCoreRequest(request_id, prompt_len, max_tokens, arrival_time=time.time(), **knobs)
        InputProcessor.assign_request_id(req)
        self.ids[request_id] = req.request_id
        self.proc.client_queue.put((EngineCoreRequestType.ADD, req))

    def abort(self, request_id):
        self.proc.client_queue.put((EngineCoreRequestType.ABORT, [self.ids[request_id]]))

    def sync(self):
        """Waits until the input thread handed everything to the engine."""
        self.proc.client_queue.join()
