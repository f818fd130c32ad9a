# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Fake of sglang/srt/managers/tp_worker_overlap_thread.py
(sgl-project/sglang @0045f98e): the overlap scheduler of SGLang before the
future-map overlap, with the forward on a thread of its own.
Checked against SGLang 0.5.3 (the classes the hook reads: tools/hook_compat.py --fakes).

The call structure is the real one:
- TpModelWorkerClient.__init__ starts forward_thread_func, which loops on
  self.input_queue.get() (a queue.Queue imported as Queue into this module).
- forward_batch_generation(model_worker_batch), called by the scheduler's
  run_batch on the scheduler thread, puts (model_worker_batch,
  future_token_ids_ct) on input_queue, then allocates the future token ids
  (a torch.arange on the device: a launch of this batch on the scheduler
  thread) and returns them at once.
- The forward thread, for each item in order: resolve_future_token_ids on
  the input ids, self.worker.forward_batch_generation (forward and
  sampling), writes the future token map, starts the copy of the next
  token ids to the CPU, records copy_done and puts the result on
  output_queue.
- resolve_batch_result(bid), called by process_batch_result, takes the
  next result off output_queue and waits for copy_done.

The kernels run on the fake GPU (tests/fakes/gpu.py), launched from the
forward thread, tagged with the batch's number (ModelWorkerBatch.bid).
"""

import threading
from queue import Queue

from gpu import ATTN, CAT, GEMM, NORM, SAMPLE


class ModelWorkerBatch:
    """What run_batch hands the worker: the batch's number, mode and size."""

    def __init__(self, bid, decode, size, extend_tokens):
        self.bid = bid
        self.decode = decode
        self.size = size
        self.extend_tokens = extend_tokens


class TpModelWorker:
    def __init__(self, gpu):
        self.gpu = gpu

    def forward_batch_generation(self, mwb, launch_done=None):
        if mwb.decode:
            self.gpu.launch(mwb.bid, [(NORM, 150), (ATTN, 500 + 60 * mwb.size), (GEMM, 700)], graph=True)
        else:
            self.gpu.launch(mwb.bid, [(NORM, 100), (ATTN, 200 + 20 * mwb.extend_tokens),
                                      (GEMM, 300 + 10 * mwb.extend_tokens)])
        self.gpu.launch(mwb.bid, [(SAMPLE, 120)])
        if launch_done is not None:
            launch_done.set()


class TpModelWorkerClient:
    def __init__(self, gpu):
        self.worker = TpModelWorker(gpu)
        self.gpu = gpu
        self.future_token_ids_ct = 0
        self.input_queue = Queue()
        self.output_queue = Queue()
        self.forward_thread = threading.Thread(target=self.forward_thread_func, daemon=True)
        self.forward_thread.start()

    def forward_thread_func(self):
        self.forward_thread_func_()

    def forward_thread_func_(self):
        while True:
            model_worker_batch, future_token_ids_ct = self.input_queue.get()
            if not model_worker_batch:
                break
            self.launch_done = threading.Event()
            bid = model_worker_batch.bid
            # resolve_future_token_ids: a torch.where over the input ids.
            self.gpu.launch(bid, [(CAT, 10)])
            self.worker.forward_batch_generation(model_worker_batch, self.launch_done)
            # Update the future token ids map.
            self.gpu.launch(bid, [(CAT, 8)])
            self.output_queue.put((bid, None, None))

    def resolve_batch_result(self, bid):
        done, _, _ = self.output_queue.get()
        self.gpu.wait(done)  # copy_done.synchronize()
        self.launch_done.wait()
        return done

    def forward_batch_generation(self, model_worker_batch):
        self.input_queue.put((model_worker_batch, self.future_token_ids_ct))
        # future_next_token_ids = torch.arange(..., device=self.device); the
        # kernel name stands in, what matters is the thread and the batch.
        self.gpu.launch(model_worker_batch.bid, [(CAT, 3)])
        self.future_token_ids_ct += model_worker_batch.size
        return None, None

    def __delete__(self):
        self.input_queue.put((None, None))
