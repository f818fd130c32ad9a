# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Decode inferprof's upload bodies with Graphsignal's own classes.

Run with the graphsignal 1.1.2 venv (install.sh) over the folder the fake
server saved bodies to (graphsignaltest.BodiesEnv):

    $venv/bin/python decode.py DIR

Each *.v1.pb body is parsed with graphsignal.proto.signals_pb2.UploadRequest
and held against what the package's own collector (collector/collector.py)
writes: no field its schema lacks, the datapoint kind its metric type
carries, metric names of Graphsignal's namespace only where the package
itself writes that name, with the type it writes, ids and timestamps as it
fills them, tag and attribute limits, log levels, resource kinds and tags.
Every problem is printed with its file; the exit status is 1 if there was
one. *.v0.pb bodies (traces mode, /api/v1/signals/) are counted: 1.1.2 has
no Span message to read them with.
"""

import ast
import math
import os
import pathlib
import re
import sys

import graphsignal
from google.protobuf import unknown_fields
from graphsignal.proto import signals_pb2
import xxhash

PB = signals_pb2
PKG = pathlib.Path(graphsignal.__file__).parent

# collector.py _LOG_LEVEL_MAP: the levels the package uploads.
UPLOADED_LEVELS = {
    PB.LogEntry.LogLevel.DEBUG_LEVEL, PB.LogEntry.LogLevel.INFO_LEVEL,
    PB.LogEntry.LogLevel.WARNING_LEVEL, PB.LogEntry.LogLevel.ERROR_LEVEL,
    PB.LogEntry.LogLevel.CRITICAL_LEVEL}
VALUE_OF = {
    PB.Metric.MetricType.GAUGE_METRIC: 'gauge',
    PB.Metric.MetricType.COUNTER_METRIC: 'total',
    PB.Metric.MetricType.HISTOGRAM_METRIC: 'histogram',
    PB.Metric.MetricType.PROFILE_METRIC: 'profile',
}
TYPE_NAME = {'gauge': PB.Metric.MetricType.GAUGE_METRIC,
             'counter': PB.Metric.MetricType.COUNTER_METRIC,
             'histogram': PB.Metric.MetricType.HISTOGRAM_METRIC,
             'profile': PB.Metric.MetricType.PROFILE_METRIC}
# Graphsignal's gen C names: snake case, unit last, under these prefixes.
GS_NAMESPACE = re.compile(r'^(gpu|cuda|process|host)_[a-z0-9_]+$')
# The resource tag each recorder keys its resource by (process_recorder,
# nvml_recorder); the collector adds the global tags to each. A device may
# instead carry hw.id, a CUDA ordinal or `names: source` (exporter README,
# Names); process.root_pid is sent with `names: graphsignal` only.
RESOURCE_TAGS = {
    'host': [set()],
    'process': [{'process.pid'}],
    'device': [{'device.uuid'}, {'hw.id'}],
}
GLOBAL_TAGS = {'instance.id', 'host.name', 'pod.uid', 'container.id'}
# signals/logs.py LogStore: longer messages and exceptions are not kept, so
# never uploaded.
MAX_MESSAGE = 1024
MAX_EXCEPTION = 4 * 1024
MAX_ATTRIBUTE = 2500  # signals/resources.py MAX_ATTRIBUTE_VALUE_LEN


def python_names():
    """Metric names and types the package's recorders write, read from its
    source: gauge('x'), counter('x'), set_gauge(name='x'), set_counter(...)
    and [(field, 'x')] tables inside a function that calls counter()."""
    names = {}
    kinds = {'gauge': 'gauge', 'set_gauge': 'gauge', 'counter': 'counter',
             'set_counter': 'counter', 'set_histogram': 'histogram',
             'set_profile': 'profile'}
    for path in sorted((PKG / 'recorders').glob('*.py')):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, 'id', None)
            if fn not in kinds:
                continue
            arg = node.args[0] if node.args else next(
                (k.value for k in node.keywords if k.arg == 'name'), None)
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names[arg.value] = kinds[fn]
        # Names held in tables and passed on through a variable: a string
        # constant of Graphsignal's form in a loop or dict next to a call.
        for node in ast.walk(tree):
            if isinstance(node, (ast.For, ast.Dict)):
                text = ast.unparse(node)
                kind = 'counter' if 'counter(' in text or isinstance(node, ast.Dict) else 'gauge'
                for sub in ast.walk(node):
                    if (isinstance(sub, ast.Constant) and isinstance(sub.value, str)
                            and GS_NAMESPACE.match(sub.value) and sub.value not in names):
                        names[sub.value] = kind
    return names


# The native library writes its metrics' names and types into the shm JSON
# (shm_recorder.py reads 'type' from it); the types are those of
# ../shared/reference/graphsignal.md §4.1, and each name must be a string in
# the package's own libgscuptiprof.so, or the table is wrong.
NATIVE = {
    'cuda_kernels_nanoseconds': 'profile', 'cuda_graphs_nanoseconds': 'profile',
    'cuda_memcpy_nanoseconds': 'profile', 'cuda_memset_nanoseconds': 'profile',
    'cuda_sync_nanoseconds': 'profile', 'cuda_memcpy_bytes': 'counter',
    'cuda_memset_bytes': 'counter', 'cuda_graph_trace_mode': 'gauge',
}


def native_names():
    lib = PKG / '_native' / 'amd64-cu12' / 'libgscuptiprof.so'
    data = lib.read_bytes()
    found = set(m.decode() for m in re.findall(rb'cuda_[a-z_]+', data))
    missing = sorted(set(NATIVE) - found)
    if missing:
        raise SystemExit(f'decode.py: {lib} has no {missing}: fix NATIVE')
    return dict(NATIVE)


def known_names():
    names = python_names()
    names.update(native_names())
    return names


def unknown(msg, where):
    out = []
    if len(unknown_fields.UnknownFieldSet(msg)):
        out.append(f'{where}: fields graphsignal {graphsignal.__version__} does not know')
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        if fd.is_repeated:
            for i, m in enumerate(value):
                out += unknown(m, f'{where}.{fd.name}[{i}]')
        else:
            out += unknown(value, f'{where}.{fd.name}')
    return out


def check_tags(tags, where):
    out = []
    keys = [t.key for t in tags]
    if len(keys) != len(set(keys)):
        out.append(f'{where}: a tag key repeats ({keys}); the collector builds tags from a dict')
    for t in tags:
        if len(t.key) > 50 or len(t.value) > 250:
            out.append(f'{where}: tag {t.key[:60]!r} past 50/250 characters')
    if 'instance.id' not in keys:
        out.append(f'{where}: no instance.id; the collector adds the global tags to every signal')
    elif not re.fullmatch(r'[0-9a-f]{12}', dict((t.key, t.value) for t in tags)['instance.id']):
        out.append(f'{where}: instance.id is not 12 hex digits (uuid_sha1(size=12))')
    return out


def ns(ts):
    return ts > 10**18


def check_metric(m, names, where):
    out = []
    where = f'{where} {m.name}'
    if not m.name:
        out.append(f'{where}: no name')
    if m.metric_id:
        out.append(f'{where}: metric_id set; the collector leaves it empty')
    if m.type not in VALUE_OF:
        return out + [f'{where}: type {m.type}']
    if GS_NAMESPACE.match(m.name):
        want = names.get(m.name)
        if want is None:
            out.append(f'{where}: a name in Graphsignal\'s namespace graphsignal {graphsignal.__version__} never writes')
        elif TYPE_NAME[want] != m.type:
            out.append(f'{where}: {PB.Metric.MetricType.Name(m.type)}; graphsignal writes it as a {want}')
    if not m.datapoints:
        out.append(f'{where}: no datapoints')
    out += check_tags(m.tags, where)
    frame_names = {f.frame_id: f.name for f in m.frames}
    if m.frames and m.type != PB.Metric.MetricType.PROFILE_METRIC:
        out.append(f'{where}: frames on a non-profile metric')
    for f in m.frames:
        if f.frame_id != xxhash.xxh64(f.name.encode('utf-8')).intdigest():
            out.append(f'{where}: frame {f.name!r} id is not xxh64 of its name')
    for dp in m.datapoints:
        kind = dp.WhichOneof('value')
        if kind != VALUE_OF[m.type]:
            out.append(f'{where}: a {PB.Metric.MetricType.Name(m.type)} datapoint holds {kind}')
            continue
        # The source's own timestamp (a test's may be small); unset would be
        # the upload time, so 0 is never sent.
        if dp.measurement_ts <= 0:
            out.append(f'{where}: measurement_ts {dp.measurement_ts}')
        if kind == 'gauge' and not math.isfinite(dp.gauge):
            out.append(f'{where}: gauge {dp.gauge}')
        if kind == 'gauge' and m.name.endswith('_percent') and not 0 <= dp.gauge <= 100:
            out.append(f'{where}: {dp.gauge} is not a percent')
        if kind == 'total' and (not math.isfinite(dp.total) or dp.total == 0):
            out.append(f'{where}: total {dp.total}; the collector sends only a non-zero finite delta')
        if kind == 'histogram':
            h = dp.histogram
            if len(h.bins) != len(h.counts):
                out.append(f'{where}: {len(h.bins)} bins, {len(h.counts)} counts')
            if list(h.bins) != sorted(set(h.bins)):
                out.append(f'{where}: bins not strictly ascending (the collector sorts them)')
            if any(c <= 0 for c in h.counts):
                out.append(f'{where}: a bin count <= 0; the collector sends only bins that grew')
            if h.HasField('count') != h.HasField('sum'):
                out.append(f'{where}: count and sum travel together')
            if not h.bins and not h.count:
                out.append(f'{where}: neither bins nor a count; the collector skips such a datapoint')
            if h.HasField('min') and h.HasField('max') and h.min > h.max:
                out.append(f'{where}: min {h.min} > max {h.max}')
        if kind == 'profile':
            p = dp.profile
            if not len(p.frame_ids) == len(p.values) == len(p.samples):
                out.append(f'{where}: profile lists of unequal length')
            if len(p.frame_ids) > 250:
                out.append(f'{where}: {len(p.frame_ids)} frames; MAX_PROFILE_FRAMES is 250')
            for fid in p.frame_ids:
                if fid not in frame_names:
                    out.append(f'{where}: frame id {fid} has no name in frames')
                    break
    return out


def check_log_batch(lb, where):
    out = check_tags(lb.tags, f'{where} log batch')
    for e in lb.log_entries:
        if e.level not in UPLOADED_LEVELS:
            out.append(f'{where}: log level {PB.LogEntry.LogLevel.Name(e.level)}; the collector uploads debug to critical')
        if e.entry_ts:
            out.append(f'{where}: entry_ts set; the collector leaves it empty')
        if not ns(e.log_ts):
            out.append(f'{where}: log_ts {e.log_ts} is not epoch ns')
        if len(e.message) > MAX_MESSAGE or len(e.exception) > MAX_EXCEPTION:
            out.append(f'{where}: a {len(e.message)}-character message or {len(e.exception)}-character '
                       f'exception; LogStore keeps at most {MAX_MESSAGE} / {MAX_EXCEPTION}')
    return out


def check_resource(r, where):
    where = f'{where} resource {r.kind}'
    out = check_tags(r.tags, where)
    if r.kind not in RESOURCE_TAGS:
        return out + [f'{where}: a kind graphsignal does not send']
    if r.resource_id:
        out.append(f'{where}: resource_id set; the collector leaves it empty')
    own = {t.key for t in r.tags} - GLOBAL_TAGS
    if not any(want <= own for want in RESOURCE_TAGS[r.kind]):
        out.append(f'{where}: tags {sorted(own)} lack {" or ".join(str(sorted(w)) for w in RESOURCE_TAGS[r.kind])}')
    if not ns(r.first_seen_ts) or r.last_seen_ts < r.first_seen_ts:
        out.append(f'{where}: first_seen_ts {r.first_seen_ts}, last_seen_ts {r.last_seen_ts}')
    for a in r.attributes:
        if len(a.name) > 50 or len(a.value) > MAX_ATTRIBUTE:
            out.append(f'{where}: attribute {a.name[:60]!r} past 50/{MAX_ATTRIBUTE} characters')
    return out


def check_body(body, names, where):
    req = PB.UploadRequest()
    try:
        req.ParseFromString(body)
    except Exception as exc:  # the real parser's own error, whatever its class
        return [f'{where}: graphsignal {graphsignal.__version__} cannot parse it: {exc}'], req
    out = unknown(req, where)
    if not ns(req.upload_ts):
        out.append(f'{where}: upload_ts {req.upload_ts} is not epoch ns')
    if not (req.metrics or req.log_batches or req.resources):
        out.append(f'{where}: empty upload; the uploader posts only a non-empty buffer')
    for m in req.metrics:
        out += check_metric(m, names, where)
    for lb in req.log_batches:
        out += check_log_batch(lb, where)
    for r in req.resources:
        out += check_resource(r, where)
    return out, req


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder = pathlib.Path(argv[1])
    names = known_names()
    bodies = sorted(folder.glob('*.v1.pb'))
    v0 = sorted(folder.glob('*.v0.pb'))
    problems, counts = [], {'metrics': 0, 'log entries': 0, 'resources': 0}
    seen = {}
    for path in bodies:
        out, req = check_body(path.read_bytes(), names, path.name)
        problems += out
        counts['metrics'] += len(req.metrics)
        counts['log entries'] += sum(len(lb.log_entries) for lb in req.log_batches)
        counts['resources'] += len(req.resources)
        for m in req.metrics:
            seen.setdefault(m.name, PB.Metric.MetricType.Name(m.type))
    for p in problems:
        print(p)
    print(f'decode.py: graphsignal {graphsignal.__version__} ({PKG}) decoded {len(bodies)} v1 bodies '
          f'({", ".join(f"{v} {k}" for k, v in counts.items())}, {len(seen)} metric names, '
          f'{sum(1 for n in seen if GS_NAMESPACE.match(n))} of them Graphsignal\'s); '
          f'{len(v0)} v0 bodies not decodable (1.1.2 has no Span); {len(problems)} problems')
    if os.environ.get('DECODE_NAMES'):
        for n in sorted(seen):
            print(f'  {n} {seen[n]}')
    if not bodies:
        print('decode.py: no bodies: was INFERPROF_GRAPHSIGNAL_BODIES set for the tests?')
        return 1
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
