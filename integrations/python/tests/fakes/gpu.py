# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""A fake GPU, and the launch and kernel records the inferprof CUPTI library
would send about it.

What the library records (native/cupti; docs/cupti-wire.md frames 4, 10):
in its launch callback, each kernel or CUDA graph launch with its
correlation id, the launching thread (gettid) and the CLOCK_REALTIME time;
from CUPTI's activity records, each kernel's GPU start and end with the
correlation id of the launch that started it (the kernels of a graph carry
the graph launch's). The fakes call launch() where the real engine
launches a batch's GPU work, on the thread that does it; this keeps the
same three things per launch, tagged with the batch (the fake engine's own
number for it: the ground truth), and runs the kernels on one simulated
device: a kernel starts LATENCY after its launch or when the device is
free, whichever is later, a graph's nodes 2 µs apart. The engine then
waits for a batch's result until its last kernel ended (done_at), so the
GPU runs behind the CPU: batch N's kernels run while the engine schedules
and launches N+1.

log() is what the end-to-end tests hand the collector through a fake CUPTI
stream (e2e/launchwin_test.go).
"""

import threading
import time

LATENCY_NS = 20_000
GRAPH_GAP_NS = 2_000

# Real kernel names (FlashAttention, cuBLAS, vLLM's own, PyTorch's sampling
# and cat, SGLang's Triton KV-slot writer), so the collector's category
# table sorts them.
ATTN = ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
        "cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, false, false, "
        "false, false, true, false, false, false>(Flash_fwd_params)")
GEMM = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"
NORM = ("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, "
        "c10::BFloat16 const*, float, int, int)")
SAMPLE = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
          "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)")
CAT = ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::"
       "OpaqueType<8u>, unsigned int, 1, 128, 1>(at::native::(anonymous namespace)::OpaqueType<8u>*, "
       "at::native::(anonymous namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::"
       "OpaqueType<8u>, unsigned int, 128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned "
       "int, 4u>, int, unsigned int)")
KV_SLOTS = "write_req_to_token_pool_triton"


class GPU:
    """One simulated device and the records of every launch made on it."""

    def __init__(self, scale=1.0):
        self.lock = threading.Lock()
        self.scale = scale
        self.corr = 0
        self.free = 0
        self.launches = []
        self.kernels = []
        self.ends = {}  # batch -> its last kernel's end

    def launch(self, batch, kernels, graph=False):
        """Launches kernels ([(name, µs)]) for batch, from the calling
        thread: one launch each, or one graph launch for all of them."""
        tid = threading.get_native_id()
        with self.lock:
            groups = [kernels] if graph else [[k] for k in kernels]
            for group in groups:
                t = time.time_ns()
                self.corr += 1
                self.launches.append({"corr": self.corr, "time": t, "thread": tid, "graph": graph,
                                      "batch": batch})
                at = max(t + LATENCY_NS, self.free)
                for i, (name, us) in enumerate(group):
                    if i:
                        at = self.free + GRAPH_GAP_NS
                    end = at + int(us * 1000 * self.scale)
                    self.kernels.append({"corr": self.corr, "name": name, "start": at, "end": end,
                                         "graph": graph, "batch": batch})
                    self.free = end
                self.ends[batch] = self.free

    def done_at(self, batch):
        """When batch's last kernel so far ends (Unix ns), 0 if none."""
        with self.lock:
            return self.ends.get(batch, 0)

    def wait(self, batch):
        """Blocks until batch's kernels have run, as a host sync would."""
        wait = (self.done_at(batch) - time.time_ns()) / 1e9
        if wait > 0:
            time.sleep(wait)

    def log(self):
        with self.lock:
            return {"launches": list(self.launches), "kernels": list(self.kernels)}
