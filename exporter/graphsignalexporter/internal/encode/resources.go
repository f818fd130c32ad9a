package encode // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
	"github.com/inferprof/inferprof/internal/names"
)

// Graphsignal resource kinds.
const (
	KindHost    = "host"
	KindProcess = "process"
	KindDevice  = "device"
)

const attrHostID = "host.id"

// resourceBuilder collects the host, process and device identities seen in
// one upload, each once.
type resourceBuilder struct {
	e       *Encoder
	now     int64
	seen    map[string]*signalsv1.Resource
	keys    []string
	devices map[[2]string]bool // host, hw.id already recorded
}

func (e *Encoder) newResourceBuilder(now int64) *resourceBuilder {
	return &resourceBuilder{e: e, now: now, seen: map[string]*signalsv1.Resource{}, devices: map[[2]string]bool{}}
}

func str(m pcommon.Map, k string) string {
	v, ok := m.Get(k)
	if !ok {
		return ""
	}
	s, _ := scalar(v)
	return clean(s)
}

func (r *resourceBuilder) put(kind string, tags []kv, attrs func(*resourceAttrs)) {
	var b strings.Builder
	b.WriteString(kind)
	for _, t := range tags {
		b.WriteByte(0)
		b.WriteString(t.k)
		b.WriteByte(0)
		b.WriteString(t.v)
	}
	key := b.String()
	if _, ok := r.seen[key]; ok {
		return
	}
	// Like metrics and logs, resources carry the global tags (instance.id).
	var ts tagSet
	ts.reset(r.e.global)
	for _, t := range tags {
		ts.put(t.k, t.v)
	}
	ts.finish()
	res := &signalsv1.Resource{Kind: kind, Tags: ts.v1Tags(), LastSeenTs: r.now}
	if attrs != nil {
		a := &resourceAttrs{}
		attrs(a)
		res.Attributes = a.out
	}
	r.seen[key] = res
	r.keys = append(r.keys, key)
}

type resourceAttrs struct{ out []*signalsv1.Attribute }

func (a *resourceAttrs) from(m pcommon.Map, keep func(string) bool) {
	for k, v := range m.All() {
		if !keep(k) || resourceDeny[k] {
			continue
		}
		s, ok := scalar(v)
		if !ok || (v.Type() == pcommon.ValueTypeStr && IsContent(k)) {
			continue
		}
		s, _ = cut(clean(s), MaxAttr)
		a.out = append(a.out, &signalsv1.Attribute{Name: clean(k), Value: s})
	}
}

func isHostAttr(k string) bool {
	return strings.HasPrefix(k, "host.") || strings.HasPrefix(k, "os.")
}

// add records the host and process a resource describes.
func (r *resourceBuilder) add(res pcommon.Map) {
	host, hostID := str(res, names.ResourceHostName), str(res, attrHostID)
	var hostTags []kv
	if host != "" {
		hostTags = append(hostTags, kv{names.ResourceHostName, host})
	}
	if hostID != "" {
		hostTags = append(hostTags, kv{attrHostID, hostID})
	}
	if len(hostTags) > 0 {
		r.put(KindHost, hostTags, func(a *resourceAttrs) {
			a.from(res, func(k string) bool { return isHostAttr(k) && k != names.ResourceHostName && k != attrHostID })
		})
	}
	if pid := str(res, names.ResourceProcessPID); pid != "" {
		tags := []kv{{names.ResourceProcessPID, pid}}
		if host != "" {
			tags = append(tags, kv{names.ResourceHostName, host})
		}
		r.put(KindProcess, tags, func(a *resourceAttrs) {
			a.from(res, func(k string) bool {
				return !isHostAttr(k) && !strings.HasPrefix(k, "hw.") && k != names.ResourceProcessPID
			})
		})
	}
	r.addDevice(res, pcommon.NewMap())
}

// addDevice records the GPU a resource or a datapoint names with hw.id.
func (r *resourceBuilder) addDevice(res, attrs pcommon.Map) {
	src := attrs
	id := str(attrs, names.AttrDeviceID)
	if id == "" {
		src = res
		if id = str(res, names.AttrDeviceID); id == "" {
			return
		}
	}
	host := str(res, names.ResourceHostName)
	if r.devices[[2]string{host, id}] {
		return
	}
	r.devices[[2]string{host, id}] = true
	tags := []kv{{names.AttrDeviceID, id}}
	if host != "" {
		tags = append(tags, kv{names.ResourceHostName, host})
	}
	r.put(KindDevice, tags, func(a *resourceAttrs) {
		a.from(src, func(k string) bool { return strings.HasPrefix(k, "hw.") && k != names.AttrDeviceID })
	})
}

// finish returns the resources with their first-seen times.
func (r *resourceBuilder) finish() []*signalsv1.Resource {
	if len(r.keys) == 0 {
		return nil
	}
	out := make([]*signalsv1.Resource, 0, len(r.keys))
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	for _, k := range r.keys {
		res := r.seen[k]
		first, ok := r.e.resources[k]
		if !ok {
			first = r.now
			if len(r.e.resources) < maxResources {
				r.e.resources[k] = first
			}
		}
		res.FirstSeenTs = first
		out = append(out, res)
	}
	return out
}
