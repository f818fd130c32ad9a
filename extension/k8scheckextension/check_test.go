// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package k8scheckextension

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestStartSaysOnceWhatIsMissing(t *testing.T) {
	inPod := map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
	for _, tc := range []struct {
		name        string
		passthrough bool
		env         map[string]string
		wantErr     bool
		wantLevel   zapcore.Level
		wantIn      string
		wantNoLog   bool
	}{
		{name: "bare metal, passthrough", passthrough: true, env: nil, wantLevel: zapcore.InfoLevel, wantIn: "No Kubernetes API server"},
		{name: "pod, passthrough", passthrough: true, env: inPod, wantLevel: zapcore.WarnLevel, wantIn: "INFERPROF_K8S_PASSTHROUGH=false"},
		{name: "pod, API", passthrough: false, env: inPod, wantNoLog: true},
		// Only the host set: client-go's InClusterConfig needs both.
		{name: "half a pod, API", passthrough: false, env: map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, wantErr: true},
		{name: "bare metal, API", passthrough: false, env: nil, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			c := &check{cfg: &Config{Passthrough: tc.passthrough, NodeName: "n1"}, logger: zap.New(core),
				getenv: func(k string) string { return tc.env[k] }}
			err := c.Start(t.Context(), componenttest.NewNopHost())
			if tc.wantErr {
				require.ErrorIs(t, err, errNoAPIServer)
				assert.Contains(t, err.Error(), "INFERPROF_K8S_PASSTHROUGH=true")
				return
			}
			require.NoError(t, err)
			require.NoError(t, c.Shutdown(t.Context()))
			if tc.wantNoLog {
				assert.Zero(t, logs.Len())
				return
			}
			require.Equal(t, 1, logs.Len(), "one line, once")
			entry := logs.All()[0]
			assert.Equal(t, tc.wantLevel, entry.Level)
			assert.Contains(t, entry.Message, tc.wantIn)
			assert.Contains(t, entry.Message, "k8s.namespace.name")
			assert.Equal(t, "n1", entry.ContextMap()["node"])
		})
	}
}
