# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""tools/hook_compat.py on release trees written here (no network): the
old reading of SchedulerOutput (one CachedRequestData per request) turns
the hook off, a release that lacks an optional field degrades it, a
signature change is named, the docs check fails on a stale table, and a
fake that disagrees with its cited release is reported."""

import os
import shutil
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(os.path.dirname(HERE), "tools")
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)

import hook_compat  # noqa: E402
import releases  # noqa: E402
import srcindex  # noqa: E402

CORE = '''
class EngineCore:
    def __init__(self, vllm_config):
        self.scheduler = None
    def step(self):
        pass
    def preprocess_add_request(self, request):
        pass
'''
SCHED = '''
from vllm.v1.core.sched.output import SchedulerOutput
class SchedulerInterface:
    pass
class Scheduler(SchedulerInterface):
    def __init__(self):
        self.running = []
        self.waiting = []
        self.requests = {}
        self.kv_cache_manager = None
    def schedule(self, throttle_prefills=False):
        pass
    def update_from_output(self, scheduler_output, model_runner_output):
        pass
'''
KV = '''
class KVCacheManager:
    @property
    def usage(self):
        return 0.0
'''
OUTPUT_NEW = '''
from dataclasses import dataclass
@dataclass
class NewRequestData:
    req_id: str
@dataclass
class CachedRequestData:
    req_ids: list[str]
    resumed_req_ids: set[str]
    num_output_tokens: list[int]
@dataclass
class SchedulerOutput:
    scheduled_new_reqs: list[NewRequestData]
    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: dict[str, int]
    total_num_scheduled_tokens: int
    scheduled_spec_decode_tokens: dict[str, list[int]]
    finished_req_ids: set[str]
    preempted_req_ids: set[str] | None = None
'''
# vLLM 0.8's reading: a list of one CachedRequestData per request.
OUTPUT_OLD = '''
from dataclasses import dataclass
@dataclass
class NewRequestData:
    req_id: str
@dataclass
class CachedRequestData:
    req_id: str
    resumed_from_preemption: bool
@dataclass
class SchedulerOutput:
    scheduled_new_reqs: list[NewRequestData]
    scheduled_cached_reqs: list[CachedRequestData]
    num_scheduled_tokens: dict[str, int]
    total_num_scheduled_tokens: int
    scheduled_spec_decode_tokens: dict[str, list[int]]
    finished_req_ids: set[str]
'''
ENGINE = '''
import msgspec
class EngineCoreRequest(msgspec.Struct):
    request_id: str
    external_req_id: str | None = None
class EngineCoreOutput(msgspec.Struct):
    request_id: str
    new_token_ids: list[int]
class EngineCoreOutputs(msgspec.Struct):
    outputs: list[EngineCoreOutput] = []
'''
WORKERS = {
    "vllm/v1/executor/multiproc_executor.py": '''
class WorkerProc:
    def __init__(self, vllm_config):
        self.worker = None
''',
    "vllm/v1/worker/worker_base.py": '''
class WorkerWrapperBase:
    def __getattr__(self, attr):
        return getattr(self.worker, attr)
''',
    "vllm/v1/worker/gpu_worker.py": '''
from vllm.v1.worker.worker_base import WorkerBase
class Worker(WorkerBase):
    def execute_model(self, scheduler_output):
        pass
    def sample_tokens(self, grammar_output):
        pass
''',
}


def write(root, files):
    for rel, text in files.items():
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(textwrap.dedent(text))


def release(output, update="scheduler_output, model_runner_output", core=CORE):
    files = {
        "vllm/v1/engine/core.py": core,
        "vllm/v1/core/sched/scheduler.py": SCHED.replace("scheduler_output, model_runner_output", update),
        "vllm/v1/core/sched/output.py": output,
        "vllm/v1/core/kv_cache_manager.py": KV,
        "vllm/v1/engine/__init__.py": ENGINE,
    }
    files.update(WORKERS)
    return files


class HookCompatTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        old = releases.CACHE
        releases.CACHE = self.tmp
        self.addCleanup(setattr, releases, "CACHE", old)

    def put(self, version, files):
        d = releases.release_dir("vllm", version)
        write(d, files)
        with open(os.path.join(d, ".sha256"), "w") as f:
            f.write("0  test keep=%s\n" % releases._keep_key("vllm"))  # complete: no network

    def check(self, version):
        return hook_compat.check_release("vllm", version, log=lambda m: None)

    def test_new_reading_is_complete(self):
        self.put("1.0", release(OUTPUT_NEW))
        self.assertEqual(hook_compat.verdict(self.check("1.0"), "engine"), ("yes", [], []))
        self.assertEqual(hook_compat.verdict(self.check("1.0"), "worker"), ("yes", [], []))

    def test_old_reading_turns_the_hook_off(self):
        self.put("0.8", release(OUTPUT_OLD))
        v, what, _ = hook_compat.verdict(self.check("0.8"), "engine")
        self.assertEqual(v, "off")
        self.assertEqual(what, ["CachedRequestData.req_ids"])

    def test_missing_optional_field_degrades(self):
        self.put("0.9", release(OUTPUT_NEW.replace("    preempted_req_ids: set[str] | None = None\n", "")))
        v, what, _ = hook_compat.verdict(self.check("0.9"), "engine")
        self.assertEqual((v, what), ("degraded", ["SchedulerOutput.preempted_req_ids (no preemptions)"]))

    def test_renamed_parameter_is_named(self):
        self.put("2.0", release(OUTPUT_NEW, update="so, output"))
        v, what, _ = hook_compat.verdict(self.check("2.0"), "engine")
        self.assertEqual(v, "off")
        self.assertEqual(what, ["Scheduler.update_from_output(self, scheduler_output, model_runner_output) "
                                "(it takes (self, so, output))"])

    def test_docs_table_and_stale_check(self):
        self.put("0.8", release(OUTPUT_OLD))
        self.put("1.0", release(OUTPUT_NEW))
        self.put("1.1", release(OUTPUT_NEW))
        old = hook_compat.RELEASES
        hook_compat.RELEASES = {"vllm": ("0.8", "1.0", "1.1")}
        self.addCleanup(setattr, hook_compat, "RELEASES", old)
        results = {"vllm": {v: self.check(v) for v in ("0.8", "1.0", "1.1")}}
        block = hook_compat.render(results)
        self.assertIn("| 0.8 | off | `CachedRequestData.req_ids` | yes |", block)
        self.assertIn("| 1.0 to 1.1 (2 releases) | yes | nothing | yes |", block)
        doc = "# x\n\n" + hook_compat.BEGIN + "stale\n" + hook_compat.END + "after\n"
        new = hook_compat.splice(doc, block)
        self.assertNotEqual(new, doc)
        self.assertEqual(hook_compat.splice(new, block), new, "a fresh table passes the check")
        self.assertTrue(new.endswith(hook_compat.END + "after\n"))

    def test_fake_that_disagrees_with_its_release(self):
        self.put("1.0", release(OUTPUT_NEW))
        real = srcindex.Index(releases.release_dir("vllm", "1.0"))
        fakes = os.path.join(self.tmp, "fakes")
        write(fakes, {"vllm/v1/core/sched/output.py": OUTPUT_OLD.replace(
            "class CachedRequestData:\n    req_id: str", "class CachedRequestData:\n    req_ids: list")})
        fake = srcindex.Index(fakes)
        p = next(p for p in hook_compat.TABLES["vllm"] if p.label() == "SchedulerOutput.scheduled_cached_reqs")
        diffs = list(hook_compat._differ(p, hook_compat.find(fake, p)[1], hook_compat.find(real, p)[1]))
        self.assertEqual(diffs, [("the fake's scheduled_cached_reqs is list", "has CachedRequestData")])
        p = next(p for p in hook_compat.TABLES["vllm"] if p.label() == "Scheduler.schedule")
        write(fakes, {"vllm/v1/core/sched/scheduler.py": SCHED.replace("self, throttle_prefills=False", "self")})
        fake = srcindex.Index(fakes)
        diffs = list(hook_compat._differ(p, hook_compat.find(fake, p)[1], hook_compat.find(real, p)[1]))
        self.assertEqual(diffs, [("the fake takes (self)", "takes (self, throttle_prefills)")])


if __name__ == "__main__":
    unittest.main()
