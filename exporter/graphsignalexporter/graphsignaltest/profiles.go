// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package graphsignaltest // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/graphsignaltest"

import signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"

// FrameValues sums a profile metric's datapoints per frame name: the
// value and the samples.
func FrameValues(m *signalsv1.Metric) map[string][2]uint64 {
	out := map[string][2]uint64{}
	addFrames(out, m)
	return out
}

// Profile sums the profile metric name over every accepted upload, per
// frame name: the value and the samples.
func (s *Server) Profile(name string) map[string][2]uint64 {
	out := map[string][2]uint64{}
	for _, u := range s.Accepted() {
		for _, m := range u.V1.GetMetrics() {
			if m.GetName() == name {
				addFrames(out, m)
			}
		}
	}
	return out
}

func addFrames(out map[string][2]uint64, m *signalsv1.Metric) {
	byID := map[uint64]string{}
	for _, f := range m.Frames {
		byID[f.FrameId] = f.Name
	}
	for _, dp := range m.Datapoints {
		p := dp.GetProfile()
		for i, id := range p.FrameIds {
			v := out[byID[id]]
			out[byID[id]] = [2]uint64{v[0] + p.Values[i], v[1] + p.Samples[i]}
		}
	}
}
