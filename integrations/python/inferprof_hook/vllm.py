# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""vLLM v1: one step per scheduler.update_from_output(scheduler_output, ...).

With async scheduling (the default) EngineCore.step_with_batch_queue
schedules batch N+1 and only then hands batch N's model output to
update_from_output, so the SchedulerOutput a call of step() scheduled is not
the one whose tokens it returns. The one place where a batch and its tokens
meet is update_from_output(scheduler_output, model_output): the hook wraps
it on the engine's scheduler instance (which covers custom and async
scheduler classes) and emits from there. scheduler.schedule is wrapped too,
to learn when each batch was scheduled.

A step runs from when its batch was scheduled, or from the end of the
previous update if that came later, to the return of its update.

Launch windows. Under async scheduling that range holds the next batch's
launches too (step_with_batch_queue launches batch N+1 before it waits for
N), so each step also carries the intervals in which its own batch was
launched on the engine thread, taken from the two calls the hook already
times, with no clock read or wrapper of their own: vLLM calls execute_model,
then sample_tokens, right after schedule() returns and before the next
schedule() or the end of the next update_from_output (EngineCore.step and
step_with_batch_queue, vllm/v1/engine/core.py @00080ee1; one execute_model
per schedule() in both), and the scheduler itself launches nothing (it runs
on the CPU), so a batch's window runs from its schedule() call to the next
schedule() call or update end. The deferred sampling of a structured-output
batch (step_with_batch_queue calls sample_tokens for the newest batch after
update_from_output of the previous one) is covered by keeping the newest
batch's window open from the end of an update to the next schedule(). With
the uniprocess executor (one GPU) these calls run the worker on the engine
thread (UniProcExecutor.collective_rpc -> run_method(driver_worker, ...),
vllm/v1/executor/uniproc_executor.py @01e4fce0), so that is where the
batch's kernels are launched. With the multiprocess executor (tensor
parallelism) they only enqueue the call for the worker processes, which
launch when their main thread takes it off the queue
(WorkerProc.worker_busy_loop, multiproc_executor.py @00f6c9bf); the hook
then runs in each worker too (patch_worker) and sends a launch mark per
call, numbered as the engine numbers schedule() calls.

EngineCore.__init__ is patched at class level, so the hook attaches to every
engine as it is built. EngineCore.preprocess_add_request is patched to
record the API request id of each request as it arrives: vLLM makes its own
id f"{api_id}-{random8}", and the request spans carry the API id. An id
leaves the table when the scheduler lists it in finished_req_ids, which
covers aborts too.

