// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignaltest // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/graphsignaltest"

import (
	_ "embed" // Graphsignal's descriptor
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
)

// The schema the fake decodes with is Graphsignal's own: the serialized
// FileDescriptorProto its generated graphsignal/proto/signals_pb2.py
// carries, as installed from graphsignal 1.1.2 (testdata/signals-1.1.2.pb;
// real/test_decode.py checks it is still byte-equal to the package's). It
// is compiled at run time, independently of the exporter's own signalspb/v1:
// a field the exporter numbers or types differently shows up as a field
// Graphsignal does not know, and the upload is refused.
//
//go:embed testdata/signals-1.1.2.pb
var graphsignalDescriptor []byte

// referenceUploadRequest compiles Graphsignal's v1 UploadRequest.
func referenceUploadRequest() (protoreflect.MessageDescriptor, error) {
	fd := &descriptorpb.FileDescriptorProto{}
	if err := proto.Unmarshal(graphsignalDescriptor, fd); err != nil {
		return nil, err
	}
	file, err := protodesc.NewFile(fd, new(protoregistry.Files))
	if err != nil {
		return nil, err
	}
	return file.Messages().ByName("UploadRequest"), nil
}

var referenceV1, referenceErr = referenceUploadRequest()

// CheckV1 decodes body with Graphsignal's v1 schema and checks what
// Graphsignal's own client guarantees: no field Graphsignal does not know,
// known metric types and log levels, histogram bins matching counts,
// profiles of at most 250 frames whose ids are xxh64 of their names, and
// tags within 50/250 characters.
func CheckV1(body []byte) (*signalsv1.UploadRequest, error) {
	if referenceErr != nil {
		return nil, fmt.Errorf("compile reference schema: %w", referenceErr)
	}
	dyn := dynamicpb.NewMessage(referenceV1)
	if err := proto.Unmarshal(body, dyn); err != nil {
		return nil, fmt.Errorf("reference schema: %w", err)
	}
	if err := noUnknown(dyn); err != nil {
		return nil, err
	}
	req := &signalsv1.UploadRequest{}
	if err := proto.Unmarshal(body, req); err != nil {
		return nil, err
	}
	return req, checkSemantics(req)
}

func noUnknown(m protoreflect.Message) error {
	if u := m.GetUnknown(); len(u) > 0 {
		return fmt.Errorf("%s carries fields Graphsignal's schema does not have (%d bytes)", m.Descriptor().FullName(), len(u))
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Message() == nil:
		case fd.IsList():
			for i := 0; i < v.List().Len() && err == nil; i++ {
				err = noUnknown(v.List().Get(i).Message())
			}
		default:
			err = noUnknown(v.Message())
		}
		return err == nil
	})
	return err
}

func checkTags(where string, tags []*signalsv1.Tag) error {
	for _, t := range tags {
		if utf8.RuneCountInString(t.GetKey()) > 50 || utf8.RuneCountInString(t.GetValue()) > 250 {
			return fmt.Errorf("%s: tag %q longer than Graphsignal's 50/250 characters", where, t.GetKey())
		}
	}
	return nil
}

func checkSemantics(req *signalsv1.UploadRequest) error {
	var errs []error
	if req.GetUploadTs() < 1e18 {
		errs = append(errs, fmt.Errorf("upload_ts %d is not epoch nanoseconds", req.GetUploadTs()))
	}
	for _, m := range req.GetMetrics() {
		errs = append(errs, checkMetric(m), checkTags(m.GetName(), m.GetTags()))
	}
	for _, lb := range req.GetLogBatches() {
		errs = append(errs, checkTags("log batch", lb.GetTags()))
		for _, e := range lb.GetLogEntries() {
			if _, ok := signalsv1.LogEntry_LogLevel_name[int32(e.GetLevel())]; !ok {
				errs = append(errs, fmt.Errorf("log level %d is not Graphsignal's", e.GetLevel()))
			}
		}
	}
	for _, r := range req.GetResources() {
		if r.GetKind() != "host" && r.GetKind() != "process" && r.GetKind() != "device" {
			errs = append(errs, fmt.Errorf("resource kind %q", r.GetKind()))
		}
		if r.GetFirstSeenTs() < 1e18 || r.GetLastSeenTs() < r.GetFirstSeenTs() {
			errs = append(errs, fmt.Errorf("resource %s: first_seen_ts %d, last_seen_ts %d", r.GetKind(), r.GetFirstSeenTs(), r.GetLastSeenTs()))
		}
		errs = append(errs, checkTags("resource", r.GetTags()))
	}
	return errors.Join(errs...)
}

// MaxProfileFrames is Graphsignal's writer cap (kMaxProfileFrames in
// src/common/metrics_writer.h @ 82849ec).
const MaxProfileFrames = 250

func checkMetric(m *signalsv1.Metric) error {
	if m.GetName() == "" || len(m.GetDatapoints()) == 0 {
		return fmt.Errorf("metric %q: no name or no datapoints", m.GetName())
	}
	frames := map[uint64]string{}
	for _, f := range m.GetFrames() {
		if f.GetFrameId() != xxhash.Sum64String(f.GetName()) {
			return fmt.Errorf("%s: frame %q id %d is not xxh64 of its name", m.GetName(), f.GetName(), f.GetFrameId())
		}
		frames[f.GetFrameId()] = f.GetName()
	}
	for _, dp := range m.GetDatapoints() {
		var ok bool
		switch m.GetType() {
		case signalsv1.Metric_GAUGE_METRIC:
			_, ok = dp.GetValue().(*signalsv1.DataPoint_Gauge)
		case signalsv1.Metric_COUNTER_METRIC:
			_, ok = dp.GetValue().(*signalsv1.DataPoint_Total)
		case signalsv1.Metric_HISTOGRAM_METRIC:
			h := dp.GetHistogram()
			ok = h != nil && len(h.GetBins()) == len(h.GetCounts())
		case signalsv1.Metric_PROFILE_METRIC:
			p := dp.GetProfile()
			ok = p != nil && len(p.GetFrameIds()) == len(p.GetValues()) && len(p.GetFrameIds()) == len(p.GetSamples())
			if ok && len(p.GetFrameIds()) > MaxProfileFrames {
				return fmt.Errorf("%s: %d frames, Graphsignal keeps %d", m.GetName(), len(p.GetFrameIds()), MaxProfileFrames)
			}
			for _, id := range p.GetFrameIds() {
				if _, named := frames[id]; !named {
					return fmt.Errorf("%s: frame id %d has no name in frames", m.GetName(), id)
				}
			}
		}
		if !ok {
			return fmt.Errorf("%s: a %s datapoint holds %T", m.GetName(), m.GetType(), dp.GetValue())
		}
	}
	return nil
}
