// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"net"
	"net/url"
	"strings"
)

const (
	envTracesInsecure = "OTEL_EXPORTER_OTLP_TRACES_INSECURE"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envOTLPEndpoint   = "OTEL_EXPORTER_OTLP_ENDPOINT"
)

// endpointFlags are the engines' traces endpoint flags: vLLM and SGLang
// (--otlp-traces-endpoint), trtllm-serve (--otlp_traces_endpoint).
var endpointFlags = []string{"--otlp-traces-endpoint", "--otlp_traces_endpoint"}

// planTraces makes a loopback OTLP traces endpoint plaintext.
//
// The engines build their gRPC span exporter differently: vLLM's
// vllm/tracing/otel.py (@40eeb0c5) and SGLang's trace.py pass insecure=True,
// but vLLM's older vllm/tracing.py (@03b8a674) and TensorRT-LLM's
// tensorrt_llm/llmapi/tracing.py (@0fb7f758) pass only the endpoint. The
// Python gRPC exporter then uses TLS unless the endpoint starts with
// http:// or OTEL_EXPORTER_OTLP_TRACES_INSECURE is true
// (opentelemetry-python exporter.py @200c2745), and the collector's loopback
// receiver, which has no TLS, never sees a span. Setting the variable is
// harmless where insecure=True is passed already.
func planTraces(p *plan, args []string) {
	engine := engineName(args)
	if engine == "sglang" && !hasArg(args, "--enable-trace") {
		p.notes = append(p.notes, "no --enable-trace on the command line: sglang sends no request spans"+
			" (add --enable-trace --otlp-traces-endpoint http://127.0.0.1:4317)")
	}
	ep, from := tracesEndpoint(args, p.vars)
	if ep == "" && engine == "sglang" && hasArg(args, "--enable-trace") {
		// SGLang's --otlp-traces-endpoint defaults to localhost:4317.
		ep, from = "localhost:4317", "sglang's default"
	}
	if ep == "" {
		if engine == "vllm" {
			p.notes = append(p.notes, "no --otlp-traces-endpoint on the command line: vllm sends no request spans"+
				" (add --otlp-traces-endpoint http://127.0.0.1:4317)")
		}
		return
	}
	scheme, host := splitEndpoint(ep)
	if scheme == "https" {
		return // TLS asked for explicitly
	}
	if !isLoopback(host) {
		if scheme != "http" && p.vars[envTracesInsecure] == "" {
			p.notes = append(p.notes, "traces endpoint "+ep+" is not on loopback: the engine's gRPC exporter will use TLS;"+
				" if the collector there has no TLS, write the endpoint as http://"+hostPort(ep))
		}
		return
	}
	if v, ok := p.vars[envTracesInsecure]; ok && v != "" {
		if !strings.EqualFold(v, "true") {
			p.notes = append(p.notes, envTracesInsecure+"="+v+" is kept: the engine will try TLS to "+ep+
				", which the shipped collector configs do not offer")
		}
		return
	}
	p.set(envTracesInsecure, "true", "the traces endpoint "+ep+", from "+from+", is on loopback: plaintext gRPC,"+
		" as the collector's loopback receiver speaks; older vLLM and TensorRT-LLM would try TLS")
}

// tracesEndpoint finds the endpoint the engine will export to: its flag,
// else the standard variables. It says where it found it.
func tracesEndpoint(args []string, vars map[string]string) (endpoint, from string) {
	for i, a := range args {
		for _, f := range endpointFlags {
			if a == f && i+1 < len(args) {
				return args[i+1], f
			}
			if v, ok := strings.CutPrefix(a, f+"="); ok {
				return v, f
			}
		}
	}
	for _, k := range []string{envTracesEndpoint, envOTLPEndpoint} {
		if v := vars[k]; v != "" {
			return v, k
		}
	}
	return "", ""
}

func hasArg(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// splitEndpoint returns the scheme ("" when none) and host of an endpoint
// written as scheme://host:port[/path], host:port or [v6]:port.
func splitEndpoint(ep string) (scheme, host string) {
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil {
			return "", ""
		}
		return strings.ToLower(u.Scheme), u.Hostname()
	}
	h, _, err := net.SplitHostPort(ep)
	if err != nil {
		return "", strings.Trim(ep, "[]")
	}
	return "", h
}

func hostPort(ep string) string {
	if _, rest, ok := strings.Cut(ep, "://"); ok {
		return rest
	}
	return ep
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