Only counts and request ids are read: never prompt or output token values
(the length of new_token_ids is the number of tokens a request got).
"""

import collections
import functools
import os
import time

from . import _state, points, wire
from .emitter import Emitter

MODULE = "vllm.v1.engine.core"
# Where the multiprocess executor's worker processes live.
WORKER_MODULE = "vllm.v1.executor.multiproc_executor"
_ATTR = "_inferprof_step"

# What the hook was checked against: the patch table (points.VLLM) over
# each release's source, and the live classes of one release (see the
# README and docs/compatibility.md).
CHECKED = "the vLLM releases in inferprof's docs/compatibility.md (points.VLLM)"

# Bound on preempted requests waiting to be resumed; past it the oldest go.
MAX_PREEMPTED = 65536

# Stands for scheduled_spec_decode_tokens where a version lacks it: truthy
# (so no step is assumed free of draft tokens) and empty for every request.
_UNKNOWN_SPEC = {None: ()}


class _Step:
    """Hook state attached to one EngineCore instance."""

    __slots__ = ("emitter", "scheduler", "scheduled", "last_end", "preempted", "checked",
                 "has_preprocess", "batches", "open", "windows", "tid", "core", "restore")

    def __init__(self, emitter, scheduler, has_preprocess):
        self.emitter = emitter
        self.scheduler = scheduler
        self.core = None
        # How to put the scheduler's own methods back (see _off).
        self.restore = ()
        # [SchedulerOutput, time schedule() was called, batch number, launch
        # window end], oldest first (see _wrap_schedule). The batch queue holds at most
        # max_concurrent_batches of them.
        self.scheduled = collections.deque(maxlen=16)
        # schedule() calls so far: the number of the last batch. Worker
        # processes count their execute_model calls, one per schedule().
        self.batches = 0
        # The entry whose launch window is open.
        self.open = None
        self.windows = _state.launch_windows()
        # The engine thread's id (gettid): EngineCoreProc is built and runs
        # its busy loop on one thread (run_engine_core, core.py @00080ee1);
        # read again at the first step in case an embedder steps the engine
        # on another thread than it built it on.
        self.tid = _state.thread.id
        self.last_end = 0
        # Preempted request ids not yet resumed (dict as an ordered set).
        self.preempted = {}
        self.checked = False
        self.has_preprocess = has_preprocess


def patch(module):
    """Patches module.EngineCore; returns the names wrapped."""
    cls = getattr(module, "EngineCore", None)
    init = getattr(cls, "__init__", None) if cls is not None else None
    if cls is None or not callable(getattr(cls, "step", None)) or init is object.__init__:
        _state.warn_once("vllm", "inferprof: vLLM %s has no v1 EngineCore; "
                         "engine step spans are off", _state.version("vllm"))
        return []
    wrapped = []
    fn = cls.__dict__.get("__init__")
    if fn is not None:
        if not getattr(fn, "_inferprof_wrapped", False):
            cls.__init__ = _wrap_init(fn)
        wrapped.append("__init__")
    fn = cls.__dict__.get("preprocess_add_request")
    if fn is not None:
        if not getattr(fn, "_inferprof_wrapped", False):
            cls.preprocess_add_request = _wrap_preprocess(fn)
        wrapped.append("preprocess_add_request")
    return wrapped


def _wrap_init(fn):
    @functools.wraps(fn)
    def __init__(self, *args, **kwargs):
        fn(self, *args, **kwargs)
        if _ATTR not in self.__dict__:
            _attach(self)

    __init__._inferprof_wrapped = True
    return __init__


def _wrap_preprocess(fn):
    @functools.wraps(fn)
    def preprocess_add_request(self, request, *args, **kwargs):
        out = fn(self, request, *args, **kwargs)
        # Runs on vLLM's input thread, before the request reaches the
        # scheduler; request_id is already the engine's own id here.
        try:
            st = self.__dict__.get(_ATTR)
            if st:
                ext = getattr(request, "external_req_id", None)
                if ext:
                    st.emitter.alias(request.request_id, ext)
        except Exception:
            _state.fail_once("vllm preprocess_add_request", self)
        return out

    preprocess_add_request._inferprof_wrapped = True
    return preprocess_add_request


def _attach(core):
    """Sets up hook state for one engine; False disables the hook for it.

    The patch table is checked here, once per engine: an engine that lacks
    a required point gets one line saying what is missing and no hook,
    rather than a failure on every step; a missing optional point marks
    its steps degraded."""
    st = False
    try:
        sched = getattr(core, "scheduler", None)
        req, opt = points.check(points.VLLM, {
            "EngineCore": core, "Scheduler": sched,
            "KVCacheManager": getattr(sched, "kv_cache_manager", None)})
        if req:
            _state.off("vLLM", _state.version("vllm"), CHECKED, req)
            core.__dict__[_ATTR] = False
            return False
        update = sched.update_from_output
        schedule = sched.schedule
        index = getattr(core, "engine_index", None)
        if index is None:
            pc = getattr(getattr(core, "vllm_config", None), "parallel_config", None)
            index = getattr(pc, "data_parallel_rank", 0) or 0
        st = _Step(Emitter(wire.ENGINE_VLLM, "vllm", _state.version("vllm"), index,
                           _state.sender()), sched,
                   callable(getattr(type(core), "preprocess_add_request", None)))
        st.core = core
        own = sched.__dict__
        st.restore = (("schedule", own.get("schedule")), ("update_from_output", own.get("update_from_output")))
        _state.degrade(st.emitter, "vLLM", _state.version("vllm"), CHECKED, opt)
        sched.schedule = _wrap_schedule(st, schedule)
        sched.update_from_output = _wrap_update(st, update)
    except Exception:
        _state.fail_once("vllm attach", core)
        st = False
    core.__dict__[_ATTR] = st
    return st


def _off(st, where):
    """Turns the hook off for one engine after an unexpected error, in one
    line: the scheduler gets its own methods back, so no later step pays
    for the hook or fails the same way."""
    _state.off_after_error(where, "vLLM", _state.version("vllm"))
    try:
        sched = st.scheduler
        for name, own in st.restore:
            if own is None:
                sched.__dict__.pop(name, None)
            else:
                setattr(sched, name, own)
        if st.core is not None:
            st.core.__dict__[_ATTR] = False
    except Exception:
        pass


# A scheduled entry is [SchedulerOutput, time schedule() was called, batch
# number, end of its launch window]. The window starts at the schedule()
# call and reuses the step's own clock reads: it ends at the next
# schedule() call or update end (0 while open; st.open is then the entry).
# vLLM's engine thread launches a batch in one window: the newest batch's
# window, ended by an update, is reopened rather than a second one begun.


def _wrap_schedule(st, schedule):
    time_ns = time.time_ns
    scheduled = st.scheduled
    append = scheduled.append
    windows = st.windows

    @functools.wraps(schedule)
    def caught_schedule(*args, **kwargs):
        t = time_ns()
        o = st.open
        if o is not None:
            o[3] = t
        # vLLM calls schedule() bare; forwarding nothing skips building the
        # call from *args and **kwargs on every step.
        so = schedule(*args, **kwargs) if args or kwargs else schedule()
        if windows:
            # execute_model and sample_tokens follow: the batch's launches.
            st.batches += 1
            st.open = e = [so, t, st.batches, 0]
            append(e)
        else:
            append([so, t, 0, 0])
        return so

    return caught_schedule


def _wrap_update(st, update):
    time_ns = time.time_ns
    scheduled = st.scheduled

    # The parameters keep vLLM's names (points.VLLM), so a call by keyword
    # reaches the engine as it would unhooked.
    @functools.wraps(update)
    def update_from_output(scheduler_output, model_runner_output, *args, **kwargs):
        if args or kwargs:
            out = update(scheduler_output, model_runner_output, *args, **kwargs)
        else:
            out = update(scheduler_output, model_runner_output)
        t1 = time_ns()
        o = st.open
        if o is not None:
            o[3] = t1
            st.open = None
        try:
            _after(st, scheduler_output, out, t1)
        except Exception:
            _off(st, "vllm step")
            return out
        st.last_end = t1
        if scheduled:
            # Until the next schedule(), the newest batch not yet updated
            # may still be sampled (deferred structured-output sampling):
            # its window, ended just now, goes on.
            o = scheduled[-1]
            if o[3] == t1:
                st.open = o
        return out

    return update_from_output


def _scheduled_entry(st, so, t1):
    """The scheduled entry of so; drops older entries that never got an
    update."""
    q = st.scheduled
    while q:
        e = q.popleft()
        if e[0] is so:
            return e
    return [so, st.last_end or t1, 0, 0]


def _first_step(st):
    st.checked = True
    # The thread that steps the engine (read again here in case an embedder
    # steps it on another thread than it built it on).
    st.tid = _state.thread.id


def _after(st, so, out, t1):
    q = st.scheduled
    # The batch updated is the oldest scheduled one, unless a schedule()
    # never got its update.
    if q and q[0][0] is so:
        rec = q.popleft()
    else:
        rec = _scheduled_entry(st, so, t1)
    t0 = rec[1]
    if t0 < st.last_end:
        t0 = st.last_end  # async: scheduled while the previous batch was updated
    if not st.checked:
        _first_step(st)
    em = st.emitter
    new = so.scheduled_new_reqs
    if new:
        _alias_new(em, st.scheduler, new)  # before their first token
    outputs = out[0] if type(out) is tuple else out
    # Plain attribute reads with try: on this path getattr() with a default
    # costs more than the rest of the block, and try is free when nothing raises.
    try:
        spec = so.scheduled_spec_decode_tokens
    except AttributeError:
        spec = _UNKNOWN_SPEC
    entries = None
    if outputs:
        if not spec and type(outputs) is dict and len(outputs) == 1:
            # One client, no draft tokens: vLLM samples at most one token per
            # request and step (update_from_output takes
            # sampled_token_ids[req_index], one per request, or none for a
            # prompt chunk), so a request got a token exactly when its
            # new_token_ids is non-empty. One comprehension, no len() per
            # request; ids the table lacks (KeyError) take _entries.
            ids = em.ids
            for eco in outputs.values():
                try:
                    entries = [ids[o.request_id] for o in eco.outputs if o.new_token_ids]
                except KeyError:
                    pass
        if entries is None:
            entries = _entries(em, outputs)
    else:
        entries = []
    try:
        finished = so.finished_req_ids
    except AttributeError:
        finished = None
    try:
        pre = so.preempted_req_ids
    except AttributeError:
        pre = None
    scheduled = so.total_num_scheduled_tokens
    # A schedule() that found nothing to run (requests waiting for remote KV
    # or grammar compilation) is not a step; vLLM retries it every 1 ms.
    if scheduled or entries or pre:
        batch = rec[2]
        # Its launch window: from its schedule() call (rec[1], not t0) to
        # rec[3]; a wall clock stepping back leaves it empty.
        _emit(st, em, so, new, spec, scheduled, entries, pre, t0, t1, batch,
              (rec[1], rec[3], st.tid) if batch and rec[3] >= rec[1] else ())
    if finished:
        ids = em.ids
        pending = st.preempted
        for rid in finished:
            ids.pop(rid, None)
            if pending:
                pending.pop(rid, None)


def _entries(em, outputs):
    """The token entries of a step's outputs, one per request that got
    tokens, under its API id; the general case of _after's comprehension.

    outputs is dict[client_index, EngineCoreOutputs] in current vLLM, one
    EngineCoreOutputs in early v1 releases.
    """
    entries = []
    ids = em.ids
    for eco in (outputs.values() if type(outputs) is dict else (outputs,)):
        for o in eco.outputs:
            n = len(o.new_token_ids)
            if n:
                rid = o.request_id
                e = ids.get(rid) or em.entry(rid)
                entries.append(e if n == 1 else wire.with_tokens(e, n))
    return entries


def _emit(st, em, so, new, spec, scheduled, entries, pre, t0, t1, batch, windows):
    cached = so.scheduled_cached_reqs
    req_ids = cached.req_ids
    pending = st.preempted
    try:
        resumed = cached.resumed_req_ids
    except AttributeError:
        flags = getattr(cached, "resumed_from_preemption", None)
        resumed = {r for r, f in zip(req_ids, flags) if f} if flags else None
    if pending and new:
        # The v2 model runner lists resumed requests as new ones.
        back = [nr.req_id for nr in new if nr.req_id in pending]
        if back:
            resumed = set(resumed or ()) | set(back)
    try:
        num_out = cached.num_output_tokens
    except AttributeError:
        num_out = None
    n_cached = len(req_ids)
    if num_out is not None and len(num_out) != n_cached:
        num_out = None
    # A cached request is decoding when it was scheduled one token plus its
    # drafts and has output tokens (placeholders included); anything else is
    # a prompt chunk, or the recompute of a resumed request.
    nst = so.num_scheduled_tokens
    new_tokens = 0
    if new:
        for nr in new:
            new_tokens += nst.get(nr.req_id, 0)
    drafts = 0
    if spec:
        for d in spec.values():
            drafts += len(d)
    else:
        spec = {}
    if scheduled - new_tokens == n_cached + drafts:
        # Every cached request got exactly 1 + its drafts (each gets at
        # least that), the common all-decode step: no per-request loop.
        decode = n_cached
        if num_out is not None and not all(num_out):
            decode -= num_out.count(0)
    else:
        decode = 0
        for i, rid in enumerate(req_ids):
            if nst.get(rid) == 1 + len(spec.get(rid, ())) and (num_out is None or num_out[i]):
                decode += 1
    prefill = len(new) + n_cached - decode
    resumed_b = ()
    if resumed:
        resumed_b = [em.id_bytes(r) for r in resumed]
        for r in resumed:
            pending.pop(r, None)
    preempted_b = ()
    if pre:
        preempted_b = [em.id_bytes(r) for r in pre]
        for r in pre:
            if r not in pending and len(pending) >= MAX_PREEMPTED:
                try:
                    del pending[next(iter(pending))]
                    em.evicted += 1
                except (RuntimeError, StopIteration, KeyError):
                    pass
            pending[r] = None
    sched = st.scheduler
    try:
        running = len(sched.running)
        waiting = len(sched.waiting)
    except Exception:
        running = waiting = 0
    try:
        kv = sched.kv_cache_manager.usage
    except Exception:
        kv = None
    em.emit(t0, t1, prefill, decode, scheduled, running, waiting, kv, entries,
            preempted_b, resumed_b, batch, windows)


def _alias_new(em, sched, new_reqs):
    """Fallback for requests preprocess_add_request did not see: some vLLM
    versions keep the API id on the engine-side Request."""
    ids = em.ids
    reqs = getattr(sched, "requests", None)
    if reqs is None:
        return
    for nr in new_reqs:
        rid = nr.req_id
        if rid not in ids:
            ext = getattr(reqs.get(rid), "external_req_id", None)
            if ext:
                em.alias(rid, ext)


class _Worker:
    """Hook state of one executor worker process: its batch count and the
    emitter its launch marks go out through."""

    __slots__ = ("emitter", "ident", "pid", "ppid", "batch", "tokens")

    def __init__(self):
        self.emitter = Emitter(wire.ENGINE_VLLM, "vllm", _state.version("vllm"), 0, _state.sender())
        iid = _state.instance_id()
        # The host as the step records and the CUPTI library name it.
        self.ident = wire.mark_identity(_state.engine_host(), iid)
        self.pid = os.getpid()
        self.ppid = os.getppid()
        self.batch = 0
        self.tokens = 0

    def mark(self, t0, t1):
        """Sends the batch's one launch mark (final: no other follows)."""
        rec = wire.encode_mark(wire.ENGINE_VLLM, self.pid, self.ppid, self.batch, t0, t1,
                               _state.thread.id, self.tokens, self.emitter.dropped,
                               self.ident, True)
        self.emitter.send_record(rec, t1)


