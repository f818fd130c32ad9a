// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package cuptireceiver receives CUDA kernel activity from the inferprof CUPTI
// injection library over a Unix socket, or from PyTorch profiler traces, and
// emits per-kernel GPU time metrics.
//
//go:generate go tool mdatagen metadata.yaml
package cuptireceiver // import "github.com/inferprof/inferprof/receiver/cuptireceiver"
