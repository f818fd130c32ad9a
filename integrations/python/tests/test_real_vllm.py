# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""The patch table and the hook's step path on the real vLLM classes, in a
Python that has vLLM installed (real_vllm_probe.py runs there).

That Python is $INFERPROF_VLLM_PYTHON, else the virtualenv `make e2e-vllm`
builds under ~/.cache/inferprof/vllm-<hash>/ (the newest complete one),
else ~/.cache/inferprof/vllm-probe/. Without one the test is skipped and
says so; `make hook-compat` runs it wherever `make e2e-vllm` ran before.
"""

import glob
import json
import os
import subprocess
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("INFERPROF_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "inferprof")


def vllm_python():
    p = os.environ.get("INFERPROF_VLLM_PYTHON")
    if p:
        return p
    venvs = [os.path.dirname(m) for m in glob.glob(os.path.join(CACHE, "vllm-*", ".complete"))]
    venvs.sort(key=lambda d: os.path.getmtime(os.path.join(d, ".complete")), reverse=True)
    for d in venvs + [os.path.join(CACHE, "vllm-probe")]:
        py = os.path.join(d, "bin", "python")
        if os.access(py, os.X_OK):
            return py
    return None


PYTHON = vllm_python()


@unittest.skipIf(PYTHON is None, "no Python with vLLM installed: set INFERPROF_VLLM_PYTHON, or run "
                                 "make e2e-vllm, which builds one under ~/.cache/inferprof/")
class RealVLLMTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        env = dict(os.environ, INFERPROF_HOOK_DISABLED="", PYTHONPATH="")
        proc = subprocess.run([PYTHON, os.path.join(HERE, "real_vllm_probe.py")], capture_output=True,
                              text=True, timeout=600, env=env)
        if proc.returncode != 0:
            raise AssertionError("real_vllm_probe.py failed:\n" + proc.stderr[-4000:])
        cls.out = json.loads(proc.stdout.strip().splitlines()[-1])
        cls.log = proc.stderr

    def test_every_patch_point_is_there(self):
        self.assertEqual(self.out["problems"], {
            "engine": {"required": [], "optional": []},
            "worker": {"required": [], "optional": []}}, "vLLM %s" % self.out["vllm"])
        bad = {k: v for k, v in self.out["signatures"].items() if v is not None}
        self.assertEqual(bad, {}, "methods and fields as the table declares them")
        self.assertGreaterEqual(len(self.out["signatures"]), 20)

    def test_two_steps_on_real_objects(self):
        self.assertTrue(self.out["attached"])
        self.assertNotIn("inferprof:", self.log, "no warning: nothing missing, nothing failed")
        self.assertEqual(self.out["steps"], [
            {"prefill": 2, "decode": 0, "scheduled_tokens": 8, "running": 2, "waiting": 0, "degraded": False,
             "kv_usage": 0.25, "request_ids": ["a-1", "b-2"], "request_tokens": [1, 1]},
            {"prefill": 0, "decode": 2, "scheduled_tokens": 2, "running": 2, "waiting": 0, "degraded": False,
             "kv_usage": 0.25, "request_ids": ["a-1"], "request_tokens": [1]},
        ])


if __name__ == "__main__":
    unittest.main()
