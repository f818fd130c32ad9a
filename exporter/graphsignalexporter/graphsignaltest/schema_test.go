// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignaltest

import (
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
)

func profile(frames int) *signalsv1.UploadRequest {
	m := &signalsv1.Metric{Name: "cuda_kernels_nanoseconds", Type: signalsv1.Metric_PROFILE_METRIC}
	p := &signalsv1.DataPoint_Profile{}
	for i := 0; i < frames; i++ {
		name := "k" + string(rune('a'+i%26)) + time.Duration(i).String()
		id := xxhash.Sum64String(name)
		m.Frames = append(m.Frames, &signalsv1.ProfileFrame{FrameId: id, Name: name})
		p.FrameIds, p.Values, p.Samples = append(p.FrameIds, id), append(p.Values, 1), append(p.Samples, 1)
	}
	m.Datapoints = []*signalsv1.DataPoint{{Value: &signalsv1.DataPoint_Profile_{Profile: p}, MeasurementTs: time.Now().UnixNano()}}
	return &signalsv1.UploadRequest{UploadTs: time.Now().UnixNano(), Metrics: []*signalsv1.Metric{m}}
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}

// The check must refuse what Graphsignal would not read, or it proves
// nothing about the uploads it passes.
func TestCheckV1Refuses(t *testing.T) {
	good := marshal(t, profile(MaxProfileFrames))
	_, err := CheckV1(good)
	require.NoError(t, err)

	// A field number Graphsignal's UploadRequest does not have (5 is
	// resources in the v0 schema).
	bad := protowire.AppendTag(append([]byte(nil), good...), 5, protowire.BytesType)
	bad = protowire.AppendBytes(bad, marshal(t, &signalsv1.Resource{Kind: "host"}))
	_, err = CheckV1(bad)
	assert.ErrorContains(t, err, "does not have")

	_, err = CheckV1(marshal(t, profile(MaxProfileFrames+1)))
	assert.ErrorContains(t, err, "Graphsignal keeps 250")

	wrongID := profile(2)
	wrongID.Metrics[0].Frames[0].FrameId++
	_, err = CheckV1(marshal(t, wrongID))
	assert.ErrorContains(t, err, "not xxh64")

	counterAsGauge := profile(1)
	counterAsGauge.Metrics[0].Type = signalsv1.Metric_COUNTER_METRIC
	_, err = CheckV1(marshal(t, counterAsGauge))
	assert.ErrorContains(t, err, "COUNTER_METRIC datapoint holds")

	longTag := profile(1)
	longTag.Metrics[0].Tags = []*signalsv1.Tag{{Key: "k", Value: string(make([]byte, 251))}}
	_, err = CheckV1(marshal(t, longTag))
	assert.ErrorContains(t, err, "50/250")

	msTimes := profile(1)
	msTimes.UploadTs = time.Now().UnixMilli()
	_, err = CheckV1(marshal(t, msTimes))
	assert.ErrorContains(t, err, "not epoch nanoseconds")
}
