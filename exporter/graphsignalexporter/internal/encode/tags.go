// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package encode // import "github.com/inferprof/inferprof/exporter/graphsignalexporter/internal/encode"

import (
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"

	signalsv1 "github.com/inferprof/inferprof/exporter/graphsignalexporter/signalspb/v1"
	"github.com/inferprof/inferprof/internal/privacy"
)

// Graphsignal's limits, in characters (signals/metrics.py, signals/spans.py).
const (
	MaxTagKey   = 50
	MaxTagValue = 250
	MaxAttr     = 2500
	// graphsignal 1.1.2's LogStore (signals/logs.py) keeps no message over
	// 1024 characters nor exception over 4096, so its collector never
	// uploads one; ours are cut there.
	maxMessage = 1024
	maxExcept  = 4 * 1024
)

// EnvTagPrefix names environment variables that become tags, as in
// Graphsignal's own client: GRAPHSIGNAL_TAG_DEPLOYMENT=prod adds deployment=prod.
const EnvTagPrefix = "GRAPHSIGNAL_TAG_"

// EnvTags reads GRAPHSIGNAL_TAG_<KEY> variables from environ; keys are
// lower-cased.
func EnvTags(environ []string) map[string]string {
	tags := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, EnvTagPrefix) || len(k) == len(EnvTagPrefix) {
			continue
		}
		tags[strings.ToLower(k[len(EnvTagPrefix):])] = v
	}
	return tags
}

// OSEnvTags is EnvTags over the process environment.
func OSEnvTags() map[string]string { return EnvTags(os.Environ()) }

// notResourceTag reports whether a resource attribute is kept from tags:
// only the allow-list of attributes that may be labels
// (privacy.LabelResourceAttributes, the list the shipped configs'
// transform/labels keeps for target_info) becomes a tag, so an unknown one
// (an application's own, a JSON blob, a command line that can hold a
// prompt) never does, with or without transform/labels in the pipeline.
// The SDK's name and version pass that list for target_info but say nothing
// about what is measured, so they are no tag either.
func notResourceTag(k string) bool {
	return !privacy.IsLabelResourceAttribute(k) || strings.HasPrefix(k, "telemetry.sdk.")
}

// IsContent reports whether key names user text: inferprof's one content
// list (internal/privacy). String values under such keys are never
// exported; numbers (gen_ai.usage.prompt_tokens) are. Event names are
// checked against the same list's events.
func IsContent(key string) bool { return privacy.IsContentKey(key) || privacy.IsContentEvent(key) }

// clean makes s valid UTF-8: protobuf refuses to marshal a string field that
// is not, and pdata does not check what receivers hand it.
func clean(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// cut truncates s to n characters.
func cut(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	if utf8.RuneCountInString(s) <= n {
		return s, false
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j], true
		}
		i++
	}
	return s, false
}

// scalar returns v as a tag value, or false for values tags cannot hold.
func scalar(v pcommon.Value) (string, bool) {
	switch v.Type() {
	case pcommon.ValueTypeStr, pcommon.ValueTypeInt, pcommon.ValueTypeDouble, pcommon.ValueTypeBool:
		return v.AsString(), true
	}
	return "", false
}

type kv struct{ k, v string }

// tagSet builds one signal's tags: global, then resource, then own
// attributes, a later key winning, sorted by key. It is reused between
// signals.
type tagSet struct {
	kvs       []kv
	truncated int
	d         xxhash.Digest
	cache     map[kv]*signalsv1.Tag // nil: no sharing
}

func (t *tagSet) reset(global []kv) {
	t.kvs = append(t.kvs[:0], global...)
}

func (t *tagSet) put(k, v string) {
	k, v = clean(k), clean(v)
	for i := range t.kvs {
		if t.kvs[i].k == k {
			t.kvs[i].v = v
			return
		}
	}
	t.kvs = append(t.kvs, kv{k, v})
}

func (t *tagSet) putMap(m pcommon.Map, skip func(string) bool) {
	for k, v := range m.All() {
		if skip != nil && skip(k) {
			continue
		}
		s, ok := scalar(v)
		if !ok || (v.Type() == pcommon.ValueTypeStr && IsContent(k)) {
			continue
		}
		t.put(k, s)
	}
}

// finish sorts and truncates the set and returns its grouping key, a hash
// (64 bits: a collision within one upload is not a practical concern).
func (t *tagSet) finish() uint64 {
	slices.SortFunc(t.kvs, func(a, b kv) int { return strings.Compare(a.k, b.k) })
	t.d.Reset()
	for i := range t.kvs {
		var ck, cv bool
		t.kvs[i].k, ck = cut(t.kvs[i].k, MaxTagKey)
		t.kvs[i].v, cv = cut(t.kvs[i].v, MaxTagValue)
		if ck {
			t.truncated++
		}
		if cv {
			t.truncated++
		}
		_, _ = t.d.WriteString(t.kvs[i].k)
		_, _ = t.d.Write(sep)
		_, _ = t.d.WriteString(t.kvs[i].v)
		_, _ = t.d.Write(sep)
	}
	return t.d.Sum64()
}

var sep = []byte{0}

func (t *tagSet) v1Tags() []*signalsv1.Tag {
	out := make([]*signalsv1.Tag, len(t.kvs))
	for i, p := range t.kvs {
		out[i] = t.tag(p)
	}
	return out
}

// tag returns the message for p, shared between the signals of one upload
// when a cache is set: most tags (global, resource) repeat on every metric.
func (t *tagSet) tag(p kv) *signalsv1.Tag {
	if t.cache == nil {
		return &signalsv1.Tag{Key: p.k, Value: p.v}
	}
	if tg, ok := t.cache[p]; ok {
		return tg
	}
	tg := &signalsv1.Tag{Key: p.k, Value: p.v}
	if len(t.cache) < maxTagCache {
		t.cache[p] = tg
	}
	return tg
}

// maxTagCache bounds the per-upload tag cache.
const maxTagCache = 4096

// globalTags merges env tags, config tags (winning) and instance.id into
// a sorted list.
func globalTags(env, cfg map[string]string, instanceID string) []kv {
	var t tagSet
	for k, v := range env {
		t.put(k, v)
	}
	for k, v := range cfg {
		t.put(k, v)
	}
	t.put("instance.id", instanceID)
	t.finish()
	return t.kvs
}