def patch_worker(module):
    """Patches module.WorkerProc (vLLM's multiprocess executor worker) so
    that each worker process sends launch marks; returns the names wrapped."""
    cls = getattr(module, "WorkerProc", None)
    fn = cls.__dict__.get("__init__") if cls is not None else None
    if fn is None or not _state.launch_windows():
        return []
    if not getattr(fn, "_inferprof_wrapped", False):
        cls.__init__ = _wrap_worker_init(fn)
    return ["WorkerProc.__init__"]


def _wrap_worker_init(fn):
    @functools.wraps(fn)
    def __init__(self, *args, **kwargs):
        fn(self, *args, **kwargs)
        try:
            req, _ = points.check(points.VLLM, {
                "WorkerProc": self, "WorkerWrapperBase": getattr(self, "worker", None),
                "Worker": getattr(getattr(self, "worker", None), "worker", None)}, part="worker")
            if req:
                _state.off("vLLM executor workers", _state.version("vllm"), CHECKED, req)
            else:
                _attach_worker(self.worker)
        except Exception:
            _state.fail_once("vllm worker attach", self)

    __init__._inferprof_wrapped = True
    return __init__


def _off_worker(wrapper, where):
    """Turns the worker's marks off after an unexpected error, in one line:
    the wrapper's own methods come back (the hook set them on the
    instance)."""
    _state.off_after_error(where, "vLLM executor worker", _state.version("vllm"))
    for name in ("execute_model", "sample_tokens"):
        wrapper.__dict__.pop(name, None)


