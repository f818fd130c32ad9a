# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""What the hook patches and reads in each engine: one table, two readers.

The hook checks the table against the live classes once, when it attaches
to an engine (check(), with hasattr and inspect.signature, never per step),
and tools/hook_compat.py checks it against each release's source, read with
ast from the sdist, to write the table in docs/compatibility.md.

A point is (module, class, name, kind, params, required, cost):
- module: where the class lives, or a tuple of places it lived (newest
  first); at attach time the class of a live instance is used instead
  where the hook has one (the engine's scheduler, whatever its class).
- kind: "method" (a function of the class or a base, whose parameters
  after self start with params: the names the hook's wrapper takes and
  passes on), "field" (a dataclass or msgspec field, a class annotation or
  a class attribute), or "attr" (an instance attribute set in a method,
  such as self.scheduler in __init__; a property counts), or "func" (a
  function of the module; cls is ""). name "a|b" is met by either.
- group: points of one group are met when any of them is (the same thing
  kept in different places by different releases).
- required: True: without it the hook stays off for that engine, and says
  so in one line; False: cost says what the steps lack, and they are marked
  degraded; None: read where present, and nothing is lost without it (cost
  says why).
"""

import dataclasses
import importlib
import inspect
import sys

METHOD, FIELD, ATTR, FUNC = "method", "field", "attr", "func"

_CORE = "vllm.v1.engine.core"
_SCHED = ("vllm.v1.core.sched.scheduler", "vllm.v1.core.scheduler")
_OUTPUT = ("vllm.v1.core.sched.output", "vllm.v1.core.scheduler_output", "vllm.v1.core.scheduler")
_ENGINE = "vllm.v1.engine"
_KV = "vllm.v1.core.kv_cache_manager"
_WORKER = "vllm.v1.executor.multiproc_executor"
_WRAPPER = ("vllm.v1.worker.worker_base", "vllm.worker.worker_base")
# The worker the wrapper holds: the GPU one here; at attach time, whichever it is.
_GPU_WORKER = "vllm.v1.worker.gpu_worker"


class Point(tuple):
    __slots__ = ()
    _names = ("module", "cls", "name", "kind", "params", "required", "cost", "part", "group")

    def __new__(cls, module, klass, name, kind, params=(), required=True, cost="", part="engine", group=""):
        return tuple.__new__(cls, (module, klass, name, kind, tuple(params), required, cost, part, group))

    module = property(lambda s: s[0])
    cls = property(lambda s: s[1])
    name = property(lambda s: s[2])
    kind = property(lambda s: s[3])
    params = property(lambda s: s[4])
    required = property(lambda s: s[5])
    cost = property(lambda s: s[6])
    # "engine": the engine step hook; "worker": the executor workers'
    # launch marks, which a release can lack while its steps still work.
    part = property(lambda s: s[7])
    group = property(lambda s: s[8])

    def modules(self):
        return self.module if isinstance(self.module, tuple) else (self.module,)

    def label(self):
        if self.kind == FUNC:
            return "%s.%s()" % (self.modules()[0], self.name)
        return "%s.%s" % (self.cls, self.name)

    def describe(self):
        s = self.label()
        if self.kind == METHOD:
            s += "(%s)" % ", ".join(("self",) + self.params)
        return s


# vLLM V1 (vllm.py). The parameter names are those of vLLM's own methods:
# the wrappers take them under the same names, so a call by keyword still
# reaches the engine.
VLLM = (
    Point(_CORE, "EngineCore", "__init__", METHOD),
    Point(_CORE, "EngineCore", "step", METHOD),
    Point(_CORE, "EngineCore", "scheduler", ATTR),
    Point(_CORE, "EngineCore", "preprocess_add_request", METHOD, ("request",), False,
          "request ids may stay vLLM's own, suffixed from 0.14"),
    Point(_SCHED, "Scheduler", "schedule", METHOD),
    Point(_SCHED, "Scheduler", "update_from_output", METHOD, ("scheduler_output", "model_runner_output")),
    Point(_SCHED, "Scheduler", "running", ATTR, (), False, "queues reported as 0"),
    Point(_SCHED, "Scheduler", "waiting", ATTR, (), False, "queues reported as 0"),
    Point(_SCHED, "Scheduler", "kv_cache_manager", ATTR, (), False, "no KV cache usage"),
    Point(_SCHED, "Scheduler", "requests", ATTR, (), False, "no fallback for request ids"),
    Point(_KV, "KVCacheManager", "usage", ATTR, (), False, "no KV cache usage"),
    Point(_OUTPUT, "SchedulerOutput", "scheduled_new_reqs", FIELD),
    Point(_OUTPUT, "SchedulerOutput", "scheduled_cached_reqs", FIELD),
    Point(_OUTPUT, "SchedulerOutput", "num_scheduled_tokens", FIELD),
    Point(_OUTPUT, "SchedulerOutput", "total_num_scheduled_tokens", FIELD),
    Point(_OUTPUT, "SchedulerOutput", "scheduled_spec_decode_tokens", FIELD, (), False,
          "draft tokens not told apart"),
    Point(_OUTPUT, "SchedulerOutput", "finished_req_ids", FIELD, (), False,
          "ids leave the table only at its limit"),
    Point(_OUTPUT, "SchedulerOutput", "preempted_req_ids", FIELD, (), False, "no preemptions"),
    Point(_OUTPUT, "NewRequestData", "req_id", FIELD),
    # One CachedRequestData for all cached requests, with per-request lists;
    # releases before it had a list of one CachedRequestData per request.
    Point(_OUTPUT, "CachedRequestData", "req_ids", FIELD),
    Point(_OUTPUT, "CachedRequestData", "resumed_req_ids|resumed_from_preemption", FIELD, (), False,
          "no resumptions"),
    Point(_OUTPUT, "CachedRequestData", "num_output_tokens", FIELD, (), False,
          "prefill/decode split from scheduled token counts alone"),
    Point(_ENGINE, "EngineCoreOutputs", "outputs", FIELD),
    Point(_ENGINE, "EngineCoreOutput", "request_id", FIELD),
    Point(_ENGINE, "EngineCoreOutput", "new_token_ids", FIELD),
    # Read where present: vLLM began to suffix request_id in the release
    # that added external_req_id (0.14), so before it request_id is the API id.
    Point(_ENGINE, "EngineCoreRequest", "external_req_id", ATTR, (), None,
          "request_id is the API id there"),
    Point(_WORKER, "WorkerProc", "__init__", METHOD, (), True, "", "worker"),
    Point(_WORKER, "WorkerProc", "worker", ATTR, (), True, "", "worker"),
    # The busy loop calls getattr(wrapper, method): the wrapper's own
    # execute_model, or its __getattr__, which hands the worker's.
    Point(_WRAPPER, "WorkerWrapperBase", "execute_model|__getattr__", METHOD, (), True, "", "worker"),
    Point(_GPU_WORKER, "Worker", "execute_model", METHOD, ("scheduler_output",), True, "", "worker"),
    # Releases without it sample in execute_model, which then ends the mark.
    Point(_GPU_WORKER, "Worker", "sample_tokens", METHOD, (), None,
          "execute_model samples there", "worker"),
)

_SG = ("sglang.srt.managers.scheduler",)
_SG_BATCH = "sglang.srt.managers.schedule_batch"
_SG_MODE = "sglang.srt.model_executor.forward_batch_info"
_SG_THREAD = "sglang.srt.managers.tp_worker_overlap_thread"

# SGLang (sglang.py): what it wraps on Scheduler, and what it reads on the
# batch, its requests and the scheduler at the first step.
SGLANG = (
    Point(_SG, "Scheduler", "run_batch", METHOD, ("batch",)),
    Point(_SG, "Scheduler", "process_batch_result", METHOD, ("batch",)),
    Point(_SG, "Scheduler", "update_running_batch", METHOD, (), False, "no retractions"),
    Point(_SG, "Scheduler", "get_next_batch_to_run", METHOD, (), False, "no preparation launch window"),
    # Releases without it have no delayed sampling: run_batch samples.
    Point(_SG, "Scheduler", "launch_batch_sample_if_needed", METHOD, ("batch_result",), None,
          "no delayed sampling there"),
    # The ranks: on the scheduler (self.ps, or tp_rank and the like before
    # ParallelState), or process-wide from 0.5.21.
    Point(_SG, "Scheduler", "ps|tp_rank", ATTR, (), False, "every rank may report", group="ranks"),
    Point("sglang.srt.runtime_context", "", "get_parallel", FUNC, (), False, "every rank may report",
          group="ranks"),
    Point(_SG, "Scheduler", "running_batch", ATTR, (), False, "queues reported as 0"),
    Point(_SG, "Scheduler", "waiting_queue", ATTR, (), False, "queues reported as 0"),
    Point(_SG, "Scheduler", "max_total_num_tokens", ATTR, (), False, "no KV cache usage"),
    Point(_SG, "Scheduler", "token_to_kv_pool_allocator", ATTR, (), False, "no KV cache usage"),
    Point(_SG, "Scheduler", "tree_cache", ATTR, (), False, "no KV cache usage"),
    Point(_SG_BATCH, "ScheduleBatch", "reqs", ATTR),
    Point(_SG_BATCH, "ScheduleBatch", "forward_mode", ATTR),
    Point(_SG_BATCH, "ScheduleBatch", "extend_num_tokens", ATTR, (), False,
          "prefill steps report 0 scheduled tokens"),
    Point(_SG_BATCH, "ScheduleBatch", "decoding_reqs", ATTR, (), False, "mixed chunks count as prefill"),
    Point(_SG_BATCH, "Req", "rid", ATTR),
    Point(_SG_BATCH, "Req", "output_ids", ATTR, (), False, "no tokens"),
    Point(_SG_BATCH, "Req", "finished_reason", ATTR),
    Point(_SG_BATCH, "Req", "finished", METHOD),
    Point(_SG_MODE, "ForwardMode", "is_decode", METHOD),
    Point(_SG_MODE, "ForwardMode", "is_extend", METHOD),
    # Releases with the forward on TpModelWorkerClient's thread (to 0.5.3):
    # the hook swaps the module's Queue, whose get the thread loops on.
    Point(_SG_THREAD, "", "Queue", FUNC, (), True, "", "thread"),
    Point(_SG_THREAD, "TpModelWorkerClient", "forward_thread_func_", METHOD, (), True, "", "thread"),
    Point(_SG_THREAD, "TpModelWorkerClient", "input_queue", ATTR, (), True, "", "thread"),
)


def find_class(point, instances=None):
    """The class a point is about: the class of a live instance the hook
    holds (instances maps class names to objects), else the class in the
    first of its modules already imported or importable; None if none."""
    if instances and point.cls in instances:
        obj = instances[point.cls]
        return None if obj is None else (obj if isinstance(obj, type) else type(obj))
    for name in point.modules():
        mod = sys.modules.get(name)
        if mod is None:
            try:
                mod = importlib.import_module(name)
            except Exception:
                continue
        cls = getattr(mod, point.cls, None)
        if isinstance(cls, type):
            return cls
    return None


def _fields(cls):
    names = set()
    if dataclasses.is_dataclass(cls):
        names.update(f.name for f in dataclasses.fields(cls))
    names.update(getattr(cls, "__struct_fields__", ()))  # msgspec.Struct
    for k in cls.__mro__:
        names.update(k.__dict__.get("__annotations__", ()))
    return names


def _params(fn):
    """Parameter names of fn after self, and whether it takes *args."""
    sig = inspect.signature(fn)
    ps = list(sig.parameters.values())
    if ps and ps[0].name == "self":
        ps = ps[1:]
    names = tuple(p.name for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    return names, any(p.kind == p.VAR_POSITIONAL for p in ps)


def problem(point, cls, instance=None):
    """What of point a live class (or instance) does not offer, as the
    missing name; None if it offers it all."""
    if point.kind == FUNC:
        for m in point.modules():
            mod = sys.modules.get(m)
            if mod is not None and callable(getattr(mod, point.name, None)):
                return None
        return point.label()
    if cls is None:
        return "%s (in %s)" % (point.cls, " or ".join(point.modules()))
    names = point.name.split("|")
    if point.kind == METHOD:
        for n in names:
            fn = getattr(cls, n, None)
            if callable(fn):
                break
        else:
            return point.label()
        if point.params:
            try:
                got, varargs = _params(fn)
            except (TypeError, ValueError):
                return None  # a builtin or C method: nothing to read
            if got[:len(point.params)] != point.params and not (varargs and not got):
                return "%s (it takes (self, %s))" % (point.describe(), ", ".join(got))
        return None
    if point.kind == FIELD:
        have = _fields(cls)
        if any(n in have or hasattr(cls, n) for n in names):
            return None
        return point.label()
    # ATTR: on the instance when the hook has one; a class without one can
    # only show a property or class attribute, so it is not judged.
    if instance is not None:
        if any(hasattr(instance, n) for n in names):
            return None
        return point.label()
    return None


def check(points, instances=None, part="engine"):
    """Checks points of one part against the live classes; returns
    (required problems, optional problems as "problem (cost)"), each listed
    once."""
    return judge(points, lambda p: _live(p, instances), part)


def _live(p, instances):
    inst = instances.get(p.cls) if instances else None
    if inst is not None and isinstance(inst, type):
        inst = None
    try:
        return problem(p, find_class(p, instances), inst)
    except Exception as e:  # the check must never stop the engine
        return "%s (%s when checked)" % (p.label(), type(e).__name__)


def judge(points, problem_of, part="engine"):
    """(required problems, optional problems with their cost) of one part,
    problem_of(point) saying what each lacks (None: nothing). A group's
    points are met when any one is, and fail as one "a or b"."""
    req, opt, groups = [], [], {}
    for p in points:
        if p.part != part or p.required is None:
            continue
        why = problem_of(p)
        if p.group:
            g = groups.setdefault(p.group, [p, []])
            if g[1] is not None:
                g[1] = None if why is None else g[1] + [why]
            continue
        _add(p, why, req, opt)
    for p, whys in groups.values():
        _add(p, " or ".join(whys) if whys else None, req, opt)
    return req, opt


def _add(p, why, req, opt):
    if why is None:
        return
    if p.required:
        if why not in req:
            req.append(why)
    else:
        s = "%s (%s)" % (why, p.cost)
        if s not in opt:
            opt.append(s)
