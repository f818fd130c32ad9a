# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Fake of vllm/v1/worker/gpu_worker.py's Worker (vllm-project/vllm
Checked against vLLM 0.32.0 (the classes the hook reads: tools/hook_compat.py --fakes).
@0012cf69, with the execute_model/sample_tokens split of WorkerBase at
@02432253): execute_model runs the model runner's forward and returns None
when sampling follows in sample_tokens; a batch with nothing scheduled
returns an empty output at once.

The GPU is the fake of tests/fakes/gpu.py, one per worker process (each
worker has its own device). prep_ms stands for the CPU time the model
runner spends preparing a batch's inputs before it launches anything
(_prepare_inputs), on the worker's main thread.
"""

import time

from gpu import GPU, SAMPLE
from vllm.v1.executor import forward_kernels


class Worker:
    def __init__(self, rank=0, prep_ms=0.0, scale=1.0):
        self.rank = rank
        self.prep_ms = prep_ms
        self.gpu = GPU(scale)
        self.batches = 0  # ground truth: the worker's own count of execute_model calls

    def execute_model(self, scheduler_output):
        self.batches += 1
        if not scheduler_output.total_num_scheduled_tokens:
            return {"empty": True}
        if self.prep_ms:
            time.sleep(self.prep_ms / 1000.0)
        kernels, graph = forward_kernels(scheduler_output)
        self.gpu.launch(self.batches, kernels, graph)
        return None

    def sample_tokens(self, grammar_output):
        self.gpu.launch(self.batches, [(SAMPLE, 120)])
        return {"batch": self.batches}

    def wait(self, output):
        """What AsyncModelRunnerOutput.get_output waits for: the batch's
        kernels, then the copy of its sampled tokens."""
        if output and "batch" in output:
            self.gpu.wait(output["batch"])
        return output

    def gpu_log(self):
        return self.gpu.log()
