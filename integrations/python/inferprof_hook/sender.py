# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

"""Non-blocking Unix datagram sender: drops and counts, never raises, never waits."""

import array
import socket
import time

# How long to wait before trying to reach an absent collector again, so an
# engine without a collector pays one failed connect a second, not one a step.
RETRY_INTERVAL_S = 1.0
SEND_BUFFER_BYTES = 1 << 20


class Sender:
    """Sends datagrams to a Unix datagram socket at path.

    sent and dropped count datagrams; dropped covers an absent collector, a
    full socket buffer and any other socket error.
    """

    __slots__ = ("path", "sock", "sent", "dropped", "_retry_at", "_clock")

    def __init__(self, path, clock=time.monotonic):
        self.path = path
        self.sock = None
        self.sent = 0
        self.dropped = 0
        self._retry_at = 0.0
        self._clock = clock

    def send(self, data):
        """Returns True when the datagram was handed to the kernel."""
        sock = self.sock
        if sock is None:
            sock = self._connect()
            if sock is None:
                self.dropped += 1
                return False
        try:
            sock.send(data)
        except BlockingIOError:
            # The collector is slower than the engine: drop, keep the socket.
            self.dropped += 1
            return False
        except Exception:  # OSError mostly: collector gone or restarted
            self.dropped += 1
            self._close()
            self._retry_at = self._clock() + RETRY_INTERVAL_S
            return False
        self.sent += 1
        return True

    def send_fds(self, data, fds):
        """Sends a control datagram with file descriptors attached (a ring's
        announcement); True when it went out. Not counted as a step.

        A socket whose collector went away is reconnected at once, once: a
        restarted collector is found without waiting for the retry
        interval, and announcements come at most once a second."""
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        for fresh in (False, True):
            sock = self.sock
            if sock is None:
                if fresh:
                    self._retry_at = 0.0
                sock = self._connect()
                if sock is None:
                    return False
            try:
                sock.sendmsg([data], rights)
                return True
            except BlockingIOError:
                return False
            except Exception:
                self._close()
                self._retry_at = self._clock() + RETRY_INTERVAL_S
        return False

    def send_control(self, data):
        """Sends a control datagram (a ring's wake-up); never raises."""
        sock = self.sock or self._connect()
        if sock is None:
            return False
        try:
            sock.send(data)
            return True
        except Exception:
            return False

    def _connect(self):
        now = self._clock()
        if now < self._retry_at:
            return None
        sock = None
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.setblocking(False)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
            except OSError:
                pass
            sock.connect(self.path)
        except Exception:
            if sock is not None:
                sock.close()
            self._retry_at = now + RETRY_INTERVAL_S
            return None
        self.sock = sock
        return sock

    def close(self):
        self._close()

    def _close(self):
        sock, self.sock = self.sock, None
        if sock is not None:
            try:
                sock.close()
            except Exception:
                pass

    def reset_after_fork(self):
        """A forked child gets its own socket, so its drops are its own."""
        self._close()
        self.sent = 0
        self.dropped = 0
        self._retry_at = 0.0
