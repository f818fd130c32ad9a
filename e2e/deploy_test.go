// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// Every file under deploy/ is checked: it parses as YAML; each collector
// config it embeds is the shipped one (config/agent.yaml, config/gateway.yaml)
// and passes `otelcol-inferprof validate` with the environment its workload
// sets; and images, ports, sockets and volume names agree with the configs,
// the Dockerfile and each other.

type obj = map[string]any

func get(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(obj)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func getStr(v any, path ...string) string { s, _ := get(v, path...).(string); return s }

func getList(v any, path ...string) []any { l, _ := get(v, path...).([]any); return l }

// deployDocs parses every YAML file under deploy/, by path relative to it.
func deployDocs(t *testing.T) map[string][]obj {
	t.Helper()
	root := filepath.Join(e2etest.RepoRoot(), "deploy")
	out := map[string][]obj{}
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, path)
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var doc obj
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, "%s does not parse as YAML", rel)
			if doc != nil {
				out[rel] = append(out[rel], doc)
			}
		}
		require.NotEmpty(t, out[rel], "%s has no YAML document", rel)
		return nil
	}))
	for _, want := range []string{"helm/agent-values.yaml", "helm/gateway-values.yaml", "manifests/agent-daemonset.yaml",
		"manifests/gateway.yaml", "manifests/rbac.yaml", "manifests/engine-vllm-example.yaml"} {
		require.Contains(t, out, want)
	}
	return out
}

func byKind(docs []obj, kind, name string) obj {
	for _, d := range docs {
		if getStr(d, "kind") == kind && (name == "" || getStr(d, "metadata", "name") == name) {
			return d
		}
	}
	return nil
}

// envOf turns a container's env list into KEY=VALUE pairs the way the
// kubelet does: downward-API fields get stand-in values, $(VAR) expands
// from earlier entries.
func envOf(env []any, base map[string]string) map[string]string {
	vals := map[string]string{}
	for k, v := range base {
		vals[k] = v
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, e := range env {
		name := getStr(e, "name")
		v, has := get(e, "value").(string)
		switch {
		case has:
			vals[name] = ref.ReplaceAllStringFunc(v, func(m string) string {
				if x, ok := vals[ref.FindStringSubmatch(m)[1]]; ok {
					return x
				}
				return m
			})
		case getStr(e, "valueFrom", "fieldRef", "fieldPath") == "spec.nodeName":
			vals[name] = "gpu-node-a"
		case getStr(e, "valueFrom", "fieldRef", "fieldPath") != "":
			vals[name] = "10.1.2.3"
		case get(e, "valueFrom", "secretKeyRef") != nil:
			vals[name] = ""
		}
	}
	return vals
}

// validate runs `otelcol-inferprof validate` on text with env.
func validate(t *testing.T, what, text string, env map[string]string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	cmd := exec.Command(e2etest.Binary(t), "validate", "--config", path)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "%s does not validate:\n%s", what, out)
}

func yamlEqual(t *testing.T, what string, got any, wantFile string) {
	t.Helper()
	b, err := os.ReadFile(wantFile)
	require.NoError(t, err)
	var want any
	require.NoError(t, yaml.Unmarshal(b, &want))
	if !assert.ObjectsAreEqual(want, got) {
		t.Errorf("%s is not the same config as %s: run make deploy-configs", what, wantFile)
	}
}

func distVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e2etest.RepoRoot(), "builder-config.yaml"))
	require.NoError(t, err)
	var bc obj
	require.NoError(t, yaml.Unmarshal(b, &bc))
	v := getStr(bc, "dist", "version")
	require.NotEmpty(t, v)
	return v
}

func portOf(endpoint string) string {
	i := strings.LastIndex(endpoint, ":")
	if i < 0 {
		return ""
	}
	return endpoint[i+1:]
}

func containerPorts(c any) map[string]int {
	out := map[string]int{}
	for _, p := range getList(c, "ports") {
		n, _ := get(p, "containerPort").(int)
		out[getStr(p, "name")] = n
	}
	return out
}

// checkPod checks one pod spec: volume mounts name volumes, endpoints and
// container ports agree, probes hit the health endpoint.
func checkPod(t *testing.T, what string, spec any, image string) (containers []any) {
	t.Helper()
	vols := map[string]any{}
	for _, v := range getList(spec, "volumes") {
		vols[getStr(v, "name")] = v
	}
	for _, c := range append(getList(spec, "initContainers"), getList(spec, "containers")...) {
		for _, m := range getList(c, "volumeMounts") {
			assert.Contains(t, vols, getStr(m, "name"), "%s: container %s mounts an undeclared volume", what, getStr(c, "name"))
		}
		if img := getStr(c, "image"); strings.Contains(img, "otelcol-inferprof") {
			assert.Equal(t, image, img, "%s: container %s", what, getStr(c, "name"))
		}
	}
	return getList(spec, "containers")
}

