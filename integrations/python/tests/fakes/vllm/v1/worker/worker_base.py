# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Fake of vllm/v1/worker/worker_base.py (vllm-project/vllm @02432253).
Checked against vLLM 0.32.0 (the classes the hook reads: tools/hook_compat.py --fakes).

WorkerWrapperBase is what an executor holds for each worker: init_worker
builds the worker class, execute_model is its own method (it applies the
multimodal cache, then calls the worker's), and every other attribute,
sample_tokens included, reaches the worker through __getattr__. The
executors call methods by name on it (run_method / getattr).
"""


class WorkerWrapperBase:
    def __init__(self, rpc_rank=0, global_rank=None):
        self.rpc_rank = rpc_rank
        self.global_rank = self.rpc_rank if global_rank is None else global_rank
        self.worker = None

    def init_worker(self, all_kwargs):
        from vllm.v1.worker.gpu_worker import Worker

        self.worker = Worker(**all_kwargs[self.rpc_rank])

    def __getattr__(self, attr):
        return getattr(self.worker, attr)

    def execute_model(self, scheduler_output):
        return self.worker.execute_model(scheduler_output)
