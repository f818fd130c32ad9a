// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package enginestepreceiver receives engine step datagrams from the inferprof
// Python hook over a Unix datagram socket and emits one engine.step span per
// scheduler step.
//
//go:generate go tool mdatagen metadata.yaml
package enginestepreceiver // import "github.com/inferprof/inferprof/receiver/enginestepreceiver"
