// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"crypto/rand"
	"fmt"
	"net/url"
	"strings"
)

// One engine instance id, shared by every process of the server: the API
// server's request spans, the engine processes' step hook and the CUPTI
// library all read it from OTEL_RESOURCE_ATTRIBUTES, which the OpenTelemetry
// SDKs turn into the resource's service.instance.id, and which child
// processes inherit. The collector joins requests, steps and kernels on it,
// so two replicas with one service.name stay apart.
const (
	envResourceAttrs = "OTEL_RESOURCE_ATTRIBUTES"
	attrInstanceID   = "service.instance.id"
)

// withInstanceID returns attrs (an OTEL_RESOURCE_ATTRIBUTES value) with a
// service.instance.id: unchanged when it has a non-empty one, else with
// newID's appended (the last occurrence of a key wins, so an empty one is
// overridden).
func withInstanceID(attrs string, newID func() string) (string, bool) {
	if resourceAttribute(attrs, attrInstanceID) != "" {
		return attrs, false
	}
	add := attrInstanceID + "=" + newID()
	if strings.TrimSpace(attrs) == "" {
		return add, true
	}
	return attrs + "," + add, true
}

// resourceAttribute reads key from an OTEL_RESOURCE_ATTRIBUTES value the
// way the OpenTelemetry SDKs do (the Python SDK's OTELResourceDetector,
// opentelemetry-sdk resources/__init__.py @00c616e9, which the engines use):
// split on ",", then at the first "=", trim both, percent-decode the value;
// the last occurrence wins.
func resourceAttribute(attrs, key string) string {
	found := ""
	for _, item := range strings.Split(attrs, ",") {
		k, v, ok := strings.Cut(item, "=")
		if !ok || strings.TrimSpace(k) != key {
			continue
		}
		v = strings.TrimSpace(v)
		if dec, err := url.PathUnescape(v); err == nil {
			v = dec
		}
		found = v
	}
	return found
}

// newInstanceID returns a random (version 4) UUID, the form the semantic
// conventions recommend for service.instance.id.
func newInstanceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails on Linux (getrandom)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
