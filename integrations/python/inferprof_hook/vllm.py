"""vLLM v1: wraps EngineCore.step and EngineCore.step_with_batch_queue.

EngineCore binds self.step_fn to one of the two in __init__, so the class is
patched as soon as vllm.v1.engine.core is imported, before any engine exists.
The scheduler's SchedulerOutput is caught by wrapping that engine's
scheduler.schedule on the instance, which works for custom scheduler classes.

Only counts and request ids are read: never prompt or output token values
(the length of new_token_ids is the number of tokens a request got).
"""

import functools
import time
from operator import countOf

from . import _state, wire
from .emitter import Emitter

MODULE = "vllm.v1.engine.core"
METHODS = ("step", "step_with_batch_queue")
_ATTR = "_inferprof_step"


class _Step:
    """Hook state attached to one EngineCore instance."""

    __slots__ = ("emitter", "scheduler", "last_so")

    def __init__(self, emitter, scheduler):
        self.emitter = emitter
        self.scheduler = scheduler
        self.last_so = None


def patch(module):
    """Wraps the step methods of module.EngineCore; returns the names wrapped."""
    cls = getattr(module, "EngineCore", None)
    if cls is None or not callable(getattr(cls, "step", None)):
        _state.warn_once("vllm", "inferprof: vLLM %s has no v1 EngineCore.step; "
                         "engine step spans are off", _state.version("vllm"))
        return []
    wrapped = []
    for name in METHODS:
        fn = cls.__dict__.get(name)
        if fn is None:
            continue
        if not getattr(fn, "_inferprof_wrapped", False):
            setattr(cls, name, _wrap(fn))
        wrapped.append(name)
    return wrapped


def _wrap(fn):
    time_ns = time.time_ns

    @functools.wraps(fn)
    def step(self, *args, **kwargs):
        st = self.__dict__.get(_ATTR)
        if st is None:
            st = _attach(self)
        if st is False:
            return fn(self, *args, **kwargs)
        t0 = time_ns()
        # vLLM calls step() without arguments; a plain call is cheaper than
        # unpacking empty ones.
        out = fn(self, *args, **kwargs) if args or kwargs else fn(self)
        t1 = time_ns()
        try:
            _after(st, out, t0, t1)
        except Exception:
            _state.fail_once("vllm step", self)
        return out

    step._inferprof_wrapped = True
    return step


def _attach(core):
    """Sets up hook state for one engine; False disables the hook for it."""
    st = False
    try:
        sched = core.scheduler
        index = getattr(core, "engine_index", None)
        if index is None:
            pc = getattr(getattr(core, "vllm_config", None), "parallel_config", None)
            index = getattr(pc, "data_parallel_rank", 0) or 0
        st = _Step(Emitter(wire.ENGINE_VLLM, "vllm", _state.version("vllm"), index,
                           _state.sender()), sched)
        schedule = sched.schedule

        @functools.wraps(schedule)
        def caught_schedule(*args, **kwargs):
            so = schedule(*args, **kwargs) if args or kwargs else schedule()
            st.last_so = so
            return so

        sched.schedule = caught_schedule
    except Exception:
        _state.fail_once("vllm attach", core)
        st = False
    core.__dict__[_ATTR] = st
    return st


def _after(st, out, t0, t1):
    so = st.last_so
    st.last_so = None
    em = st.emitter
    sched = st.scheduler
    if so is not None and so.scheduled_new_reqs:
        _alias_new(em, sched, so.scheduled_new_reqs)  # before their first token
    outputs = out[0] if type(out) is tuple else out
    entries = []
    if outputs:
        ids = em.ids
        # dict[client_index, EngineCoreOutputs] in current vLLM, one
        # EngineCoreOutputs in early v1 releases.
        for eco in (outputs.values() if type(outputs) is dict else (outputs,)):
            for o in eco.outputs:
                rid = o.request_id
                n = len(o.new_token_ids)
                if n:
                    e = ids.get(rid) or em.entry(rid)
                    entries.append(e if n == 1 else wire.with_tokens(e, n))
                if o.finish_reason is not None:
                    ids.pop(rid, None)
    if so is None:
        if not entries:
            return  # an idle call: nothing scheduled, nothing produced
        prefill = decode = scheduled = 0
        preempted = ()
    else:
        nst = so.num_scheduled_tokens
        scheduled = so.total_num_scheduled_tokens
        total = len(nst)
        # A decode request is scheduled one token plus its draft tokens; any
        # other count is a prompt chunk.
        decode = countOf(nst.values(), 1)
        # Plain attribute reads: on this path getattr() with a default costs
        # more than the rest of the block, and try is free when nothing raises.
        try:
            spec = so.scheduled_spec_decode_tokens
        except AttributeError:
            spec = None
        if spec:
            decode += len(spec)
            if decode > total:
                decode = total
        prefill = total - decode
        try:
            pre = so.preempted_req_ids
        except AttributeError:
            pre = None
        # An id's wire form is its one-token entry without the count.
        preempted = [em.entry(r)[2:] for r in pre] if pre else ()
    try:
        running = len(sched.running)
        waiting = len(sched.waiting)
    except Exception:
        running = waiting = 0
    try:
        kv = sched.kv_cache_manager.usage
    except Exception:
        kv = None
    em.emit(t0, t1, prefill, decode, scheduled, running, waiting, kv, entries, preempted)


def _alias_new(em, sched, new_reqs):
    """Newer vLLM suffixes the API request id to make the engine's own; the
    request spans carry the API one, so report that."""
    reqs = getattr(sched, "requests", None)
    if reqs is not None:
        for nr in new_reqs:
            ext = getattr(reqs.get(nr.req_id), "external_req_id", None)
            if ext:
                em.alias(nr.req_id, ext)
