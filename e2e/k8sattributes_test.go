// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	k8sattributesprocessor "github.com/open-telemetry/opentelemetry-collector-contrib/processor/k8sattributesprocessor"
	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/transformprocessor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
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

// agentConf is the shipped agent.yaml, resolved, with its k8s_attributes
// pointed at the fake API server through a kubeconfig.
func agentConf(t *testing.T, apiServer string) *confmap.Conf {
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
	require.NoError(t, conf.Merge(confmap.NewFromStringMap(map[string]any{"processors": map[string]any{"k8s_attributes": map[string]any{
		// Outside a pod: the kubeconfig instead of the service account, and
		// wait for the first list so the test is not racing the informer.
		"auth_type": "kubeConfig", "wait_for_metadata": true,
	}}})))
	return conf
}

// podChain is the agent's pod attribution, in its pipelines' order:
// transform/pod_name, k8s_attributes, transform/pod_name_unmatched.
type podChain struct {
	t    *testing.T
	conf *confmap.Conf
}

var podChainIDs = []struct {
	id string
	f  processor.Factory
}{
	{"transform/pod_name", transformprocessor.NewFactory()},
	{"k8s_attributes", k8sattributesprocessor.NewFactory()},
	{"transform/pod_name_unmatched", transformprocessor.NewFactory()},
}

func (c podChain) config(id string, f processor.Factory) component.Config {
	section, err := c.conf.Sub("processors::" + id)
	require.NoError(c.t, err)
	cfg := f.CreateDefaultConfig()
	require.NoError(c.t, section.Unmarshal(cfg))
	require.NoError(c.t, confmap.Validate(cfg))
	return cfg
}

func (c podChain) start(p component.Component) {
	require.NoError(c.t, p.Start(context.Background(), componenttest.NewNopHost()))
	c.t.Cleanup(func() { require.NoError(c.t, p.Shutdown(context.Background())) })
}

// build chains the three processors in front of sink; create makes one
// processor of the signal from its factory and config.
func build[C any](c podChain, sink C, create func(processor.Factory, component.Config, C) (C, component.Component, error)) C {
	next := sink
	for i := len(podChainIDs) - 1; i >= 0; i-- {
		p := podChainIDs[i]
		head, comp, err := create(p.f, c.config(p.id, p.f), next)
		require.NoError(c.t, err)
		c.start(comp)
		next = head
	}
	return next
}

func (c podChain) traces(sink consumer.Traces) consumer.Traces {
	return build(c, sink, func(f processor.Factory, cfg component.Config, next consumer.Traces) (consumer.Traces, component.Component, error) {
		p, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(f.Type()), cfg, next)
		return p, p, err
	})
}

func (c podChain) metrics(sink consumer.Metrics) consumer.Metrics {
	return build(c, sink, func(f processor.Factory, cfg component.Config, next consumer.Metrics) (consumer.Metrics, component.Component, error) {
		p, err := f.CreateMetrics(context.Background(), processortest.NewNopSettings(f.Type()), cfg, next)
		return p, p, err
	})
}

var wantPod = map[string]string{
	"k8s.pod.name":        "vllm-llama-7d9f8b6c5d-x2k4p",
	"k8s.namespace.name":  "inference",
	"k8s.deployment.name": "vllm-llama",
}

// spanFrom runs td, sent from ip, through the chain and returns the
// resource it comes out with.
func spanFrom(t *testing.T, conf *confmap.Conf, td ptrace.Traces, ip string) pcommon.Map {
	t.Helper()
	sink := new(consumertest.TracesSink)
	// The otlp receiver puts the peer address in the context; the Unix
	// socket receivers put none.
	ctx := context.Background()
	if ip != "" {
		ctx = client.NewContext(ctx, client.Info{Addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 41234}})
	}
	require.NoError(t, podChain{t, conf}.traces(sink).ConsumeTraces(ctx, td))
	require.Len(t, sink.AllTraces(), 1)
	return sink.AllTraces()[0].ResourceSpans().At(0).Resource().Attributes()
}