func checkCollectorContainer(t *testing.T, what string, c any, env map[string]string) {
	t.Helper()
	ports := containerPorts(c)
	for name, key := range map[string]string{"otlp": "INFERPROF_OTLP_GRPC_ENDPOINT", "otlp-http": "INFERPROF_OTLP_HTTP_ENDPOINT", "prometheus": "INFERPROF_PROMETHEUS_ENDPOINT"} {
		if p, ok := ports[name]; ok {
			assert.Equal(t, fmt.Sprint(p), portOf(env[key]), "%s: port %s and %s", what, name, key)
		}
	}
	for _, probe := range []string{"livenessProbe", "readinessProbe"} {
		if p := get(c, probe, "httpGet", "port"); p != nil {
			assert.Equal(t, fmt.Sprint(p), portOf(env["INFERPROF_HEALTH_ENDPOINT"]), "%s: %s port and INFERPROF_HEALTH_ENDPOINT", what, probe)
		}
	}
	for _, key := range []string{"INFERPROF_OTLP_GRPC_ENDPOINT", "INFERPROF_HEALTH_ENDPOINT"} {
		assert.True(t, strings.HasPrefix(env[key], "10.1.2.3:"), "%s: %s must listen on the pod's address, got %q", what, key, env[key])
	}
}

// checkTargetsFolder: an agent whose collector reads engine targets from a
// folder makes it in an init container, owner-only, so the file discovery
// has a folder to watch before any engine's inferprof-run writes one; else
// it logs a failed watch every refresh (5 s).
func checkTargetsFolder(t *testing.T, what string, initContainers []any, env map[string]string) {
	t.Helper()
	dir := env["INFERPROF_ENGINE_TARGETS_DIR"]
	if dir == "" {
		return
	}
	var cmds []string
	for _, ic := range initContainers {
		for _, a := range getList(ic, "command") {
			cmds = append(cmds, fmt.Sprint(a))
		}
	}
	cmd := strings.Join(cmds, " ")
	assert.Contains(t, cmd, "mkdir -p "+dir, "%s: no init container makes INFERPROF_ENGINE_TARGETS_DIR", what)
	assert.Regexp(t, `chmod 0700 [^&]*`+regexp.QuoteMeta(dir), cmd, "%s: INFERPROF_ENGINE_TARGETS_DIR owner-only", what)
	assert.Regexp(t, `chown 10001:10001 [^&]*`+regexp.QuoteMeta(dir), cmd, "%s: INFERPROF_ENGINE_TARGETS_DIR the collector's", what)
}

