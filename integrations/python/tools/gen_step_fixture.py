"""Writes Python-encoded step datagrams for the Go decoder's tests.

  python3 integrations/python/tools/gen_step_fixture.py internal/stepwire/testdata

It runs the real hook on the fake vLLM and SGLang engines, catches what the
hook sends on a real Unix socket, and writes each datagram as <name>.bin next
to <name>.json, the values Python's decoder reads from it. The Go test decodes
the .bin files and compares with the .json, so encoder and decoder cannot drift.
"""

import json
import os
import socket
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "fakes")]


def main(out):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.setblocking(False)
        os.environ["INFERPROF_STEP_ENDPOINT"] = path
        os.environ["OTEL_SERVICE_NAME"] = "fixture-svc"
        import inferprof_hook
        from inferprof_hook import wire

        inferprof_hook.install()
        from vllm.v1.engine import core

        sched = core.Scheduler(max_running=4, preempt_at={2: "b-int"})
        sched.add_request(core.Request("a-int", 12, 5, external_req_id="chatcmpl-a"))
        sched.add_request(core.Request("b-int", 7, 5, external_req_id="chatcmpl-b"))
        sched.add_request(core.Request("c-int", 9, 5, external_req_id="chatcmpl-ü", accepted=[1, 3]))
        eng = core.EngineCore(sched, engine_index=1)
        got = {}
        for name in ("vllm_prefill", "vllm_preempt", "vllm_spec"):
            eng.step_fn()
            got[name] = sock.recv(1 << 20)
        from sglang.srt.managers import scheduler as s

        sg = s.Scheduler()
        sg.add(s.Req("sg-1", 5, 2))
        sg.event_loop_normal(1)
        got["sglang_prefill"] = sock.recv(1 << 20)
        sock.close()
    for name, buf in got.items():
        with open(os.path.join(out, name + ".bin"), "wb") as f:
            f.write(buf)
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(wire.decode(buf), f, indent=1, sort_keys=True, ensure_ascii=False)
            f.write("\n")
        print("wrote", name, len(buf), "bytes")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
