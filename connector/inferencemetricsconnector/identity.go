// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package inferencemetricsconnector // import "github.com/inferprof/inferprof/connector/inferencemetricsconnector"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// identity returns the resource a span's series belong to: the whole
// resource when no key attributes are configured, else only those of its
// attributes. Two engine processes that differ in nothing an exporter keeps
// (vLLM's vllm.process_id, a restart) then share series and add up, instead
// of writing one label set in turn and making its counters go backwards.
// Each resource's identity is built once and cached by the hash of the whole
// resource, so the steady state allocates nothing; the returned map must not
// be changed (the store copies what it keeps).
func (c *metricsConnector) identity(res pcommon.Map) pcommon.Map {
	if len(c.cfg.ResourceMetricsKeyAttributes) == 0 {
		return res
	}
	full := c.hashResource(res)
	if id, ok := c.idCache[full]; ok {
		return id
	}
	if len(c.idCache) >= maxIdentities {
		// Bounded: many short-lived resources start the cache over.
		clear(c.idCache)
	}
	id := pcommon.NewMap()
	id.EnsureCapacity(len(c.cfg.ResourceMetricsKeyAttributes))
	for _, k := range c.cfg.ResourceMetricsKeyAttributes {
		if v, ok := res.Get(k); ok {
			v.CopyTo(id.PutEmpty(k))
		}
	}
	c.idCache[full] = id
	return id
}

// maxIdentities bounds the identity cache: resources seen, not series.
const maxIdentities = 4096
