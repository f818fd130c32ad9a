// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package encode // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"

import (
	"strings"
	"time"

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

const (
	attrHostID       = "host.id"
	attrCreationTime = "process.creation.time"
	// maxTreeDepth bounds the walk up process.parent_pid to the root.
	maxTreeDepth = 16
)

// Graphsignal's names for host and process attributes
// (recorders/host_recorder.py, recorders/process_recorder.py @ 82849ec).
var graphsignalResourceAttrs = map[string]string{
	"os.type":                 "platform.name",
	"os.version":              "platform.version",
	"host.arch":               "platform.machine",
	"process.runtime.name":    "runtime.name",
	"process.runtime.version": "runtime.version",
}

// resourceBuilder collects the host, process and device identities seen in
// one upload, each once.
type resourceBuilder struct {
	e       *Encoder
	now     int64
	seen    map[string]*signalsv1.Resource
	first   map[string]int64 // a start time the data tells, by key
	keys    []string
	devices map[[2]string]string // host, hw.id → resource key
}

func (e *Encoder) newResourceBuilder(now int64) *resourceBuilder {
	return &resourceBuilder{
		e: e, now: now, seen: map[string]*signalsv1.Resource{}, first: map[string]int64{},
		devices: map[[2]string]string{},
	}
}

func str(m pcommon.Map, k string) string {
	v, ok := m.Get(k)
	if !ok {
		return ""
	}
	s, _ := scalar(v)
	return clean(s)
}

// put records a resource once per upload and returns its key.
func (r *resourceBuilder) put(kind string, tags []kv, attrs func(*resourceAttrs)) string {
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
		return key
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
		a := &resourceAttrs{rename: r.e.graphsignal()}
		attrs(a)
		res.Attributes = a.out
	}
	r.seen[key] = res
	r.keys = append(r.keys, key)
	return key
}

type resourceAttrs struct {
	out    []*signalsv1.Attribute
	rename bool // use Graphsignal's attribute names
}

func (a *resourceAttrs) set(k, v string) {
	for _, at := range a.out {
		if at.Name == k {
			at.Value = v
			return
		}
	}
	a.out = append(a.out, &signalsv1.Attribute{Name: k, Value: v})
}

func (a *resourceAttrs) from(m pcommon.Map, keep func(string) bool) {
	for k, v := range m.All() {
		if !keep(k) || notResourceTag(k) {
			continue
		}
		s, ok := scalar(v)
		if !ok || (v.Type() == pcommon.ValueTypeStr && IsContent(k)) {
			continue
		}
		s, _ = cut(clean(s), MaxAttr)
		name := clean(k)
		if a.rename {
			if n, ok := graphsignalResourceAttrs[k]; ok {
				name = n
			} else if n, ok := deviceAttrNames[k]; ok {
				name = n
			}
		}
		a.set(name, s)
	}
}

func isHostAttr(k string) bool {
	return strings.HasPrefix(k, "host.") || strings.HasPrefix(k, "os.")
}

func isDeviceAttr(k string) bool {
	return strings.HasPrefix(k, "hw.") || strings.HasPrefix(k, "nvidia.gpu.")
}

// add records the host and process a resource describes.
func (r *resourceBuilder) add(res pcommon.Map) {
	gs := r.e.graphsignal()
	host, hostID := str(res, names.ResourceHostName), str(res, attrHostID)
	var hostTags []kv
	if host != "" {
		hostTags = append(hostTags, kv{names.ResourceHostName, host})
	}
	// Graphsignal tells hosts apart by host.name alone.
	if hostID != "" && !gs {
		hostTags = append(hostTags, kv{attrHostID, hostID})
	}
	if len(hostTags) > 0 {
		r.put(KindHost, hostTags, func(a *resourceAttrs) {
			a.from(res, func(k string) bool { return isHostAttr(k) && k != names.ResourceHostName && k != attrHostID })
		})
	}
	if pid := str(res, names.ResourceProcessPID); pid != "" {
		tags := []kv{{names.ResourceProcessPID, pid}}
		if gs {
			tags = append(tags, kv{tagRootPID, r.e.rootPID(host, str(res, names.ResourceServiceName), pid, str(res, attrParentPID))})
		}
		if host != "" {
			tags = append(tags, kv{names.ResourceHostName, host})
		}
		key := r.put(KindProcess, tags, func(a *resourceAttrs) {
			a.from(res, func(k string) bool {
				return !isHostAttr(k) && !isDeviceAttr(k) && k != names.ResourceProcessPID
			})
		})
		// Graphsignal's process first_seen is the process start time.
		if v, ok := res.Get(attrCreationTime); ok {
			if t, err := time.Parse(time.RFC3339Nano, v.AsString()); err == nil {
				r.first[key] = t.UnixNano()
			}
		}
	}
	r.addDevice(res, pcommon.NewMap())
}

