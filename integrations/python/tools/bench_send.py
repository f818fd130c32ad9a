# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""Measures what one step datagram's send costs the engine, by how the
receiver reads its socket.

  python3 integrations/python/tools/bench_send.py [--load 2] [--samples 600]

A receiver process either waits in recv() (every datagram must wake it) or
empties its non-blocking socket every 2 ms (nothing waits on the socket), as
the engine_step receiver does. The sender pauses between sends, busy, as an
engine does between steps (20 us, 100 us, 1 ms), and times each send with the
wall clock. --load N adds N busy processes, as on a GPU host whose cores are
taken by tokenizers, data loaders and other engines. --batch N sends N
1-request steps (150 bytes each) in one datagram, as a hook batching steps
would at each flush, to a polling receiver only.
"""

import argparse
import array
import fcntl
import os
import socket
import subprocess
import sys
import tempfile
import termios
import time

RECEIVER = """
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
interval = float(sys.argv[2])
s.setblocking(interval == 0)
print("ready", flush=True)
while True:
    if interval:
        time.sleep(interval)
    try:
        while True:
            s.recv(1 << 20)
    except BlockingIOError:
        pass
"""

BUSY = "while True: pass"


def wait_read(sock, outq=array.array("i", [0])):
    """Returns once the receiver has read every datagram sent on sock."""
    while True:
        fcntl.ioctl(sock, termios.TIOCOUTQ, outq)
        if outq[0] == 0:
            return


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--load", type=int, default=0)
    p.add_argument("--samples", type=int, default=600)
    p.add_argument("--batch", type=int, default=1, help="steps per datagram")
    args = p.parse_args()
    load = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(args.load)]
    d = tempfile.mkdtemp()
    clock = time.perf_counter_ns
    data = b"x" * 150 * args.batch  # a 1-request step datagram is about 150 bytes
    print("send wall time, us (%d samples, %d busy processes, %d bytes a datagram)"
          % (args.samples, args.load, len(data)))
    print("%-8s %8s %8s %8s %8s" % ("receiver", "pause", "p10", "median", "p90"))
    modes = (("waiting", "0"), ("polling", "0.002")) if args.batch == 1 else (("polling", "0.002"),)
    try:
        for name, interval in modes:
            for pause_us in (20, 100, 1000):
                path = os.path.join(d, "%s-%d" % (name, pause_us))
                rx = subprocess.Popen([sys.executable, "-c", RECEIVER, path, interval],
                                      stdout=subprocess.PIPE, text=True)
                rx.stdout.readline()
                s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                try:
                    s.connect(path)
                    s.setblocking(False)
                    times = []
                    for _ in range(args.samples):
                        wait_read(s)
                        end = clock() + pause_us * 1000
                        while clock() < end:
                            pass
                        t0 = clock()
                        s.send(data)
                        times.append(clock() - t0)
                finally:
                    s.close()
                    rx.kill()
                    rx.wait()
                    os.unlink(path)
                times.sort()
                n = len(times)
                print("%-8s %6dus %8.1f %8.1f %8.1f" % (name, pause_us, times[n // 10] / 1e3,
                                                       times[n // 2] / 1e3, times[n * 9 // 10] / 1e3))
    finally:
        for b in load:
            b.kill()
            b.wait()
        os.rmdir(d)


if __name__ == "__main__":
    main()
