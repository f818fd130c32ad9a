"""SGLang: wraps Scheduler.run_batch and Scheduler.process_batch_result.

One step is one batch: it starts when run_batch launches the batch and ends
when process_batch_result has appended that batch's tokens. With the overlap
scheduler, process_batch_result for batch N runs after run_batch(N+1), so
launch times wait in a FIFO. Tokens a request got are the growth of
len(req.output_ids) across process_batch_result, which also counts
speculative tokens. Token values are never read.

Every tensor-parallel rank runs a Scheduler; only TP rank 0 reports, so a step
is counted once.
"""

import collections
import functools
import time

from . import _state, wire
from .emitter import Emitter

MODULE = "sglang.srt.managers.scheduler"
_ATTR = "_inferprof_step"


class _Step:
    __slots__ = ("emitter", "launched")

    def __init__(self, emitter):
        self.emitter = emitter
        # Launch times of batches whose results are not processed yet; the
        # overlap loop keeps at most two in flight.
        self.launched = collections.deque(maxlen=8)


def patch(module):
    cls = getattr(module, "Scheduler", None)
    if cls is None or not callable(getattr(cls, "process_batch_result", None)) \
            or not callable(getattr(cls, "run_batch", None)):
        _state.warn_once("sglang", "inferprof: SGLang %s has no Scheduler.run_batch/"
                         "process_batch_result; engine step spans are off",
                         _state.version("sglang"))
        return []
    wrapped = []
    run = cls.__dict__.get("run_batch")
    if run is not None:
        if not getattr(run, "_inferprof_wrapped", False):
            cls.run_batch = _wrap_run(run)
        wrapped.append("run_batch")
    proc = cls.__dict__.get("process_batch_result")
    if proc is not None:
        if not getattr(proc, "_inferprof_wrapped", False):
            cls.process_batch_result = _wrap_process(proc)
        wrapped.append("process_batch_result")
    return wrapped


def _state_of(sched):
    st = sched.__dict__.get(_ATTR)
    if st is None:
        st = False
        try:
            if (getattr(sched, "tp_rank", 0) or 0) == 0:
                index = getattr(sched, "dp_rank", None) or 0
                st = _Step(Emitter(wire.ENGINE_SGLANG, "sglang", _state.version("sglang"),
                                   index, _state.sender()))
        except Exception:
            _state.fail_once("sglang attach", sched)
            st = False
        sched.__dict__[_ATTR] = st
    return st


def _wrap_run(fn):
    time_ns = time.time_ns

    @functools.wraps(fn)
    def run_batch(self, *args, **kwargs):
        st = self.__dict__.get(_ATTR)
        if st is None:
            st = _state_of(self)
        if st is not False:
            st.launched.append(time_ns())
        return fn(self, *args, **kwargs)

    run_batch._inferprof_wrapped = True
    return run_batch


def _wrap_process(fn):
    time_ns = time.time_ns

    @functools.wraps(fn)
    def process_batch_result(self, batch, *args, **kwargs):
        st = self.__dict__.get(_ATTR)
        if st is None:
            st = _state_of(self)
        if st is False:
            return fn(self, batch, *args, **kwargs)
        before = None
        try:
            reqs = tuple(batch.reqs)
            before = [len(r.output_ids) for r in reqs]
        except Exception:
            _state.fail_once("sglang before", self)
        out = fn(self, batch, *args, **kwargs)
        t1 = time_ns()
        if before is not None:
            try:
                _after(self, st, batch, reqs, before, t1)
            except Exception:
                _state.fail_once("sglang step", self)
        return out

    process_batch_result._inferprof_wrapped = True
    return process_batch_result


def _after(sched, st, batch, reqs, before, t1):
    t0 = st.launched.popleft() if st.launched else t1
    fm = batch.forward_mode
    if fm.is_decode():
        decode = len(reqs)
        prefill = 0
        scheduled = decode
    elif fm.is_extend():
        decoding = getattr(batch, "decoding_reqs", None)
        decode = len(decoding) if decoding else 0
        prefill = len(reqs) - decode
        scheduled = getattr(batch, "extend_num_tokens", None) or 0
    else:
        return  # idle or dummy batches carry no requests
    em = st.emitter
    ids = em.ids
    entries = []
    i = 0
    for r in reqs:
        n = len(r.output_ids) - before[i]
        i += 1
        if n > 0:
            rid = r.rid
            e = ids.get(rid)
            if e is None:
                e = em.entry(rid)
            entries.append(e if n == 1 else wire.with_tokens(e, n))
            if getattr(r, "finished_reason", None) is not None:
                ids.pop(rid, None)
    try:
        rb = sched.running_batch
        running = len(rb.reqs) if rb is not None else 0
        waiting = len(sched.waiting_queue)
    except Exception:
        running = waiting = 0
    kv = None
    try:
        total = sched.max_total_num_tokens
        if total:
            free = sched.token_to_kv_pool_allocator.available_size() + \
                sched.tree_cache.evictable_size()
            kv = 1.0 - free / total
    except Exception:
        kv = None
    em.emit(t0, t1, prefill, decode, scheduled, running, waiting, kv, entries, ())
