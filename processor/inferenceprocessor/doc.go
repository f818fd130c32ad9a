// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package inferenceprocessor turns LLM engine request spans (vLLM, SGLang,
// TensorRT-LLM, TGI) into one canonical set of latency attributes.
//
//go:generate go tool mdatagen metadata.yaml
package inferenceprocessor // import "github.com/inferprof/inferprof/processor/inferenceprocessor"