// metricFrom runs one gauge datapoint with the given resource through the chain.
func metricFrom(t *testing.T, conf *confmap.Conf, name string, res map[string]any) pcommon.Map {
	t.Helper()
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	require.NoError(t, rm.Resource().Attributes().FromRaw(res))
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(name)
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetIntValue(38 << 30)
	dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	sink := new(consumertest.MetricsSink)
	require.NoError(t, podChain{t, conf}.metrics(sink).ConsumeMetrics(context.Background(), md))
	require.Len(t, sink.AllMetrics(), 1)
	return sink.AllMetrics()[0].ResourceMetrics().At(0).Resource().Attributes()
}

// requestTrace is one vLLM llm_request span (vllm/tracing.py attribute
// names) in its own trace, numbered i: pdata for the in-process chain, no
// OTLP client.
func requestTrace(i int, now time.Time) (ptrace.Traces, pcommon.TraceID) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "vllm")
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	var tid pcommon.TraceID
	binary.BigEndian.PutUint64(tid[:8], 0x6661696c6f766572) // "failover"
	binary.BigEndian.PutUint64(tid[8:], uint64(i)+1)
	var sid pcommon.SpanID
	binary.BigEndian.PutUint64(sid[:], uint64(i)+1)
	s.SetTraceID(tid)
	s.SetSpanID(sid)
	s.SetName("llm_request")
	s.SetKind(ptrace.SpanKindServer)
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-time.Second)))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
	a := s.Attributes()
	a.PutStr("gen_ai.request.id", fmt.Sprintf("cmpl-failover-%d", i))
	a.PutStr("gen_ai.response.model", "meta-llama/Llama-3.1-8B-Instruct")
	a.PutInt("gen_ai.usage.prompt_tokens", 16)
	a.PutInt("gen_ai.usage.completion_tokens", 8)
	a.PutDouble("gen_ai.latency.time_in_queue", 0.01)
	a.PutDouble("gen_ai.latency.time_to_first_token", 0.1)
	a.PutDouble("gen_ai.latency.e2e", 1.0)
	a.PutDouble("gen_ai.latency.time_in_model_prefill", 0.05)
	a.PutDouble("gen_ai.latency.time_in_model_decode", 0.85)
	a.PutDouble("gen_ai.latency.time_in_model_inference", 0.9)
	return td, tid
}

// engineStepSpan is one engine.step span with the resource the engine_step
// receiver writes (receiver/enginestepreceiver/span.go): service.name,
// inferprof.engine.name, host.name from the hook's socket.gethostname()
// (inside a pod, the pod's name), service.instance.id.
func engineStepSpan(hostname string) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	a := rs.Resource().Attributes()
	a.PutStr("service.name", "vllm-llama")
	a.PutStr("inferprof.engine.name", "vllm")
	a.PutStr("host.name", hostname)
	a.PutStr("service.instance.id", hostname+"/1/0")
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetName("engine.step")
	s.SetTraceID(pcommon.TraceID{1})
	s.SetSpanID(pcommon.SpanID{1})
	return td
}

func TestK8sAttributesOnEverySeries(t *testing.T) {
	api := fakeAPIServer(t, enginePod())
	conf := agentConf(t, api.URL)
	pod := enginePod().Name

	t.Run("request span over OTLP, by the sender's pod IP", func(t *testing.T) {
		td, _ := requestTrace(0, time.Now())
		assertAttrs(t, spanFrom(t, conf, td, podIP), wantPod)
	})
	t.Run("per-process GPU memory, by container.id", func(t *testing.T) {
		// As the nvml receiver writes it: device + process.pid +
		// container.id on the resource, no connection (NVML is polled).
		assertAttrs(t, metricFrom(t, conf, "nvidia.gpu.process.memory.usage", map[string]any{
			"hw.id": "GPU-8a1c2f3e-0000-0000-0000-000000000000", "process.pid": int64(4242), "container.id": containerID,
		}), wantPod)
	})
	t.Run("CUDA kernel series, by the engine's host name", func(t *testing.T) {
		// As the cupti receiver writes it (internal/aggregate/emit.go):
		// the activity source, the engine's pid in its own namespace and
		// the host name its CUPTI library read with gethostname.
		assertAttrs(t, metricFrom(t, conf, "inferprof.gpu.kernel.duration", map[string]any{
			"inferprof.activity.source": "cupti", "process.pid": int64(1), "host.name": pod,
		}), wantPod)
	})
	t.Run("engine.step span, by the engine's host name", func(t *testing.T) {
		assertAttrs(t, spanFrom(t, conf, engineStepSpan(pod), ""), wantPod)
	})
	t.Run("a sender that is no pod on this node gets nothing", func(t *testing.T) {
		td, _ := requestTrace(1, time.Now())
		res := spanFrom(t, conf, td, "10.9.9.9")
		for k := range wantPod {
			_, ok := res.Get(k)
			assert.False(t, ok, "%s on a span from an unknown sender", k)
		}
	})
	t.Run("an engine on the host network names the node: no pod name is left", func(t *testing.T) {
		res := spanFrom(t, conf, engineStepSpan("gpu-node-a"), "")
		for k := range wantPod {
			_, ok := res.Get(k)
			assert.False(t, ok, "%s on a step span of an unknown pod", k)
		}
		v, _ := res.Get("host.name")
		assert.Equal(t, "gpu-node-a", v.Str())
	})
}

