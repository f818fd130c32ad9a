# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""The hook arrives through sitecustomize in a fresh interpreter, as under
inferprof-run, and sends to a real Unix socket."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from .helpers import BOOTSTRAP, FAKES, ROOT, Collector, made_of
from inferprof_hook import _state


def _run(args, env_extra, cwd=ROOT):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.update(env_extra)
    return subprocess.run([sys.executable] + args, env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120)


class SitecustomizeTest(unittest.TestCase):
    def drive(self, c, *args):
        r, got = c.read_while(lambda: _run(
            [os.path.join(FAKES, "drive.py"), "--step-ms", "2"] + list(args),
            {"PYTHONPATH": BOOTSTRAP + os.pathsep + FAKES, _state.ENV_ENDPOINT: c.path}))
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout), got

    def test_fresh_interpreter_sends_every_step(self):
        c = Collector()
        try:
            for args in ((), ("--engine", "sglang")):
                out, got = self.drive(c, *args)
                self.assertEqual(out["stats"]["sent"] + out["stats"]["dropped"], len(out["steps"]), args)
                self.assertEqual(len(got), out["stats"]["sent"])
                self.assertGreater(len(got), 0)
                # A datagram dropped under load is missing, never garbled.
                for s in got:
                    want = {k: v for k, v in out["steps"][s["step"] - 1].items() if k != "engine_index"}
                    self.assertEqual(made_of(s), want, args)
                    self.assertEqual(s["pid"], out["pid"])
        finally:
            c.close()

    def test_disable_variable(self):
        c = Collector()
        try:
            r = _run([os.path.join(FAKES, "drive.py")],
                     {"PYTHONPATH": BOOTSTRAP + os.pathsep + FAKES, _state.ENV_ENDPOINT: c.path,
                      _state.ENV_DISABLED: "1"})
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json.loads(r.stdout)["patched"], [])
            self.assertEqual(c.drain(), [])
        finally:
            c.close()

    def test_shadowed_sitecustomize_still_runs(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "sitecustomize.py"), "w") as f:
                f.write("import builtins\nbuiltins.OTHER_SITECUSTOMIZE = True\n")
            r = _run(["-c", "import builtins, sys; print(getattr(builtins, 'OTHER_SITECUSTOMIZE', False),"
                            " 'inferprof_hook' in sys.modules)"],
                     {"PYTHONPATH": BOOTSTRAP + os.pathsep + d})
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.split(), ["True", "True"])
