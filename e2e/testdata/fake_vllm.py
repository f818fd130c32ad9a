#!/usr/bin/env python3
# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for `vllm serve MODEL --port N` for the engine discovery tests.

It serves vLLM-shaped Prometheus text on the API port (--port, vLLM's 8000
by default) and also listens on a second TCP port, as vLLM's ZeroMQ sockets
do, counting every connection that port gets: a discoverer must never touch
it. GET /fake/state reports that count and the scrapes of /metrics;
GET /fake/set?kv=V moves the KV-cache usage gauge.
"""

import http.server
import json
import socket
import sys
import threading
import urllib.parse

state = {"kv": 0.25, "side_port": 0, "side_connections": 0, "scrapes": 0}
lock = threading.Lock()

METRICS = """# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="tiny"}} {kv}
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="tiny"}} 2.0
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{{engine="0",model_name="tiny"}} 3.0
# HELP vllm:num_preemptions_created Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_created gauge
vllm:num_preemptions_created{{engine="0",model_name="tiny"}} 1.7646e+09
"""


def side_listener(sock):
    while True:
        conn, _ = sock.accept()
        with lock:
            state["side_connections"] += 1
        conn.close()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        with lock:
            if url.path == "/metrics":
                state["scrapes"] += 1
                body, ctype = METRICS.format(kv=state["kv"]).encode(), "text/plain; version=0.0.4"
            elif url.path == "/fake/set":
                state["kv"] = float(urllib.parse.parse_qs(url.query)["kv"][0])
                body, ctype = b"ok", "text/plain"
            elif url.path == "/fake/state":
                body, ctype = json.dumps(state).encode(), "application/json"
            else:
                self.send_error(404)
                return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    argv = sys.argv[1:]
    port = int(argv[argv.index("--port") + 1]) if "--port" in argv else 8000
    side = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    side.bind(("127.0.0.1", 0))
    side.listen(16)
    state["side_port"] = side.getsockname()[1]
    threading.Thread(target=side_listener, args=(side,), daemon=True).start()
    http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
