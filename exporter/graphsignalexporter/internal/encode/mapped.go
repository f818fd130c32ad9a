// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package encode // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"

import (
	"math"
	"slices"
	"strconv"

	"github.com/cespare/xxhash/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
)

// match returns the rule for a datapoint's attributes, or nil.
func match(rules []*rule, attrs pcommon.Map) *rule {
	for _, r := range rules {
		ok := true
		for _, m := range r.Match {
			v, has := attrs.Get(m.k)
			if !has || v.AsString() != m.v {
				ok = false
				break
			}
		}
		if ok {
			return r
		}
	}
	return nil
}

// consumed reports whether a datapoint attribute is used up by the rule
// rather than becoming a tag.
func (r *rule) consumed(k string) bool {
	for _, m := range r.Match {
		if m.k == k {
			return true
		}
	}
	return k == r.Frame || k == r.BitAttr || k == r.Tag.k || slices.Contains(r.Drop, k)
}

func (r *rule) scale() float64 {
	if r.Scale == 0 {
		return 1
	}
	return r.Scale
}

func (r *rule) renamed(v string) string {
	if n, ok := r.ValueRename[v]; ok {
		return n
	}
	return v
}

// mapped encodes a metric the name map has rules for, datapoint by
// datapoint, since rules can depend on attribute values.
func (b *metricsBuilder) mapped(res pcommon.Map, m pmetric.Metric, rules []*rule) {
	var dps pmetric.NumberDataPointSlice
	typ := signalsv1.Metric_COUNTER_METRIC
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		dps, typ = m.Gauge().DataPoints(), signalsv1.Metric_GAUGE_METRIC
	case pmetric.MetricTypeSum:
		dps = m.Sum().DataPoints()
	default:
		// Every mapped source is a gauge or a sum; anything else keeps its
		// own name.
		b.unmapped(res, "", m)
		return
	}
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		attrs := dp.Attributes()
		b.res.addDevice(res, attrs)
		r := match(rules, attrs)
		if r == nil || r.Kind == kindKeep {
			b.point(m.Name(), typ, b.startTags(attrs, nil), b.ts(dp.Timestamp()), number(dp))
			continue
		}
		v := number(dp) * r.scale()
		ts := b.ts(dp.Timestamp())
		switch r.Kind {
		case kindRename:
			key := b.startTags(attrs, r.consumed)
			if r.Tag.k != "" {
				if tv, ok := attrs.Get(r.Tag.k); ok {
					b.tags.put(r.Tag.v, r.renamed(tv.AsString()))
					key = b.tags.finish()
				}
			}
			b.point(r.Target, typ, key, ts, v)
			if r.DeviceAttr != "" {
				b.res.deviceAttr(res, attrs, r.DeviceAttr, strconv.FormatFloat(v, 'f', -1, 64))
			}
		case kindRate:
			start, end := int64(dp.StartTimestamp()), int64(dp.Timestamp())
			if start <= 0 || end <= start {
				// No interval to divide by: nothing honest to send.
				b.st.Skipped++
				continue
			}
			b.point(r.Target, signalsv1.Metric_GAUGE_METRIC, b.startTags(attrs, r.consumed), ts, v/(float64(end-start)/1e9))
		case kindBitmask:
			b.bit(r, attrs, ts, v)
		case kindProfile, kindSamples:
			_, modeKnown := res.Get(attrGraphMode)
			b.profile(r, m.Unit(), attrs, ts, number(dp), !modeKnown)
		}
	}
}

// graphMode sends cuda_graph_trace_mode for a resource whose cupti
// receiver says the library's mode: 0 graph, 1 node, as Graphsignal's
// library reports it (cupti_activity.cpp @ 40f84e6).
func (b *metricsBuilder) graphMode(mode string) {
	var v float64
	switch mode {
	case "graph":
	case "node":
		v = 1
	default:
		return
	}
	b.tags.kvs = append(b.tags.kvs[:0], b.base...)
	mm := b.get(gaugeGraphMode, signalsv1.Metric_GAUGE_METRIC, b.tags.finish())
	if len(mm.Datapoints) == 0 {
		mm.Datapoints = append(mm.Datapoints, &signalsv1.DataPoint{
			Value: &signalsv1.DataPoint_Gauge{Gauge: v}, MeasurementTs: b.req.UploadTs,
		})
	}
}

// bit ORs one reason's 0/1 value into its device's bitmask gauge.
func (b *metricsBuilder) bit(r *rule, attrs pcommon.Map, ts int64, v float64) {
	var bit uint64
	if reason, ok := attrs.Get(r.BitAttr); ok && v != 0 {
		bit = r.Bits[reason.AsString()]
	}
	mm := b.get(r.Target, signalsv1.Metric_GAUGE_METRIC, b.startTags(attrs, r.consumed))
	if n := len(mm.Datapoints); n > 0 && mm.Datapoints[n-1].MeasurementTs == ts {
		last := mm.Datapoints[n-1]
		last.Value = &signalsv1.DataPoint_Gauge{Gauge: float64(uint64(last.GetGauge()) | bit)}
		return
	}
	mm.Datapoints = append(mm.Datapoints, &signalsv1.DataPoint{
		Value: &signalsv1.DataPoint_Gauge{Gauge: float64(bit)}, MeasurementTs: ts,
	})
}

