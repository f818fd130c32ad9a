// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate go tool mdatagen metadata.yaml

// Package nvmlreceiver scrapes NVIDIA GPU metrics and critical device events through NVML.
package nvmlreceiver // import "github.com/inferprof/inferprof/receiver/nvmlreceiver"
