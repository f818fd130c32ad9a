# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""decode.py must refuse what Graphsignal's collector would not write, or it
proves nothing about the bodies it passes. Bodies are built with the
package's own classes, the way collector.py builds them."""

import time
import unittest

import xxhash
from graphsignal.proto import signals_pb2 as pb

import decode

NAMES = decode.known_names()
IID = 'a1b2c3d4e5f6'


def tag(msg, key, value):
    t = msg.tags.add()
    t.key, t.value = key, value


def good():
    now = time.time_ns()
    req = pb.UploadRequest(upload_ts=now)
    m = req.metrics.add(name='gpu_utilization_percent', type=pb.Metric.MetricType.GAUGE_METRIC)
    tag(m, 'instance.id', IID)
    tag(m, 'device.uuid', 'GPU-1')
    m.datapoints.add(gauge=42.0, measurement_ts=now)
    p = req.metrics.add(name='cuda_kernels_nanoseconds', type=pb.Metric.MetricType.PROFILE_METRIC)
    tag(p, 'instance.id', IID)
    fid = xxhash.xxh64(b'gemm').intdigest()
    p.frames.add(frame_id=fid, name='gemm')
    dp = p.datapoints.add(measurement_ts=now)
    dp.profile.frame_ids.append(fid)
    dp.profile.values.append(3000)
    dp.profile.samples.append(3)
    h = req.metrics.add(name='vllm:e2e_request_latency_seconds', type=pb.Metric.MetricType.HISTOGRAM_METRIC)
    tag(h, 'instance.id', IID)
    hdp = h.datapoints.add(measurement_ts=now)
    hdp.histogram.bins.extend([0.1, 0.5])
    hdp.histogram.counts.extend([2, 1])
    hdp.histogram.count, hdp.histogram.sum = 3, 0.7
    lb = req.log_batches.add()
    tag(lb, 'instance.id', IID)
    lb.log_entries.add(level=pb.LogEntry.LogLevel.ERROR_LEVEL, message='XID error 79', log_ts=now)
    r = req.resources.add(kind='device', first_seen_ts=now, last_seen_ts=now)
    tag(r, 'instance.id', IID)
    tag(r, 'device.uuid', 'GPU-1')
    return req


def problems(req):
    out, _ = decode.check_body(req.SerializeToString(), NAMES, 'body')
    return out


class DecodeTest(unittest.TestCase):
    def test_good_passes(self):
        self.assertEqual(problems(good()), [])

    def refuses(self, mutate, text):
        req = good()
        mutate(req)
        self.assertTrue(any(text in p for p in problems(req)), (text, problems(req)))

    def test_unknown_field(self):
        body = good().SerializeToString() + bytes([0x2a, 0x02, 0x08, 0x01])  # field 5, v0's upload_ts slot
        out, _ = decode.check_body(body, NAMES, 'body')
        self.assertTrue(any('does not know' in p for p in out), out)

    def test_wrong_wire_type(self):
        # metrics (field 1) as a varint: a field the real parser cannot place.
        body = bytes([0x08, 0x01]) + good().SerializeToString()
        out, _ = decode.check_body(body, NAMES, 'body')
        self.assertTrue(out, 'a varint metrics field passed')

    def test_type_against_package(self):
        def counter(req):
            m = req.metrics[0]
            m.type = pb.Metric.MetricType.COUNTER_METRIC
            m.datapoints[0].total = 5
        self.refuses(counter, 'graphsignal writes it as a gauge')

    def test_invented_name(self):
        self.refuses(lambda r: setattr(r.metrics[0], 'name', 'gpu_utilization_ratio'), 'never writes')

    def test_unit_scale(self):
        self.refuses(lambda r: setattr(r.metrics[0].datapoints[0], 'gauge', 4200.0), 'not a percent')

    def test_kind_mismatch(self):
        self.refuses(lambda r: setattr(r.metrics[0].datapoints[0], 'total', 1.0), 'datapoint holds total')

    def test_frame_id(self):
        def bad(req):
            req.metrics[1].frames[0].frame_id += 1
        self.refuses(bad, 'not xxh64')

    def test_frame_unnamed(self):
        self.refuses(lambda r: r.metrics[1].datapoints[0].profile.frame_ids.__setitem__(0, 7), 'no name in frames')

    def test_zero_counter(self):
        def zero(req):
            m = req.metrics.add(name='vllm:prompt_tokens', type=pb.Metric.MetricType.COUNTER_METRIC)
            tag(m, 'instance.id', IID)
            m.datapoints.add(total=0, measurement_ts=1)
        self.refuses(zero, 'non-zero finite delta')

    def test_histogram_bins(self):
        def unsorted(req):
            del req.metrics[2].datapoints[0].histogram.bins[:]
            req.metrics[2].datapoints[0].histogram.bins.extend([0.5, 0.1])
        self.refuses(unsorted, 'strictly ascending')
        self.refuses(lambda r: r.metrics[2].datapoints[0].histogram.ClearField('sum'), 'travel together')

    def test_tags(self):
        self.refuses(lambda r: tag(r.metrics[0], 'device.uuid', 'GPU-2'), 'repeats')
        self.refuses(lambda r: tag(r.metrics[0], 'k', 'v' * 251), '50/250')
        self.refuses(lambda r: r.metrics[0].ClearField('tags'), 'no instance.id')

    def test_log_level_and_size(self):
        self.refuses(lambda r: setattr(r.log_batches[0].log_entries[0], 'level',
                                       pb.LogEntry.LogLevel.TRACE_LEVEL), 'debug to critical')
        self.refuses(lambda r: setattr(r.log_batches[0].log_entries[0], 'message', 'x' * 1025), 'at most 1024')

    def test_resource(self):
        self.refuses(lambda r: setattr(r.resources[0], 'kind', 'engine'), 'graphsignal does not send')
        self.refuses(lambda r: r.resources[0].ClearField('tags'), 'lack')
        self.refuses(lambda r: setattr(r.resources[0], 'first_seen_ts', 5), 'first_seen_ts')

    def test_upload_ts_ms(self):
        self.refuses(lambda r: setattr(r, 'upload_ts', int(time.time() * 1000)), 'not epoch ns')

    def test_go_schema_is_the_packages(self):
        # graphsignaltest/schema.go decodes with this file: it must be the
        # descriptor of the installed package's generated classes.
        import pathlib
        path = pathlib.Path(__file__).resolve().parent.parent / 'testdata' / 'signals-1.1.2.pb'
        self.assertEqual(path.read_bytes(), pb.DESCRIPTOR.serialized_pb)

    def test_package_names(self):
        # The AST read must find the NVML names the recorder writes, with
        # their types, or the namespace check would pass anything.
        self.assertEqual(NAMES['gpu_utilization_percent'], 'gauge')
        self.assertEqual(NAMES['gpu_xid_critical_errors'], 'counter')
        self.assertEqual(NAMES['gpu_nvlink_errors_crc'], 'counter')
        self.assertEqual(NAMES['gpu_ecc_errors_corrected_volatile'], 'counter')
        self.assertEqual(NAMES['gpu_nvlink_throughput_data_tx_kibibytes'], 'counter')
        self.assertEqual(NAMES['process_cpu_usage_percent'], 'gauge')
        self.assertEqual(NAMES['cuda_kernels_nanoseconds'], 'profile')


if __name__ == '__main__':
    unittest.main()