// profile adds a duration (kindProfile) or a count (kindSamples) to one
// frame of a profile: one profile per tag set without the frame attribute.
func (b *metricsBuilder) profile(r *rule, unit string, attrs pcommon.Map, ts int64, v float64, inferMode bool) {
	frameName := frameOther
	if r.Frame != "" {
		fv, ok := attrs.Get(r.Frame)
		switch {
		case ok && fv.AsString() != "":
			frameName = r.renamed(clean(fv.AsString()))
		case r.FrameDefault != "":
			frameName = r.FrameDefault
		default:
			b.st.Skipped++
			return
		}
	}
	key := profileKey{r.Target, b.startTags(attrs, r.consumed)}
	p, ok := b.profiles[key]
	if !ok {
		p = &profileAcc{key: key, tags: b.tags.v1Tags(), frames: map[string]*profileFrame{}}
		b.profiles[key] = p
		b.profOrd = append(b.profOrd, key)
	}
	p.mode = p.mode || (r.ModeGauge && inferMode)
	p.ts = max(p.ts, ts)
	f, ok := p.frames[frameName]
	if !ok {
		f = &profileFrame{}
		p.frames[frameName] = f
		p.order = append(p.order, frameName)
	}
	if r.Kind == kindProfile {
		f.value += v * unitToNs(unit)
	} else {
		f.samples += v
	}
}

func (b *metricsBuilder) flushProfiles() {
	for _, key := range b.profOrd {
		p := b.profiles[key]
		b.capFrames(p)
		prof := &signalsv1.DataPoint_Profile{}
		m := &signalsv1.Metric{Name: key.name, Type: signalsv1.Metric_PROFILE_METRIC, Tags: p.tags}
		for _, name := range p.order {
			f := p.frames[name]
			id := xxhash.Sum64String(name)
			prof.FrameIds = append(prof.FrameIds, id)
			prof.Values = append(prof.Values, toUint(f.value))
			prof.Samples = append(prof.Samples, toUint(f.samples))
			m.Frames = append(m.Frames, &signalsv1.ProfileFrame{FrameId: id, Name: name})
		}
		m.Datapoints = []*signalsv1.DataPoint{{
			Value:         &signalsv1.DataPoint_Profile_{Profile: prof},
			MeasurementTs: p.ts,
		}}
		b.req.Metrics = append(b.req.Metrics, m)
		if p.mode {
			b.req.Metrics = append(b.req.Metrics, &signalsv1.Metric{
				Name: gaugeGraphMode, Type: signalsv1.Metric_GAUGE_METRIC, Tags: p.tags,
				Datapoints: []*signalsv1.DataPoint{{Value: &signalsv1.DataPoint_Gauge{Gauge: 0}, MeasurementTs: p.ts}},
			})
		}
	}
}

// capFrames keeps a profile within Graphsignal's 250 frames. Like
// Graphsignal's writer, the first frames a profile sees keep their own
// name for as long as the exporter runs, so a frame's series never flips;
// past 249 of them the rest are counted in one frame "other".
func (b *metricsBuilder) capFrames(p *profileAcc) {
	series := xxhash.Sum64String(p.key.name) ^ p.key.tags
	b.e.mu.Lock()
	named, tracked := b.e.frames[series]
	if !tracked && len(b.e.frames) < maxProfileSeries {
		named = map[string]struct{}{}
		b.e.frames[series] = named
		tracked = true
	}
	if !tracked {
		// Past the series bound: cap this upload alone.
		named = map[string]struct{}{}
	}
	var fold []string
	for _, name := range p.order {
		if name == frameOther {
			continue
		}
		if _, ok := named[name]; ok {
			continue
		}
		if len(named) < maxFrames-1 {
			named[name] = struct{}{}
			continue
		}
		fold = append(fold, name)
	}
	b.e.mu.Unlock()
	if len(fold) == 0 {
		return
	}
	other, ok := p.frames[frameOther]
	if !ok {
		other = &profileFrame{}
		p.frames[frameOther] = other
		p.order = append(p.order, frameOther)
	}
	for _, name := range fold {
		f := p.frames[name]
		other.value += f.value
		other.samples += f.samples
		delete(p.frames, name)
	}
	p.order = slices.DeleteFunc(p.order, func(n string) bool { _, ok := p.frames[n]; return !ok })
	b.st.FramesFolded += len(fold)
}

// unitToNs converts a duration in unit to nanoseconds.
func unitToNs(unit string) float64 {
	switch unit {
	case "s":
		return 1e9
	case "ms":
		return 1e6
	case "us", "µs":
		return 1e3
	}
	return 1
}

func toUint(v float64) uint64 {
	if v <= 0 || math.IsNaN(v) {
		return 0
	}
	return uint64(math.Round(v))
}