// hostNetworkPods is the engine on the host network (vLLM multi-node, for
// NCCL) and another host-network pod of the node, listed after it (the NVIDIA
// device plugin is one): both have the node's IP as theirs.
func hostNetworkPods() (engine, other corev1.Pod) {
	engine = enginePod()
	engine.Name, engine.UID = "vllm-hostnet-6c5d4b3a2f-q8r7s", "1a2b3c4d-0000-4000-8000-000000000001"
	engine.Labels["pod-template-hash"] = "6c5d4b3a2f"
	engine.OwnerReferences[0].Name = "vllm-llama-6c5d4b3a2f"
	engine.Spec.HostNetwork = true
	engine.Status.PodIP, engine.Status.PodIPs = nodeIP, []corev1.PodIP{{IP: nodeIP}}
	engine.Status.ContainerStatuses[0].ContainerID = "containerd://" + strings.Repeat("ab", 32)
	other = enginePod()
	other.Name, other.Namespace, other.UID = "nvidia-device-plugin-x7k2m", "kube-system", "1a2b3c4d-0000-4000-8000-000000000002"
	other.Labels = map[string]string{"app": "nvidia-device-plugin"}
	other.OwnerReferences = nil
	other.Spec.HostNetwork = true
	other.Status.PodIP, other.Status.PodIPs = nodeIP, []corev1.PodIP{{IP: nodeIP}}
	other.Status.ContainerStatuses[0].ContainerID = "containerd://" + strings.Repeat("cd", 32)
	return engine, other
}

const nodeIP = "10.0.0.5"

// TestK8sAttributesHostNetworkEngine: an engine on the host network that sets
// k8s.pod.name in OTEL_RESOURCE_ATTRIBUTES, as deploy's engine example does;
// its CUPTI library and step hook then report that name as the host's
// (native/cupti/identity.h engine_host, inferprof_hook/_state.py
// engine_host). Its IP is the node's, which the other host-network pod has
// too: only the name tells them apart.
func TestK8sAttributesHostNetworkEngine(t *testing.T) {
	engine, other := hostNetworkPods()
	conf := agentConf(t, fakeAPIServer(t, engine, other).URL)
	want := map[string]string{"k8s.pod.name": engine.Name, "k8s.namespace.name": "inference", "k8s.deployment.name": "vllm-llama"}

	t.Run("request span naming its pod, sent from the node's IP", func(t *testing.T) {
		td, _ := requestTrace(2, time.Now())
		res := td.ResourceSpans().At(0).Resource().Attributes()
		res.PutStr("k8s.pod.name", engine.Name)
		res.PutStr("k8s.pod.ip", nodeIP)
		assertAttrs(t, spanFrom(t, conf, td, nodeIP), want)
	})
	t.Run("CUDA kernel series", func(t *testing.T) {
		assertAttrs(t, metricFrom(t, conf, "inferprof.gpu.kernel.duration", map[string]any{
			"inferprof.activity.source": "cupti", "process.pid": int64(1), "host.name": engine.Name,
		}), want)
	})
	t.Run("engine.step span", func(t *testing.T) {
		assertAttrs(t, spanFrom(t, conf, engineStepSpan(engine.Name), ""), want)
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
