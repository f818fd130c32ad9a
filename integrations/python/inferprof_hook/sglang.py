# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""SGLang: wraps Scheduler.run_batch, process_batch_result and update_running_batch.

One step is one batch. Its make-up is captured when run_batch launches it:
the overlap scheduler (SGLang's default) hands process_batch_result a
batch.copy() that lacks extend_num_tokens, and only launch time has it. The
capture waits in a FIFO until process_batch_result gets the batch (or its
copy, which shares the batch's reqs list). A step runs from its launch, or
from the end of the previous batch's processing if that came later (the
overlap loop launches batch N before it processes N-1), to the end of its
own processing. Tokens a request got are the growth of len(req.output_ids)
across process_batch_result, which also counts speculative tokens. Token
values are never read.

Every rank of a server runs a Scheduler. Current SGLang keeps the ranks in
self.ps (a ParallelState); a step is reported where the attention-TP, CP and
PP ranks are 0, under engine index = attention-DP rank with DP attention,
else the DP rank.

Retractions (SGLang's preemptions) happen in update_running_batch, which
drops retracted requests from the decode batch it is preparing; they are
reported with that batch, and reported again as resumed when a prefill batch
takes them back.

Launch windows. The scheduler thread launches a batch's GPU work itself
(run_batch calls model_worker.forward_batch_generation inside
forward_stream_ctx; scheduler.py @0003215c), in four places, and the step
carries each as a launch window: get_next_batch_to_run, which prepares the
batch (prepare_for_extend/prepare_for_decode allocate KV slots and build
its tensors on the schedule stream); run_batch (the forward, and sampling
unless it is delayed); launch_batch_sample_if_needed, which the overlap
loop calls after processing the previous batch (sampling that waits for a
grammar); and process_batch_result (frees and caches what the batch
finished). The overlap loop runs these for batch N while N-1 is processed,
so the step's time range alone would hold the wrong launches.

SGLang before the future-map overlap (TpModelWorkerClient,
managers/tp_worker_overlap_thread.py @0045f98e) ran the forward on a thread
of its own: run_batch put (model_worker_batch, future id) on the client's
input_queue, and forward_thread_func_ took each off in order, resolved its
input ids, ran forward_batch_generation, wrote the future token map and
started the copy to the CPU. Each iteration of that thread is the batch's
launch window on that thread: the hook gives that module a Queue whose put
remembers the batch being run and whose get opens a window for it and
closes the thread's previous one (patch_overlap_thread).
"""

import collections
import functools
import operator
import sys
import threading
import time

from . import _state, points, wire
from .emitter import Emitter

MODULE = "sglang.srt.managers.scheduler"
# Older SGLang's forward thread (TpModelWorkerClient).
OVERLAP_MODULE = "sglang.srt.managers.tp_worker_overlap_thread"
_ATTR = "_inferprof_step"

# The launch being run by run_batch, while it runs (one scheduler per
# process); the forward thread's queue items, by id, to their launch; the
# forward thread's open window, by thread id.
_running = None
_queued = {}
_open = {}

# What the hook was checked against (see the README and docs/compatibility.md).
CHECKED = "the SGLang releases in inferprof's docs/compatibility.md (points.SGLANG)"

# Bound on retracted requests waiting to be resumed; past it the oldest go.
MAX_RETRACTED = 65536

_has_update_running_batch = True
_sub = operator.sub


class _Launch:
    """A batch as run_batch launched it."""

    __slots__ = ("batch", "reqs", "t0", "kind", "prefill", "decode", "scheduled",
                 "retracted", "resumed", "number", "windows")

    def __init__(self, batch, reqs, t0):
        self.batch = batch
        self.reqs = reqs
        self.t0 = t0
        self.number = 0
        # (start_ns, end_ns, thread id) of the calls that launched its work.
        self.windows = []
        self.kind = 0  # 0: nothing to report (idle), 1: extend, 2: decode
        self.prefill = self.decode = self.scheduled = 0
        self.retracted = ()
        self.resumed = ()


class _Step:
    __slots__ = ("emitter", "launched", "last_end", "retracted", "retracted_next", "checked",
                 "missing", "draft_tokens", "batches", "prep", "windows")

    def __init__(self, emitter, missing, draft_tokens):
        self.emitter = emitter
        # Launched batches whose results are not processed yet; the overlap
        # loop keeps at most two in flight.
        self.launched = collections.deque(maxlen=8)
        self.last_end = 0
        # Retracted request ids not yet resumed (dict as an ordered set).
        self.retracted = {}
        # Retracted while preparing the next decode batch, reported with it.
        self.retracted_next = []
        self.checked = False
        self.missing = missing
        self.draft_tokens = draft_tokens
        # run_batch calls so far: the number of the last batch.
        self.batches = 0
        # The get_next_batch_to_run call that prepared the next batch.
        self.prep = None
        self.windows = _state.launch_windows()


def patch(module):
    global _has_update_running_batch
    cls = getattr(module, "Scheduler", None)
    if cls is None or not callable(getattr(cls, "process_batch_result", None)) \
            or not callable(getattr(cls, "run_batch", None)):
        _state.warn_once("sglang", "inferprof: SGLang %s has no Scheduler.run_batch/"
                         "process_batch_result; engine step spans are off",
                         _state.version("sglang"))
        return []
    # The patch table's methods, once, before anything is wrapped; the
    # instance attributes are checked at the first step (_check).
    req, _ = points.check(points.SGLANG, {"Scheduler": cls})
    if req:
        _state.off("SGLang", _state.version("sglang"), CHECKED, req)
        return []
    wrapped = []
    for name, wrap in (("run_batch", _wrap_run), ("process_batch_result", _wrap_process),
                       ("update_running_batch", _wrap_update_running),
                       ("get_next_batch_to_run", _wrap_next),
                       ("launch_batch_sample_if_needed", _wrap_sample)):
        fn = cls.__dict__.get(name)
        if fn is None:
            continue
        if not getattr(fn, "_inferprof_wrapped", False):
            setattr(cls, name, wrap(fn))
        wrapped.append(name)
    _has_update_running_batch = callable(getattr(cls, "update_running_batch", None))
    return wrapped


def _parallel_context():
    """SGLang 0.5.21 and later keep the ranks process-wide, in
    sglang.srt.runtime_context.get_parallel() (a ParallelContext whose
    unpublished names raise), not on the scheduler; None before."""
    mod = sys.modules.get("sglang.srt.runtime_context")
    fn = getattr(mod, "get_parallel", None)
    if fn is None:
        return None
    try:
        return fn()
    except Exception:
        return None


def _read(obj, name, default):
    try:
        return getattr(obj, name)
    except Exception:
        return default


def _ranks(sched):
    """(reports, engine index, what is missing) for one scheduler."""
    ps = getattr(sched, "ps", None)
    if ps is None:
        ps = _parallel_context()
        if ps is not None and (_read(ps, "attn_tp_rank", None) is None or _read(ps, "pp_rank", None) is None):
            ps = None  # not published in this process
    if ps is not None:
        attn_tp, pp = _read(ps, "attn_tp_rank", 0), _read(ps, "pp_rank", 0)
        cp = _read(ps, "attn_cp_rank", 0)
        attn_dp, attn_dp_size = _read(ps, "attn_dp_rank", 0), _read(ps, "attn_dp_size", None)
        dp = _read(ps, "dp_rank", None)
    else:
        # SGLang before ParallelState kept the ranks on the scheduler.
        tp = getattr(sched, "tp_rank", None)
        if tp is None:
            return True, 0, ["Scheduler.ps, tp_rank and get_parallel() (every rank may report)"]
        attn_tp = getattr(sched, "attn_tp_rank", tp)
        cp = getattr(sched, "attn_cp_rank", 0)
        pp = getattr(sched, "pp_rank", 0)
        attn_dp = getattr(sched, "attn_dp_rank", 0)
        attn_dp_size = getattr(sched, "attn_dp_size", None)
        dp = getattr(sched, "dp_rank", None)
    args = getattr(sched, "server_args", None)
    dp_attention = getattr(args, "enable_dp_attention", None)
    if dp_attention is None:
        dp_attention = bool(attn_dp_size and attn_dp_size > 1)
    index = (attn_dp if dp_attention else dp) or 0
    return (attn_tp or 0) == 0 and (cp or 0) == 0 and (pp or 0) == 0, index, []


def _state_of(sched):
    st = sched.__dict__.get(_ATTR)
    if st is None:
        st = False
        try:
            reports, index, missing = _ranks(sched)
            if reports:
                draft = 0
                args = getattr(sched, "server_args", None)
                if getattr(args, "speculative_algorithm", None):
                    draft = getattr(args, "speculative_num_draft_tokens", 0) or 0
                st = _Step(Emitter(wire.ENGINE_SGLANG, "sglang", _state.version("sglang"),
                                   index, _state.sender()), missing, draft)
        except Exception:
            _state.fail_once("sglang attach", sched)
            st = False
        sched.__dict__[_ATTR] = st
    return st


def _wrap_next(fn):
    time_ns = time.time_ns
    thread = _state.thread

    @functools.wraps(fn)
    def get_next_batch_to_run(self, *args, **kwargs):
        st = self.__dict__.get(_ATTR)
        if st is None:
            st = _state_of(self)
        if st is False or not st.windows:
            return fn(self, *args, **kwargs)
        t0 = time_ns()
        out = fn(self, *args, **kwargs)
        # Current SGLang returns a NextBatchPlan, older a ScheduleBatch.
        batch = getattr(out, "batch_to_run", out)
        st.prep = (t0, time_ns(), thread.id) if batch else None
        return out

    get_next_batch_to_run._inferprof_wrapped = True
    return get_next_batch_to_run


def _wrap_sample(fn):
    time_ns = time.time_ns
    thread = _state.thread

    # SGLang 0.5.3.post2 to 0.5.15.post1 take (batch_result) alone and read
    # self.cur_batch; later releases pass cur_batch (hook_compat.py). The
    # wrapper takes either and passes on exactly what it was given.
    @functools.wraps(fn)
    def launch_batch_sample_if_needed(self, batch_result, *args, **kwargs):
        st = self.__dict__.get(_ATTR)
        if st is None:
            st = _state_of(self)
        # Only a delayed sample launches anything (delay_sample_func).
        if st is False or not st.windows or getattr(batch_result, "delay_sample_func", None) is None:
            return fn(self, batch_result, *args, **kwargs)
        cur_batch = args[0] if args else kwargs.get("cur_batch", getattr(self, "cur_batch", None))
        t0 = time_ns()
        try:
            return fn(self, batch_result, *args, **kwargs)
        finally:
            q = st.launched
            if q and q[-1].batch is cur_batch and len(q[-1].windows) < wire.MAX_WINDOWS:
                q[-1].windows.append((t0, time_ns(), thread.id))

    launch_batch_sample_if_needed._inferprof_wrapped = True
    return launch_batch_sample_if_needed


def _wrap_run(fn):
    time_ns = time.time_ns
    thread = _state.thread

    @functools.wraps(fn)
    def run_batch(self, batch, *args, **kwargs):
        st = self.__dict__.get(_ATTR)
        if st is None:
            st = _state_of(self)
        if st is False:
            return fn(self, batch, *args, **kwargs)
        global _running
        launch = None
        t0 = time_ns()
        try:
            launch = _capture(st, batch, t0)
        except Exception:
            _state.fail_once("sglang run_batch", self)
        _running = launch
        try:
            out = fn(self, batch, *args, **kwargs)
        finally:
            _running = None
        if launch is not None:
            if st.windows:
                st.batches += 1
                launch.number = st.batches
                if st.prep is not None:
                    launch.windows.append(st.prep)
                launch.windows.append((t0, time_ns(), thread.id))
            st.launched.append(launch)
        st.prep = None
        return out

    run_batch._inferprof_wrapped = True
    return run_batch


def _capture(st, batch, t0):
    reqs = batch.reqs
    launch = _Launch(batch, reqs, t0)
    fm = batch.forward_mode
    if fm.is_decode():
        launch.kind = 2
        launch.decode = n = len(reqs)
        launch.scheduled = n * st.draft_tokens if st.draft_tokens else n
    elif fm.is_extend():
        launch.kind = 1
        decoding = getattr(batch, "decoding_reqs", None)  # mixed chunk: running reqs merged in
        launch.decode = len(decoding) if decoding else 0
        launch.prefill = len(reqs) - launch.decode
        try:
            launch.scheduled = batch.extend_num_tokens
        except AttributeError:
            launch.scheduled = 0
            _state.degrade(st.emitter, "SGLang", _state.version("sglang"), CHECKED,
                           ["ScheduleBatch.extend_num_tokens (prefill steps report 0 scheduled tokens)"])
        pending = st.retracted
        if pending:
            back = [r.rid for r in reqs if r.rid in pending]
            for rid in back:
                del pending[rid]
            launch.resumed = back
    if st.retracted_next and launch.kind:
        launch.retracted, st.retracted_next = st.retracted_next, []
    return launch


def _wrap_update_running(fn):
    @functools.wraps(fn)
    def update_running_batch(self, *args, **kwargs):
        st = self.__dict__.get(_ATTR)
        if st is None:
            st = _state_of(self)
        if st is False:
            return fn(self, *args, **kwargs)
        # SGLang of the forward-thread era (scheduler.py @0045f98e) passes no
        # batch: it updates self.running_batch in place and returns None.
        given = bool(args) or "batch" in kwargs
        batch = (args[0] if args else kwargs["batch"]) if given else getattr(self, "running_batch", None)
        reqs0 = batch.reqs if batch is not None else ()
        n0 = len(reqs0)
        out = fn(self, *args, **kwargs)
        try:
            # filter_batch and retract_decode build new reqs lists, so reqs0
            # still holds the batch as it came in.
            now = out if given else self.running_batch
            after = now.reqs if now is not None else ()
            if len(after) < n0:
                _retracted(st, reqs0, after)
        except Exception:
            _state.fail_once("sglang update_running_batch", self)
        return out

    update_running_batch._inferprof_wrapped = True
    return update_running_batch


def _retracted(st, before, after):
    kept = {id(r) for r in after}
    pending = st.retracted
    for r in before:
        # Finished requests leave through filter_batch; aborted ones carry
        # to_finish. What is left went back to the waiting queue.
        if id(r) in kept or r.finished() or getattr(r, "to_finish", None) is not None:
            continue
        rid = r.rid
        st.retracted_next.append(rid)
        if rid not in pending and len(pending) >= MAX_RETRACTED:
            del pending[next(iter(pending))]
            st.emitter.evicted += 1
        pending[rid] = None


def _wrap_process(fn):
    time_ns = time.time_ns

    @functools.wraps(fn)
    def process_batch_result(self, batch, *args, **kwargs):
        st = self.__dict__.get(_ATTR)
        if st is None:
            st = _state_of(self)
        if st is False:
            return fn(self, batch, *args, **kwargs)
        launch = before = None
        t0 = time_ns()
        try:
            launch = _match(st, batch)
            if launch.kind:
                before = [len(r.output_ids) for r in batch.reqs]
        except Exception:
            _state.fail_once("sglang before", self)
        out = fn(self, batch, *args, **kwargs)
        t1 = time_ns()
        if before is not None:
            if st.windows and len(launch.windows) < wire.MAX_WINDOWS:
                launch.windows.append((t0, t1, _state.thread.id))
            try:
                _after(self, st, batch, launch, before, t1)
            except Exception:
                _state.fail_once("sglang step", self)
        st.last_end = t1
        return out

    process_batch_result._inferprof_wrapped = True
    return process_batch_result


def _match(st, batch):
    """The launch of batch: the batch itself (normal loop) or the batch whose
    copy() this is (overlap loop: the copy shares its reqs list)."""
    q = st.launched
    reqs = batch.reqs
    for i, launch in enumerate(q):
        if launch.batch is batch or launch.reqs is reqs:
            for _ in range(i):
                q.popleft()  # launched, never processed
            return q.popleft()
    # Not launched through run_batch (or its launch was evicted): what the
    # batch itself still says, from the previous step's end.
    return _capture(st, batch, st.last_end or time.time_ns())


def _check(sched, st, batch):
    st.checked = True
    missing = list(st.missing)
    if not _has_update_running_batch:
        missing.append("Scheduler.update_running_batch (no retractions)")
    if batch.reqs and not hasattr(batch.reqs[0], "output_ids"):
        missing.append("Req.output_ids (no tokens)")
    if not (hasattr(sched, "running_batch") and hasattr(sched, "waiting_queue")):
        missing.append("Scheduler.running_batch/waiting_queue (queues reported as 0)")
    if not (hasattr(sched, "max_total_num_tokens") and hasattr(sched, "token_to_kv_pool_allocator")
            and hasattr(sched, "tree_cache")):
        missing.append("Scheduler.token_to_kv_pool_allocator/tree_cache (no KV cache usage)")
    _state.degrade(st.emitter, "SGLang", _state.version("sglang"), CHECKED, missing)


def _after(sched, st, batch, launch, before, t1):
    if not st.checked:
        _check(sched, st, batch)
    t0 = launch.t0
    if t0 < st.last_end:
        t0 = st.last_end  # overlap: launched while the previous batch was processed
    em = st.emitter
    ids = em.ids
    reqs = batch.reqs
    got = list(map(_sub, [len(r.output_ids) for r in reqs], before))
    entries = None
    if got.count(1) == len(got):
        # Every request got one token (a plain decode step): one
        # comprehension; ids the table lacks (KeyError) take the loop.
        try:
            entries = [ids[r.rid] for r in reqs]
        except KeyError:
            pass
    if entries is None:
        entries = []
        for r, n in zip(reqs, got):
            if n > 0:
                e = ids.get(r.rid) or em.entry(r.rid)
                entries.append(e if n == 1 else wire.with_tokens(e, n))
    for r in reqs:
        if r.finished_reason is not None:
            ids.pop(r.rid, None)
    if not (launch.scheduled or entries or launch.retracted):
        return
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
    windows = _flat_windows(launch.windows, t1)
    em.emit(t0, t1, launch.prefill, launch.decode, launch.scheduled, running, waiting, kv,
            entries, [wire.id_bytes(r) for r in launch.retracted] if launch.retracted else (),
            [wire.id_bytes(r) for r in launch.resumed] if launch.resumed else (),
            launch.number, windows)


def _flat_windows(windows, t1):
    """The batch's windows for the wire, a forward thread's window still
    open (its end None: that thread is finishing the batch's iteration
    now) ending at t1. Tested per window, not by _open: the forward thread
    takes its window out of _open before it sets the end, and the GIL can
    pass to this thread in between."""
    if not windows:
        return ()
    return wire.flat_windows([(a, t1 if b is None else b, t) for a, b, t in windows])


def patch_overlap_thread(module):
    """Gives older SGLang's forward thread module a Queue that times each
    batch's iteration of the thread; returns the names wrapped."""
    base = getattr(module, "Queue", None)
    if base is None or getattr(module, "TpModelWorkerClient", None) is None or not _state.launch_windows():
        return []
    if not getattr(base, "_inferprof_wrapped", False):
        module.Queue = _timed_queue(base)
    return ["Queue"]


def _timed_queue(base):
    time_ns = time.time_ns
    thread = _state.thread

    class Queue(base):
        """The forward thread's input queue: put (run_batch, on the
        scheduler thread) remembers the batch an item belongs to; get (the
        forward thread) closes the thread's previous window and opens one
        for the batch of the item it returns."""

        _inferprof_wrapped = True

        def put(self, item, *args, **kwargs):
            launch = _running
            if launch is not None and type(item) is tuple and item:
                try:
                    if len(_queued) >= 64:
                        _queued.pop(next(iter(_queued)))
                    _queued[id(item[0])] = launch
                except Exception:
                    _state.fail_once("sglang forward queue put")
            return base.put(self, item, *args, **kwargs)

        def get(self, *args, **kwargs):
            tid = thread.id
            w = _open.pop(tid, None)
            if w is not None:
                w[1] = time_ns()
            item = base.get(self, *args, **kwargs)
            if type(item) is tuple and item:
                launch = _queued.pop(id(item[0]), None)
                if launch is not None and len(launch.windows) < wire.MAX_WINDOWS:
                    w = [time_ns(), None, tid]
                    launch.windows.append(w)
                    _open[tid] = w
            return item

    return Queue