func TestDeployFiles(t *testing.T) {
	docs := deployDocs(t)
	root := e2etest.RepoRoot()
	cfgAgent, cfgGateway := filepath.Join(root, "config", "agent.yaml"), filepath.Join(root, "config", "gateway.yaml")
	image := "ghcr.io/inferprof/otelcol-inferprof:" + distVersion(t)

	// The Dockerfile puts the binary where the chart's command and the
	// manifests' command expect it, and runs as the user the manifests name.
	dockerfile, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	require.NoError(t, err)
	assert.Contains(t, string(dockerfile), "/otelcol-inferprof")
	assert.Regexp(t, `(?m)^USER 10001`, string(dockerfile))

	manifests := map[string]map[string]string{} // workload → its collector env
	for _, m := range []struct{ file, workload, kind, cm, key, cfg string }{
		{"manifests/agent-daemonset.yaml", "inferprof-agent", "DaemonSet", "inferprof-agent", "agent.yaml", cfgAgent},
		{"manifests/gateway.yaml", "inferprof-gateway", "Deployment", "inferprof-gateway", "gateway.yaml", cfgGateway},
	} {
		t.Run(m.file, func(t *testing.T) {
			cm := byKind(docs[m.file], "ConfigMap", m.cm)
			require.NotNil(t, cm)
			text := getStr(cm, "data", m.key)
			want, err := os.ReadFile(m.cfg)
			require.NoError(t, err)
			if text != string(want) {
				t.Errorf("the ConfigMap's %s is not a copy of %s: run make deploy-configs", m.key, m.cfg)
			}

			w := byKind(docs[m.file], m.kind, m.workload)
			require.NotNil(t, w)
			spec := get(w, "spec", "template", "spec")
			cs := checkPod(t, m.file, spec, image)
			require.Len(t, cs, 1)
			c := cs[0]
			assert.Equal(t, []any{"/otelcol-inferprof", "--config", "/etc/inferprof/" + m.key}, getList(c, "command"))
			env := envOf(getList(c, "env"), nil)
			manifests[m.workload] = env
			checkCollectorContainer(t, m.file, c, env)
			checkTargetsFolder(t, m.file, getList(spec, "initContainers"), env)
			// The ConfigMap is the one mounted at /etc/inferprof.
			var cmVol string
			for _, v := range getList(spec, "volumes") {
				if getStr(v, "configMap", "name") == m.cm {
					cmVol = getStr(v, "name")
				}
			}
			require.NotEmpty(t, cmVol)
			mounted := false
			for _, vm := range getList(c, "volumeMounts") {
				mounted = mounted || (getStr(vm, "name") == cmVol && getStr(vm, "mountPath") == "/etc/inferprof")
			}
			assert.True(t, mounted, "%s: the config is not mounted at /etc/inferprof", m.file)
			validate(t, m.file, text, env)
		})
	}

	// The config's default (true) is right off Kubernetes only; in a
	// cluster the agent must ask the API server, or no pod metadata.
	t.Run("agent asks the API server", func(t *testing.T) {
		assert.Equal(t, "false", manifests["inferprof-agent"]["INFERPROF_K8S_PASSTHROUGH"])
	})

	t.Run("agent and gateway agree", func(t *testing.T) {
		agent, gw := manifests["inferprof-agent"], manifests["inferprof-gateway"]
		svcs := docs["manifests/gateway.yaml"]
		headless := byKind(svcs, "Service", "inferprof-gateway-headless")
		cluster := byKind(svcs, "Service", "inferprof-gateway")
		require.NotNil(t, headless)
		require.NotNil(t, cluster)
		assert.Equal(t, "None", getStr(headless, "spec", "clusterIP"))
		ns := getStr(headless, "metadata", "namespace")
		assert.True(t, strings.HasPrefix(agent["INFERPROF_GATEWAY_HOSTNAME"], "inferprof-gateway-headless."+ns+"."),
			"the agent resolves the headless Service: %q", agent["INFERPROF_GATEWAY_HOSTNAME"])
		assert.True(t, strings.HasPrefix(agent["INFERPROF_GATEWAY_ENDPOINT"], "inferprof-gateway."+ns+"."))
		gwPort := portOf(gw["INFERPROF_OTLP_GRPC_ENDPOINT"])
		assert.Equal(t, gwPort, agent["INFERPROF_GATEWAY_PORT"])
		assert.Equal(t, gwPort, portOf(agent["INFERPROF_GATEWAY_ENDPOINT"]))
		for _, svc := range []obj{headless, cluster} {
			found := false
			for _, p := range getList(svc, "spec", "ports") {
				found = found || fmt.Sprint(get(p, "port")) == gwPort
			}
			assert.True(t, found, "Service %s exposes the gateways' OTLP port %s", getStr(svc, "metadata", "name"), gwPort)
		}
		ds := byKind(docs["manifests/agent-daemonset.yaml"], "DaemonSet", "")
		assert.Equal(t, true, get(ds, "spec", "template", "spec", "hostPID"), "NVML per-process metrics need hostPID")
		assert.Equal(t, "inferprof-agent", getStr(ds, "spec", "template", "spec", "serviceAccountName"))
		rbac := docs["manifests/rbac.yaml"]
		assert.NotNil(t, byKind(rbac, "ServiceAccount", "inferprof-agent"))
		assert.NotNil(t, byKind(rbac, "ClusterRoleBinding", "inferprof-agent"))
	})

	t.Run("engine example shares the agent's sockets", func(t *testing.T) {
		d := byKind(docs["manifests/engine-vllm-example.yaml"], "Deployment", "")
		require.NotNil(t, d)
		spec := get(d, "spec", "template", "spec")
		cs := checkPod(t, "engine example", spec, image)
		require.Len(t, cs, 1)
		engine := cs[0]
		env := envOf(getList(engine, "env"), nil)
		agent := manifests["inferprof-agent"]
		for _, k := range []string{"INFERPROF_STEP_ENDPOINT", "INFERPROF_CUPTI_ENDPOINT"} {
			assert.Equal(t, agent[k], env[k], k)
		}
		assert.Equal(t, "/opt/inferprof/bin/inferprof-run", getList(engine, "command")[0])
		// To its node's agent: the node's address (hostPort) and the agent's port.
		assert.Contains(t, getList(engine, "command"), "http://$(HOST_IP):"+portOf(agent["INFERPROF_OTLP_GRPC_ENDPOINT"]))
		for _, e := range getList(engine, "env") {
			if getStr(e, "name") == "HOST_IP" {
				assert.Equal(t, "status.hostIP", getStr(e, "valueFrom", "fieldRef", "fieldPath"))
			}
		}
		ds0 := getList(byKind(docs["manifests/agent-daemonset.yaml"], "DaemonSet", ""), "spec", "template", "spec", "containers")[0]
		for _, p := range getList(ds0, "ports") {
			if getStr(p, "name") == "otlp" {
				assert.Equal(t, get(p, "containerPort"), get(p, "hostPort"), "the agent's OTLP port is open on the node")
			}
		}
		// Both pods mount the same host folder where the sockets live.
		hostPath := func(spec any, c any, sock string) string {
			for _, vm := range getList(c, "volumeMounts") {
				mp := getStr(vm, "mountPath")
				if !strings.HasPrefix(sock, mp+"/") {
					continue
				}
				for _, v := range getList(spec, "volumes") {
					if getStr(v, "name") == getStr(vm, "name") {
						return getStr(v, "hostPath", "path") + strings.TrimPrefix(sock, mp)
					}
				}
			}
			return ""
		}
		ds := byKind(docs["manifests/agent-daemonset.yaml"], "DaemonSet", "")
		dsSpec := get(ds, "spec", "template", "spec")
		sock := agent["INFERPROF_STEP_ENDPOINT"]
		onHost := hostPath(dsSpec, getList(dsSpec, "containers")[0], sock)
		assert.NotEmpty(t, onHost, "the agent's step socket is on a hostPath volume")
		assert.Equal(t, onHost, hostPath(spec, engine, env["INFERPROF_STEP_ENDPOINT"]))
		assert.Equal(t, int(10001), get(spec, "securityContext", "runAsUser"), "the engine runs as the agent's user")
	})

	for _, h := range []struct{ file, cfg, mode string }{
		{"helm/agent-values.yaml", cfgAgent, "daemonset"},
		{"helm/gateway-values.yaml", cfgGateway, "deployment"},
	} {
		t.Run(h.file, func(t *testing.T) {
			v := docs[h.file][0]
			assert.Equal(t, h.mode, getStr(v, "mode"))
			assert.Equal(t, image, getStr(v, "image", "repository")+":"+getStr(v, "image", "tag"))
			assert.Equal(t, "otelcol-inferprof", getStr(v, "command", "name"))
			cfg := get(v, "alternateConfig")
			yamlEqual(t, h.file+" alternateConfig", cfg, h.cfg)
			// The chart defines MY_POD_IP before extraEnvs.
			env := envOf(getList(v, "extraEnvs"), map[string]string{"MY_POD_IP": "10.1.2.3"})
			text, err := yaml.Marshal(cfg)
			require.NoError(t, err)
			validate(t, h.file, string(text), env)
			checkTargetsFolder(t, h.file, getList(v, "initContainers"), env)
			// Same environment as the plain manifest's.
			name := getStr(v, "fullnameOverride")
			for k, want := range manifests[name] {
				if strings.HasPrefix(k, "INFERPROF_") {
					assert.Equal(t, want, env[k], "%s: %s differs from the plain manifest", h.file, k)
				}
			}
			// Container ports the chart opens match the endpoints.
			for name, key := range map[string]string{"otlp": "INFERPROF_OTLP_GRPC_ENDPOINT", "otlp-http": "INFERPROF_OTLP_HTTP_ENDPOINT", "prometheus": "INFERPROF_PROMETHEUS_ENDPOINT"} {
				if get(v, "ports", name, "enabled") == true {
					assert.Equal(t, fmt.Sprint(get(v, "ports", name, "containerPort")), portOf(env[key]), "%s: port %s", h.file, name)
				}
			}
			vols := map[string]bool{}
			for _, vol := range getList(v, "extraVolumes") {
				vols[getStr(vol, "name")] = true
			}
			mounts := getList(v, "extraVolumeMounts")
			for _, ic := range getList(v, "initContainers") {
				mounts = append(mounts, getList(ic, "volumeMounts")...)
				assert.Equal(t, image, getStr(ic, "image"))
			}
			for _, m := range mounts {
				assert.True(t, vols[getStr(m, "name")], "%s: mount of undeclared volume %s", h.file, getStr(m, "name"))
			}
		})
	}
}