def _attach_worker(wrapper):
    """Wraps execute_model and sample_tokens on the worker's
    WorkerWrapperBase instance: the worker's busy loop calls
    getattr(self.worker, method), which finds them before the wrapper's
    class method or its __getattr__ (vllm/v1/worker/worker_base.py
    @02432253). One execute_model call per batch, as in the engine, so the
    k-th call here is the engine's batch k.

    One mark per batch: from its execute_model call to the end of its
    sample_tokens call, or of execute_model when that returned the output
    (no sample_tokens follows). The worker's busy loop takes calls in the
    order the engine enqueued them, and the engine enqueues a batch's
    sample_tokens before the next batch's execute_model, so nothing of
    another batch runs in between."""
    execute = wrapper.execute_model
    sample = getattr(wrapper, "sample_tokens", None)
    ws = _Worker()
    time_ns = time.time_ns
    now = time_ns()
    ws.mark(now, now)  # hello: batch 0, marks will follow
    # When the batch awaiting its sample_tokens began (0: none).
    started = [0]

    @functools.wraps(execute)
    def execute_model(scheduler_output, *args, **kwargs):
        t0 = time_ns()
        out = None
        try:
            out = execute(scheduler_output, *args, **kwargs)
            return out
        finally:
            try:
                ws.batch += 1
                ws.tokens = scheduler_output.total_num_scheduled_tokens
                if out is None and sample is not None:
                    started[0] = t0  # sample_tokens follows for this batch
                else:
                    started[0] = 0
                    ws.mark(t0, time_ns())
            except Exception:
                _off_worker(wrapper, "vllm worker execute_model")

    wrapper.execute_model = execute_model
    if not callable(sample):
        return

    @functools.wraps(sample)
    def sample_tokens(*args, **kwargs):
        t0 = time_ns()
        try:
            return sample(*args, **kwargs)
        finally:
            try:
                ws.mark(started[0] or t0, time_ns())
                started[0] = 0
            except Exception:
                _off_worker(wrapper, "vllm worker sample_tokens")

    wrapper.sample_tokens = sample_tokens
