# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Fake of sglang/srt/managers/schedule_batch.py (sgl-project/sglang @fd3907ee).
Checked against SGLang 0.5.20 (the classes the hook reads: tools/hook_compat.py --fakes).

What the hook depends on follows the real file:
- ScheduleBatch.copy() builds a new batch from reqs (the same list object),
  forward_mode, decoding_reqs and a few others, and not extend_num_tokens:
  it is what the overlap loop hands process_batch_result.
- filter_batch() and retract_decode() give the batch a new reqs list;
  merge_batch() extends its own list in place.
- retract_decode() takes requests off the end of a decode batch, sorted by
  (len(output_ids), -len(origin_input_ids)) descending, until the next
  decode step fits, and returns (retracted, new_token_ratio, reqs_to_abort);
  Req.reset_for_retract() keeps output_ids, so a retracted request comes
  back with a prefill of its prompt and outputs.
"""

from guard import tokens
from sglang.srt.model_executor.forward_batch_info import ForwardMode


class FINISH_LENGTH:
    def __init__(self, length):
        self.length = length


class FINISH_ABORT:
    def __init__(self, message=None):
        self.message = message or "Aborted"


class SamplingParams:
    def __init__(self, max_new_tokens):
        self.max_new_tokens = max_new_tokens


class Req:
    def __init__(self, rid, prompt_len, max_new_tokens, accept=None, grammar=False):
        self.rid = rid
        self.origin_input_ids = tokens(prompt_len)
        self.output_ids = tokens(0)
        self.sampling_params = SamplingParams(max_new_tokens)
        self.finished_reason = None
        self.to_finish = None
        self.is_retracted = False
        # Test knobs, not SGLang's: tokens per decode step with speculative
        # decoding (cycled); a grammar whose sampling the overlap loop
        # delays (delay_sample_func).
        self.accept = accept
        self.grammar = grammar

    def finished(self):
        return self.finished_reason is not None

    def reset_for_retract(self):
        self.is_retracted = True

    @property
    def seqlen(self):
        return len(self.origin_input_ids) + len(self.output_ids)


class ScheduleBatch:
    def __init__(self, reqs=(), forward_mode=ForwardMode.DECODE, decoding_reqs=None,
                 batch_is_full=False, return_logprob=False, spec_algorithm=None, enable_overlap=False):
        # Kept as given, as the real dataclass does: copy() shares the list.
        self.reqs = reqs if isinstance(reqs, list) else list(reqs)
        self.forward_mode = forward_mode
        self.decoding_reqs = decoding_reqs
        self.batch_is_full = batch_is_full
        self.return_logprob = return_logprob
        self.spec_algorithm = spec_algorithm
        self.enable_overlap = enable_overlap
        self.extend_num_tokens = 0
        self.tree_cache = None
        self.token_to_kv_pool_allocator = None

    @classmethod
    def init_new(cls, reqs, allocator, enable_overlap):
        b = cls(reqs, ForwardMode.EXTEND, enable_overlap=enable_overlap)
        b.token_to_kv_pool_allocator = allocator
        return b

    def is_empty(self):
        return len(self.reqs) == 0

    def batch_size(self):
        return len(self.reqs)

    def prepare_for_extend(self):
        self.forward_mode = ForwardMode.EXTEND
        # A retracted request prefills its prompt and its outputs again.
        self.extend_num_tokens = sum(r.seqlen for r in self.reqs)

    def prepare_for_decode(self):
        self.forward_mode = ForwardMode.DECODE

    def filter_batch(self, chunked_req_to_exclude=None, keep_indices=None):
        if keep_indices is None:
            keep_indices = [i for i, r in enumerate(self.reqs) if not r.finished()]
        if len(keep_indices) == len(self.reqs):
            return
        self.reqs = [self.reqs[i] for i in keep_indices]

    def merge_batch(self, other):
        self.reqs.extend(other.reqs)

    def check_decode_mem(self, selected_indices=None):
        reqs = self.reqs if selected_indices is None else [self.reqs[i] for i in selected_indices]
        return self.token_to_kv_pool_allocator.fits(reqs)

    def retract_decode(self, server_args):
        sorted_indices = list(range(len(self.reqs)))
        sorted_indices.sort(key=lambda i: (len(self.reqs[i].output_ids),
                                           -len(self.reqs[i].origin_input_ids)), reverse=True)
        retracted = []
        first_iter = True
        while first_iter or not self.check_decode_mem(selected_indices=sorted_indices):
            if len(sorted_indices) == 1:
                break
            first_iter = False
            req = self.reqs[sorted_indices.pop()]
            retracted.append(req)
            req.reset_for_retract()
        self.filter_batch(keep_indices=sorted_indices)
        return retracted, 0.5, []

    def copy(self):
        # Only contain fields that will be used by process_batch_result
        return ScheduleBatch(
            reqs=self.reqs,
            forward_mode=self.forward_mode,
            return_logprob=self.return_logprob,
            decoding_reqs=self.decoding_reqs,
            spec_algorithm=self.spec_algorithm,
            enable_overlap=self.enable_overlap,
        )