// addDevice records the GPU a resource or a datapoint names with hw.id.
// With Graphsignal's names a device is known by its UUID only, as NVML
// gives it; a CUDA ordinal (the cupti receiver's hw.id for now) names no
// device resource.
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
	if _, ok := r.devices[[2]string{host, id}]; ok {
		return
	}
	gs := r.e.graphsignal()
	if gs && !isGPUUUID(id) {
		return
	}
	var tags []kv
	if gs {
		tags = []kv{{tagDeviceUUID, id}}
		if bus := r.e.busID(id, str(src, attrPCIBusID)); bus != "" {
			tags = append(tags, kv{tagDeviceBusID, bus})
		}
	} else {
		tags = []kv{{names.AttrDeviceID, id}}
	}
	if host != "" {
		tags = append(tags, kv{names.ResourceHostName, host})
	}
	key := r.put(KindDevice, tags, func(a *resourceAttrs) {
		a.from(src, func(k string) bool {
			return isDeviceAttr(k) && k != names.AttrDeviceID && (!gs || k != attrPCIBusID)
		})
		if gs {
			if mem := r.e.deviceMemory(id, ""); mem != "" {
				a.set("mem_total", mem)
			}
		}
	})
	r.devices[[2]string{host, id}] = key
}

// deviceAttr sets a device resource attribute from a datapoint's value
// (mem_total from the memory limit), remembered for later uploads.
func (r *resourceBuilder) deviceAttr(res, attrs pcommon.Map, name, value string) {
	id := str(attrs, names.AttrDeviceID)
	if id == "" {
		id = str(res, names.AttrDeviceID)
	}
	key, ok := r.devices[[2]string{str(res, names.ResourceHostName), id}]
	if !ok {
		return
	}
	r.e.deviceMemory(id, value)
	a := &resourceAttrs{out: r.seen[key].Attributes}
	a.set(name, value)
	r.seen[key].Attributes = a.out
}

// finish returns the resources with their first-seen times: the earliest
// of when the exporter first saw them and any start time the data tells,
// kept for as long as the exporter runs (Graphsignal's ResourceStore keeps
// min(first_seen) and max(last_seen)).
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
		}
		if t, ok := r.first[k]; ok && t > 0 && t < first {
			first = t
		}
		if _, ok := r.e.resources[k]; ok || len(r.e.resources) < maxResources {
			r.e.resources[k] = first
		}
		res.FirstSeenTs = first
		out = append(out, res)
	}
	return out
}

// rootPID is the top of the process tree a process belongs to, among the
// processes of one service on one host the exporter has seen: Graphsignal
// tags each process with the pid of the workload it watches
// (process.root_pid), so a worker's resource points at its server.
func (e *Encoder) rootPID(host, service, pid, parent string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := procKey{host, service, pid}
	if _, ok := e.parents[k]; ok || len(e.parents) < maxProcesses {
		e.parents[k] = parent
	}
	root := pid
	for range maxTreeDepth {
		p, ok := e.parents[procKey{host, service, root}]
		if !ok || p == "" {
			break
		}
		if _, seen := e.parents[procKey{host, service, p}]; !seen {
			break
		}
		root = p
	}
	return root
}

// busID remembers a device's PCI bus id, so a device named only by UUID
// (in cupti data) gets the same resource tags as in nvml data.
func (e *Encoder) busID(uuid, bus string) string {
	return e.remember(e.buses, uuid, bus)
}

// deviceMemory remembers (value set) or looks up a device's mem_total.
func (e *Encoder) deviceMemory(uuid, value string) string {
	return e.remember(e.memTotal, uuid, value)
}

func (e *Encoder) remember(m map[string]string, k, v string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if v != "" {
		if _, ok := m[k]; ok || len(m) < maxDevices {
			m[k] = v
		}
		return v
	}
	return m[k]
}
