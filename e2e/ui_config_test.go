// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// TestOldUIKeysOnGraphsignalAreRefused: a config written before the
// dashboard and the timeline left the graphsignal exporter (issue #28)
// stops at startup with an error naming inferprof_ui; a typo in
// inferprof_ui's own section is named too, despite confighttp's squashed
// server settings.
func TestOldUIKeysOnGraphsignalAreRefused(t *testing.T) {
	for name, tc := range map[string]struct{ set, want string }{
		"timeline":  {"exporters::graphsignal::timeline::memory_limit_mib=256", "timeline: the dashboard and the timeline moved to the inferprof_ui exporter"},
		"dashboard": {"exporters::graphsignal::dashboard::goodput::e2e=20s", "dashboard: the dashboard and the timeline moved to the inferprof_ui exporter"},
		"typo":      {"exporters::inferprof_ui::endpont=127.0.0.1:1", "has invalid keys: endpont"},
	} {
		t.Run(name, func(t *testing.T) {
			ports := e2etest.NewPorts(t)
			c := e2etest.Launch(t, e2etest.Options{ConfigFiles: []string{shippedConfig("default.yaml")},
				Env: defaultEnv(t, ports, t.TempDir()), Args: []string{"--set=" + tc.set}})
			assert.NotEqual(t, 0, c.Wait(2*time.Minute))
			assert.Contains(t, c.Output(), tc.want)
		})
	}
}

// TestHealthIsHealthChecks: on config/default.yaml health_check answers,
// and neither the UI's listener nor graphsignal's has a /health route of
// its own any more.
func TestHealthIsHealthChecks(t *testing.T) {
	ports := e2etest.NewPorts(t)
	e2etest.Start(t, e2etest.Options{ConfigFiles: []string{shippedConfig("default.yaml")}, Env: defaultEnv(t, ports, t.TempDir())})
	status := func(url string) int {
		resp, err := http.Get(url)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, status("http://"+ports.Addr("health")+"/"))
	assert.Equal(t, http.StatusOK, status("http://"+ports.Addr("ui")+"/"), "the dashboard")
	assert.Equal(t, http.StatusOK, status("http://"+ports.Addr("graphsignal_local")+"/signals"))
	for _, addr := range []string{ports.Addr("ui"), ports.Addr("graphsignal_local")} {
		assert.Equal(t, http.StatusNotFound, status("http://"+addr+"/health"), addr)
	}
}
