// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServedModel(t *testing.T) {
	for want, args := range map[string][]string{
		"meta-llama/Llama-3.1-8B-Instruct": {"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--port", "8000"},
		"llama":                            {"/opt/venv/bin/vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--served-model-name", "llama", "other"},
		"q":                                {"vllm", "serve", "m", "--served-model-name=q"},
		"Qwen/Qwen3-8B":                    {"python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen3-8B"},
		"sg":                               {"python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--served-model-name", "sg"},
		"/models/q":                        {"python3", "-m", "sglang.launch_server", "--model-path=/models/q"},
		"":                                 {"python3", "train.py", "serve", "x"},
	} {
		assert.Equal(t, want, servedModel(args), "%q", args)
	}
}

func TestWithModel(t *testing.T) {
	got, changed := withModel("", "a,b=c d")
	assert.True(t, changed)
	assert.Equal(t, "inferprof.model.name=a%2Cb%3Dc%20d", got)
	assert.Equal(t, "a,b=c d", resourceAttribute(got, attrModelName), "the SDKs' reader gets the name back")
	got, changed = withModel("inferprof.model.name=mine", "m")
	assert.False(t, changed, "the user's model is kept")
	assert.Equal(t, "inferprof.model.name=mine", got)
	_, changed = withModel("k=v", "")
	assert.False(t, changed)
}

func TestPlanSetsTheModel(t *testing.T) {
	exe, _, _ := layout(t)
	o, err := parseArgs([]string{"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"}, noEnv, &bytes.Buffer{})
	require.NoError(t, err)
	p, err := makePlan(o, []string{"OTEL_RESOURCE_ATTRIBUTES=k8s.pod.name=p"}, exe, lookOK)
	require.NoError(t, err)
	attrs := envMap(p.env)[envResourceAttrs]
	assert.Regexp(t, `^k8s\.pod\.name=p,`, attrs, "the user's attributes are kept")
	assert.Equal(t, "meta-llama/Llama-3.1-8B-Instruct", resourceAttribute(attrs, attrModelName))
	assert.NotEmpty(t, resourceAttribute(attrs, attrInstanceID))
}
