// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package hostcheck

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func request(host, local string) *http.Request {
	r := &http.Request{Host: host}
	ctx := context.Background()
	if local != "" {
		ctx = context.WithValue(ctx, http.LocalAddrContextKey, &net.TCPAddr{IP: net.ParseIP(local), Port: 4318})
	}
	return r.WithContext(ctx)
}

func TestLoopbackListenerAnswersLoopbackNamesOnly(t *testing.T) {
	c, err := New(nil)
	require.NoError(t, err)
	for _, h := range []string{"localhost", "localhost:4318", "127.0.0.1:8889", "127.3.4.5", "[::1]:18259", "a.localhost", "LOCALHOST.", "[::ffff:127.0.0.1]:1", ""} {
		require.True(t, c.Allowed(request(h, "127.0.0.1")), h)
	}
	for _, h := range []string{"evil.example", "evil.example:4318", "localhost.evil.example", "127.0.0.1.evil.example", "10.0.0.1", "[::2]"} {
		require.False(t, c.Allowed(request(h, "127.0.0.1")), h)
		require.False(t, c.Allowed(request(h, "::1")), h)
	}
	// A pod-network listener is reached by names no one lists: unchecked.
	require.True(t, c.Allowed(request("inferprof-gateway.obs.svc:4318", "10.1.2.3")))
}

func TestAllowedHostsApplyEverywhere(t *testing.T) {
	c, err := New([]string{"inferprof.example, 10.0.0.7", "", "[fd00::1]"})
	require.NoError(t, err)
	require.True(t, c.Allowed(request("inferprof.example:4318", "10.1.2.3")))
	require.True(t, c.Allowed(request("10.0.0.7", "10.1.2.3")))
	require.True(t, c.Allowed(request("[fd00::1]:4318", "10.1.2.3")))
	require.True(t, c.Allowed(request("localhost", "10.1.2.3")))
	require.False(t, c.Allowed(request("other.example", "10.1.2.3")))
	require.False(t, c.Allowed(request("other.example", "127.0.0.1")))

	any, err := New([]string{"*"})
	require.NoError(t, err)
	require.True(t, any.Allowed(request("evil.example", "127.0.0.1")))

	empty, err := New([]string{""})
	require.NoError(t, err)
	require.True(t, empty.Allowed(request("x.example", "10.1.2.3")), "an empty variable is no list")
	require.False(t, empty.Allowed(request("x.example", "127.0.0.1")))
}

func TestNewRefusesURLsAndPorts(t *testing.T) {
	for _, h := range []string{"http://inferprof.example", "inferprof.example:4318", "a b"} {
		_, err := New([]string{h})
		require.ErrorContains(t, err, "allowed_hosts", h)
	}
}
