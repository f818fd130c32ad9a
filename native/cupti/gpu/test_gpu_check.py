# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""CPU tests of gpu_check.py's helpers: the stream decoder against frames the
library's own encoder (ipc_client.c, through tests/emit_frames.c) sends, the
eager-kernel window and the time tolerance. Run by make -C native/cupti test."""
import os
import socket
import subprocess
import tempfile
import threading
import unittest

import gpu_check

EMIT_FRAMES = os.environ.get("EMIT_FRAMES") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build",
                                                            "emit_frames")


class DecodeTest(unittest.TestCase):
    def capture(self, count):
        """The bytes emit_frames sends for count kernel records."""
        d = tempfile.mkdtemp()
        path = os.path.join(d, "c.sock")
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.bind(path)
        ls.listen(1)
        ls.settimeout(60)
        got = []

        def read():
            conn, _ = ls.accept()
            conn.settimeout(60)
            while True:
                b = conn.recv(1 << 16)
                if not b:
                    break
                got.append(b)
            conn.close()

        t = threading.Thread(target=read)
        t.start()
        subprocess.run([EMIT_FRAMES, path, str(count)], check=True, timeout=60)
        t.join(timeout=60)
        ls.close()
        os.unlink(path)
        os.rmdir(d)
        return b"".join(got)

    @unittest.skipUnless(os.access(EMIT_FRAMES, os.X_OK), "tests/emit_frames is not built (make -C native/cupti test builds it)")
    def test_decodes_the_c_encoder(self):
        count = 1000
        data = self.capture(count)
        # emit_frames names record i after names[i % 3] (flash_fwd_kernel
        # first), all in graph 9, lasting 100 + i % 3 ns; then a clock with
        # error 300 ns and stats with pool_exhausted 3.
        flash = len(range(0, count, 3))
        st = gpu_check.new_stream_state()
        rest = gpu_check.decode(data, st, "flash_fwd_kernel")
        self.assertEqual(rest, b"")
        self.assertEqual(st["kernels"], flash)
        self.assertEqual(st["graph_kernels"], flash)
        self.assertEqual(st["eager"], [])
        self.assertEqual(st["clock_error_ns"], 300)
        self.assertEqual(st["stats"][3], 3)

        # The same bytes in small pieces, as a socket hands them over.
        st2 = gpu_check.new_stream_state()
        buf = b""
        for i in range(0, len(data), 7):
            buf = gpu_check.decode(buf + data[i : i + 7], st2, "rms_norm_kernel")
        self.assertEqual(buf, b"")
        self.assertEqual(st2["kernels"], len(range(1, count, 3)))

    def test_bad_magic_is_an_error(self):
        with self.assertRaises(ValueError):
            gpu_check.decode(b"\x00" * 24, gpu_check.new_stream_state())

    def test_partial_frame_is_kept(self):
        header = (gpu_check.MAGIC).to_bytes(4, "little") + bytes([1, gpu_check.FRAME_STATS, 0, 0]) + (8).to_bytes(4, "little")
        st = gpu_check.new_stream_state()
        self.assertEqual(gpu_check.decode(header + b"\x01\x02", st), header + b"\x01\x02")
        self.assertEqual(st["stats"], ())


class WindowTest(unittest.TestCase):
    def test_skips_the_warm_up_and_takes_the_same_kernels(self):
        warm = (1_000, 2_000)
        eager = [(10_000 + i * 150, 10_000 + i * 150 + 100) for i in range(5)]
        later = (99_000, 99_500)  # an eager kernel after the bracketed ones
        spans = list(reversed(eager)) + [later, warm]  # arrival order is not start order
        span, busy = gpu_check.eager_window(spans, 1, len(eager))
        self.assertEqual(span, eager[-1][1] - eager[0][0])
        self.assertEqual(busy, sum(e - s for s, e in eager))

    def test_too_few_kernels(self):
        self.assertIsNone(gpu_check.eager_window([(1, 2), (3, 4)], 1, 2))
        self.assertIsNone(gpu_check.eager_window([], 0, 0))


class ToleranceTest(unittest.TestCase):
    def test_relative_bound(self):
        event = 20.0
        allowed = gpu_check.TIME_REL_TOL * event
        self.assertEqual(gpu_check.within(event + allowed * 0.99, event), (True, allowed))
        self.assertFalse(gpu_check.within(event + allowed * 1.01, event)[0])
        self.assertFalse(gpu_check.within(event - allowed * 1.01, event)[0])

    def test_absolute_floor_for_short_windows(self):
        event = 0.1
        ok, allowed = gpu_check.within(event + gpu_check.TIME_ABS_TOL_MS * 0.99, event)
        self.assertTrue(ok)
        self.assertEqual(allowed, gpu_check.TIME_ABS_TOL_MS)
        self.assertFalse(gpu_check.within(event + gpu_check.TIME_ABS_TOL_MS * 1.01, event)[0])

    def test_clock_error_widens_the_bound(self):
        event, clock_error = 20.0, 0.5
        off = gpu_check.TIME_REL_TOL * event + clock_error
        self.assertFalse(gpu_check.within(event + off, event)[0])
        self.assertTrue(gpu_check.within(event + off, event, clock_error)[0])


if __name__ == "__main__":
    unittest.main()
