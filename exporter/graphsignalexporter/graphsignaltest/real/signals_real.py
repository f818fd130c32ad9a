# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""graphsignal 1.1.2's own /signals, fed the signals of an input file.

    $venv/bin/python signals_real.py testdata/signals_input.json

prints the JSON that the package's own SignalsEndpoint answers on GET
/signals (a real HTTP server on a free loopback port). The watcher is the
package's Watcher with its stores, set up without recorders or a target
process, so the document holds exactly the input: each tick goes in through
the calls its recorders make (set_gauge, set_counter, set_histogram with the
bins prometheus_recorder._buckets_to_bins makes of `le` buckets,
set_profile), the logs through LogStore.log_message and the resource as
host_recorder and process_recorder report one. TestSignalsAgainstGraphsignal
(exporter/graphsignalexporter) feeds the same file to the exporter and
compares.
"""

import json
import sys
import time
import urllib.request

import graphsignal.watcher as gwatcher
from graphsignal.recorders.prometheus_recorder import _buckets_to_bins
from graphsignal.signals.logs import LogStore
from graphsignal.signals.metrics import MetricStore
from graphsignal.signals.resources import ResourceStore
from graphsignal.signals.routes import SignalsEndpoint
from graphsignal.watcher.watcher import Watcher, uuid_sha1


def le_buckets(h):
    """OTLP bucket counts as the cumulative `le` samples Prometheus
    exposes, the input _buckets_to_bins reads."""
    out, total = [], 0
    for bound, count in zip(h['bounds'] + ['+Inf'], h['bucket_counts']):
        total += count
        out.append((str(bound), float(total)))
    return out


def main(path):
    spec = json.load(open(path))
    w = Watcher(target_pid=0)
    # What Watcher.setup() makes, less the recorders, the pid monitor and
    # the tick thread, which would add this machine's own metrics.
    w._metric_store, w._log_store, w._resource_store = MetricStore(), LogStore(), ResourceStore()
    w.set_tag('instance.id', uuid_sha1(size=12))
    w.set_tag('host.name', spec['resource']['host.name'])
    gwatcher._watcher = w

    now = time.time_ns()
    ticks = spec['ticks']
    for i, tick in enumerate(ticks):
        ts = now - (len(ticks) - 1 - i) * 1_000_000_000
        for g in tick['gauges']:
            w.set_gauge(g['name'], g['value'], ts, tags=g['tags'])
        for c in tick['counters']:
            w.set_counter(c['name'], c['total'], ts, tags=c['tags'])
        for h in tick['histograms']:
            bins, counts = _buckets_to_bins(le_buckets(h))
            w.set_histogram(h['name'], bins=bins, counts=counts, measurement_ts=ts, tags=h['tags'],
                            count=h['count'], sum_val=h['sum'], min_val=h.get('min'), max_val=h.get('max'))
        for s in tick['summaries']:
            w.set_histogram(s['name'], measurement_ts=ts, tags=s['tags'], count=s['count'], sum_val=s['sum'])
        for p in tick['profiles']:
            w.set_profile(p['name'], frames={k: v[0] for k, v in p['frames'].items()},
                          samples={k: v[1] for k, v in p['frames'].items()}, measurement_ts=ts)
    for e in spec['logs']:
        w.log_message(e['message'], level=e['level'], exception=e.get('exception'))
    pid = str(spec['resource']['process.pid'])
    w.update_resource('host', attributes={'platform.name': 'Linux'})
    w.update_resource('process', tags={'process.pid': pid, 'process.root_pid': pid},
                      attributes={'runtime.name': 'python'})
    for e in spec['expiry']:
        w.set_gauge(e['name'], 1, now - e['age_s'] * 1_000_000_000)
    # MetricStore forgets at most once a minute, on a write: one more write
    # after the aged ones, as the next tick would make.
    w._metric_store._last_cleanup_ts = 0
    w.set_gauge('vllm:num_requests_waiting', 0, now, tags={'engine': '0'})

    ep = SignalsEndpoint(host='127.0.0.1', port=0, bind_retry_timeout=0)
    ep.setup()
    host, port = ep._server.server_address[:2]
    try:
        with urllib.request.urlopen(f'http://{host}:{port}/signals', timeout=10) as resp:
            sys.stdout.write(resp.read().decode())
    finally:
        ep.shutdown()


if __name__ == '__main__':
    main(sys.argv[1])
