// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package hostcheck refuses HTTP requests whose Host header names neither a
// loopback address nor a configured name, which is what a DNS rebinding page
// sends to a listener on 127.0.0.1.
package hostcheck // import "github.com/inferprof/inferprof/internal/hostcheck"

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Checker decides whether a request's Host is one a listener answers to.
type Checker struct {
	// allowed holds the configured names, lower-case and without a port.
	allowed map[string]struct{}
	any     bool
	// everywhere applies the check to connections that did not arrive on a
	// loopback address too.
	everywhere bool
}

// New returns a Checker that accepts loopback names and the names listed.
// An entry may hold several names separated by commas (one environment
// variable fills the list); empty ones are skipped. "*" accepts any Host. With no list, only connections that
// arrived on a loopback address are checked: a listener on a pod network is
// reached by names no one can list in advance, and DNS rebinding aims at
// loopback.
func New(allowed []string) (*Checker, error) {
	c := &Checker{allowed: map[string]struct{}{}}
	var names []string
	for _, entry := range allowed {
		for h := range strings.SplitSeq(entry, ",") {
			if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
				names = append(names, h)
			}
		}
	}
	c.everywhere = len(names) > 0
	for _, h := range names {
		switch {
		case h == "*":
			c.any = true
		case strings.ContainsAny(h, "/ "):
			return nil, fmt.Errorf("allowed_hosts: %q is not a host name (give it without scheme or port)", h)
		default:
			h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
			if _, err := netip.ParseAddr(h); strings.Contains(h, ":") && err != nil {
				return nil, fmt.Errorf("allowed_hosts: %q is not a host name (give it without port)", h)
			}
			c.allowed[h] = struct{}{}
		}
	}
	return c, nil
}

// Allowed reports whether r may be served.
func (c *Checker) Allowed(r *http.Request) bool {
	if c.any {
		return true
	}
	if !c.everywhere && !arrivedOnLoopback(r.Context()) {
		return true
	}
	return c.allowedHost(r.Host)
}

func (c *Checker) allowedHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" {
		// HTTP/1.0 without Host: no browser sends that.
		return true
	}
	if IsLoopbackName(host) {
		return true
	}
	_, ok := c.allowed[host]
	return ok
}

// IsLoopbackName reports whether host (no port) is localhost, a name under
// .localhost (RFC 6761 reserves them for loopback) or a loopback address.
func IsLoopbackName(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

func arrivedOnLoopback(ctx context.Context) bool {
	addr, ok := ctx.Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return true // not from net/http's server: check
	}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return false // a Unix socket: no browser reaches it
	}
	a, ok := netip.AddrFromSlice(tcp.IP)
	return ok && a.Unmap().IsLoopback()
}

// Middleware answers 403 to a request Allowed refuses, after refused(r).
func (c *Checker) Middleware(next http.Handler, refused func(*http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.Allowed(r) {
			if refused != nil {
				refused(r)
			}
			http.Error(w, "host not allowed: this listener answers to loopback names and its allowed_hosts only", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
