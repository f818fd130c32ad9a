// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package k8scheckextension // import "github.com/inferprof/inferprof/extension/k8scheckextension"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"
)

// errNoAPIServer is returned by Start when k8s_attributes is set to ask an
// API server and none is configured. k8s_attributes would fail at its own
// Start with a stack trace; this says why and what to change, first.
var errNoAPIServer = errors.New("k8s_check: passthrough is false, so k8s_attributes needs the Kubernetes API server, " +
	"but KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are not set (not in a pod); " +
	"off Kubernetes set passthrough: true here and on k8s_attributes (INFERPROF_K8S_PASSTHROUGH=true in inferprof's agent config)")

// check logs what the agent's Kubernetes metadata can and cannot be, once.
type check struct {
	cfg    *Config
	logger *zap.Logger
	getenv func(string) string
}

// inCluster is client-go's own test for in-cluster configuration
// (rest.InClusterConfig reads these two variables).
func (c *check) inCluster() bool {
	return c.getenv("KUBERNETES_SERVICE_HOST") != "" && c.getenv("KUBERNETES_SERVICE_PORT") != ""
}

func (c *check) Start(context.Context, component.Host) error {
	switch {
	case !c.cfg.Passthrough && !c.inCluster():
		return errNoAPIServer
	case !c.cfg.Passthrough:
		return nil // k8s_attributes asks the API server: nothing is missing
	case c.inCluster():
		c.logger.Warn("k8s_attributes runs in passthrough mode although a Kubernetes API server is configured: "+
			"spans and metrics get the sender's address (k8s.pod.ip) but no k8s.namespace.name, k8s.deployment.name or k8s.pod.uid; "+
			"set passthrough: false here and on k8s_attributes (INFERPROF_K8S_PASSTHROUGH=false) and grant it RBAC (deploy/helm)",
			zap.String("node", c.cfg.NodeName))
	default:
		c.logger.Info("No Kubernetes API server (not in a pod): k8s_attributes runs in passthrough mode, "+
			"so spans and metrics get no k8s.namespace.name, k8s.deployment.name or k8s.pod.uid, "+
			"and k8s.pod.name only where the engine sets it; everything else works",
			zap.String("node", c.cfg.NodeName))
	}
	return nil
}

func (*check) Shutdown(context.Context) error { return nil }
