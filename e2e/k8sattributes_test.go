// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	k8sattributesprocessor "github.com/open-telemetry/opentelemetry-collector-contrib/processor/k8sattributesprocessor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The agent's k8s_attributes processor, configured exactly as in
// config/agent.yaml, against a fake Kubernetes API server that speaks the
// API's wire protocol (list and watch of v1 Pods, JSON), the way client-go's
// informers call it. contrib's own tests inject kube.NewFakeClient, which is
// internal to its module; this fake sits one level lower, at the protocol.
// Pod shape: k8s.io/api core/v1 types (v0.37.0, what k8sattributesprocessor
// v1.0.0 builds with); the ReplicaSet owner reference and name suffix are
// what the Deployment controller writes (k8sattributes derives
// k8s.deployment.name from them: internal/kube/client.go,
// extractDeploymentNameFromReplicaSet).

const (
	podIP       = "10.1.2.3"
	containerID = "3f1c7e0b9a8d4c2b1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d"
)

func enginePod() corev1.Pod {
	ctrl := true
	return corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "vllm-llama-7d9f8b6c5d-x2k4p", Namespace: "inference", UID: "6b0f5c1e-2a3d-4e5f-8a9b-0c1d2e3f4a5b",
			// The Deployment controller labels its pods with the ReplicaSet's
			// pod-template-hash, the suffix of the ReplicaSet's name.
			Labels:          map[string]string{"app": "vllm-llama", "pod-template-hash": "7d9f8b6c5d"},
			ResourceVersion: "1", CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "vllm-llama-7d9f8b6c5d",
				UID: "9c8b7a6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d", Controller: &ctrl}},
		},
		Spec: corev1.PodSpec{NodeName: "gpu-node-a", Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:v0.11.0"}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: podIP, PodIPs: []corev1.PodIP{{IP: podIP}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "vllm", ContainerID: "containerd://" + containerID,
				Image: "vllm/vllm-openai:v0.11.0", Ready: true}},
		},
	}
}

// fakeAPIServer answers GET /api/v1/pods: a list, or a watch that starts
// with the pods (for client-go's streaming list) and then stays open.
func fakeAPIServer(t *testing.T, pods ...corev1.Pod) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/pods" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		if fs := q.Get("fieldSelector"); fs != "" && fs != "spec.nodeName=gpu-node-a" {
			http.Error(w, "unexpected field selector "+fs, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if q.Get("watch") != "true" {
			_ = json.NewEncoder(w).Encode(corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
				ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: pods})
			return
		}
		enc := json.NewEncoder(w)
		if q.Get("sendInitialEvents") == "true" {
			for _, p := range pods {
				_ = enc.Encode(map[string]any{"type": "ADDED", "object": p})
			}
			_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": corev1.Pod{
				TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1", Annotations: map[string]string{"k8s.io/initial-events-end": "true"}},
			}})
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// agentK8sConfig is the k8s_attributes section of the shipped agent.yaml,
// pointed at the fake API server through a kubeconfig.
func agentK8sConfig(t *testing.T, apiServer string) (processor.Factory, component.Config) {
	t.Helper()
	t.Setenv("K8S_NODE_NAME", "gpu-node-a")
	t.Setenv("INFERPROF_K8S_PASSTHROUGH", "false")
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: %q}}]
users: [{name: fake, user: {}}]
contexts: [{name: fake, context: {cluster: fake, user: fake}}]
current-context: fake
`, apiServer)), 0o600))
	t.Setenv("KUBECONFIG", kubeconfig)

	resolver, err := confmap.NewResolver(confmap.ResolverSettings{
		URIs:              []string{"file:" + shippedConfig("agent.yaml")},
		ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
	})
	require.NoError(t, err)
	conf, err := resolver.Resolve(t.Context())
	require.NoError(t, err)
	section, err := conf.Sub("processors::k8s_attributes")
	require.NoError(t, err)
	require.NoError(t, section.Merge(confmap.NewFromStringMap(map[string]any{
		// Outside a pod: the kubeconfig instead of the service account, and
		// wait for the first list so the test is not racing the informer.
		"auth_type": "kubeConfig", "wait_for_metadata": true,
	})))
	f := k8sattributesprocessor.NewFactory()
	cfg := f.CreateDefaultConfig()
	require.NoError(t, section.Unmarshal(cfg))
	require.NoError(t, confmap.Validate(cfg))
	return f, cfg
}

func TestK8sAttributesOnRequestSpanAndGPUMemory(t *testing.T) {
	api := fakeAPIServer(t, enginePod())
	f, cfg := agentK8sConfig(t, api.URL)
	ctx := context.Background()
	set := processortest.NewNopSettings(f.Type())
	host := componenttest.NewNopHost()
	want := map[string]string{
		"k8s.pod.name":        "vllm-llama-7d9f8b6c5d-x2k4p",
		"k8s.namespace.name":  "inference",
		"k8s.deployment.name": "vllm-llama",
	}

	// spanFrom runs one request span, sent from ip, through the processor and
	// returns the resource it comes out with.
	spanFrom := func(t *testing.T, ip string) pcommon.Map {
		sink := new(consumertest.TracesSink)
		p, err := f.CreateTraces(ctx, set, cfg, sink)
		require.NoError(t, err)
		require.NoError(t, p.Start(ctx, host))
		defer func() { require.NoError(t, p.Shutdown(ctx)) }()
		td, _ := requestTrace(0, time.Now())
		// The otlp receiver puts the peer address in the context.
		cctx := client.NewContext(ctx, client.Info{Addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 41234}})
		require.NoError(t, p.ConsumeTraces(cctx, td))
		require.Len(t, sink.AllTraces(), 1)
		return sink.AllTraces()[0].ResourceSpans().At(0).Resource().Attributes()
	}

	t.Run("request span over OTLP, by the sender's pod IP", func(t *testing.T) {
		assertAttrs(t, spanFrom(t, podIP), want)
	})

	t.Run("per-process GPU memory, by container.id", func(t *testing.T) {
		sink := new(consumertest.MetricsSink)
		p, err := f.CreateMetrics(ctx, set, cfg, sink)
		require.NoError(t, err)
		require.NoError(t, p.Start(ctx, host))
		defer func() { require.NoError(t, p.Shutdown(ctx)) }()

		// As the nvml receiver writes it: device + process.pid + container.id
		// on the resource, no connection (NVML is polled).
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("hw.id", "GPU-8a1c2f3e-0000-0000-0000-000000000000")
		rm.Resource().Attributes().PutInt("process.pid", 4242)
		rm.Resource().Attributes().PutStr("container.id", containerID)
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName("nvidia.gpu.process.memory.usage")
		m.SetUnit("By")
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetIntValue(38 << 30)
		dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
		require.NoError(t, p.ConsumeMetrics(ctx, md))
		require.Len(t, sink.AllMetrics(), 1)
		res := sink.AllMetrics()[0].ResourceMetrics().At(0).Resource().Attributes()
		assertAttrs(t, res, want)
	})

	t.Run("a sender that is no pod on this node gets nothing", func(t *testing.T) {
		res := spanFrom(t, "10.9.9.9")
		for k := range want {
			_, ok := res.Get(k)
			assert.False(t, ok, "%s on a span from an unknown sender", k)
		}
	})
}

func assertAttrs(t *testing.T, attrs pcommon.Map, want map[string]string) {
	t.Helper()
	for k, v := range want {
		got, ok := attrs.Get(k)
		if assert.True(t, ok, "%s missing; resource: %v", k, attrs.AsRaw()) {
			assert.Equal(t, v, got.Str(), k)
		}
	}
}
