// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptiwire // import "github.com/inferprof/inferprof/internal/cuptiwire"

import (
	"encoding/binary"
	"fmt"
)

// Sizes of the correlation frames.
const (
	identityFixedLen = 4 + 4 + 1 // ppid, flags, instance id length
	deviceLen        = 40
	LaunchSize       = 24 // the launch records this package writes
	minLaunchSize    = 24
	maxIdentityLen   = 1024 // the fields above at their longest, plus room for later ones
)

// DeviceFlagMIG says the device is a MIG compute instance and MIGUUID holds
// its MIG UUID.
const DeviceFlagMIG uint16 = 1 << 0

// LaunchKind says what a launch started.
type LaunchKind uint8

// Launch kinds.
const (
	LaunchKindKernel LaunchKind = 1 // cuLaunchKernel, cudaLaunchKernel and their variants
	LaunchKindGraph  LaunchKind = 2 // cuGraphLaunch, cudaGraphLaunch: every kernel of the graph shares its correlation id
	// LaunchKindMark is not a launch: every launch the library saw before
	// Time has been sent. The library sends one each time it drains its
	// launch queue, so the collector knows when a step's launches are all in.
	LaunchKindMark LaunchKind = 3
)

// Identity names the engine process a connection comes from. InstanceID and
// ServiceName are the service.instance.id and service.name the process found
// in OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME (empty when unset), the
// same variables the engine's step hook and its OpenTelemetry SDK read.
type Identity struct {
	PPID        uint32
	Flags       uint32
	InstanceID  []byte // valid only during the call
	ServiceName []byte // valid only during the call
}

// ParseIdentity decodes an identity payload.
func ParseIdentity(p []byte) (Identity, error) {
	if len(p) < identityFixedLen+1 || len(p) > maxIdentityLen {
		return Identity{}, fmt.Errorf("identity of %d bytes: %w", len(p), ErrBadPayload)
	}
	id := Identity{PPID: binary.LittleEndian.Uint32(p), Flags: binary.LittleEndian.Uint32(p[4:])}
	n := int(p[8])
	if len(p) < identityFixedLen+n+1 {
		return Identity{}, fmt.Errorf("identity instance id of %d bytes in %d: %w", n, len(p), ErrBadPayload)
	}
	id.InstanceID = p[identityFixedLen : identityFixedLen+n]
	q := p[identityFixedLen+n:]
	m := int(q[0])
	if len(q) < 1+m {
		return Identity{}, fmt.Errorf("identity service name of %d bytes in %d: %w", m, len(q), ErrBadPayload)
	}
	id.ServiceName = q[1 : 1+m]
	return id, nil
}

// Device maps a CUDA device ordinal, as the engine process numbers its
// devices (after CUDA_VISIBLE_DEVICES), to the GPU's UUID.
type Device struct {
	Ordinal uint16
	Flags   uint16
	UUID    [16]byte // the physical GPU (cuDeviceGetUuid, CUpti_ActivityDevice*.uuid)
	MIGUUID [16]byte // the MIG compute instance, with DeviceFlagMIG
}

// ParseDevice decodes a device payload.
func ParseDevice(p []byte) (Device, error) {
	if len(p) < deviceLen || len(p) > maxStatsLen {
		return Device{}, fmt.Errorf("device of %d bytes: %w", len(p), ErrBadPayload)
	}
	d := Device{Ordinal: binary.LittleEndian.Uint16(p), Flags: binary.LittleEndian.Uint16(p[2:])}
	copy(d.UUID[:], p[8:24])
	copy(d.MIGUUID[:], p[24:40])
	return d, nil
}

// UUIDString formats a 16-byte CUDA UUID the way nvidia-smi and NVML do:
// prefix ("GPU-" or "MIG-") and five dash-separated groups of hex digits.
func UUIDString(prefix string, u [16]byte) string {
	const hex = "0123456789abcdef"
	b := make([]byte, 0, len(prefix)+36)
	b = append(b, prefix...)
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hex[c>>4], hex[c&15])
	}
	return string(b)
}

// Launch is one kernel or graph launch as the library's API-entry callback
// saw it. Time is CLOCK_REALTIME in Unix ns, the clock the step hook stamps
// steps with, so launches and steps need no clock conversion.
type Launch struct {
	Kind        LaunchKind
	Domain      uint8 // 1 driver API, 2 runtime API
	Correlation uint32
	ThreadID    uint32 // Linux thread id (gettid)
	Time        uint64
}

// ParseLaunch decodes one launch record without checking it.
func ParseLaunch(b []byte) Launch {
	_ = b[minLaunchSize-1]
	return Launch{
		Kind:        LaunchKind(b[0]),
		Domain:      b[1],
		Correlation: binary.LittleEndian.Uint32(b[4:]),
		ThreadID:    binary.LittleEndian.Uint32(b[8:]),
		Time:        binary.LittleEndian.Uint64(b[16:]),
	}
}

// CorrelationHandler is what a Handler implements to receive the frames of
// issue 13. A Handler without it has those frames checked and skipped.
type CorrelationHandler interface {
	Identity(id Identity) error
	Device(d Device) error
	Launches(ls []Launch) error
}

// AppendIdentity appends a whole identity frame; strings past 255 bytes are cut.
func AppendIdentity(dst []byte, ppid uint32, instanceID, serviceName string) []byte {
	instanceID = instanceID[:min(len(instanceID), MaxHostLen)]
	serviceName = serviceName[:min(len(serviceName), MaxHostLen)]
	dst = AppendHeader(dst, FrameTypeIdentity, identityFixedLen+len(instanceID)+1+len(serviceName))
	dst = binary.LittleEndian.AppendUint32(dst, ppid)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = append(dst, byte(len(instanceID)))
	dst = append(dst, instanceID...)
	dst = append(dst, byte(len(serviceName)))
	return append(dst, serviceName...)
}

// AppendDevice appends a whole device frame.
func AppendDevice(dst []byte, dv Device) []byte {
	dst = AppendHeader(dst, FrameTypeDevice, deviceLen)
	dst = binary.LittleEndian.AppendUint16(dst, dv.Ordinal)
	dst = binary.LittleEndian.AppendUint16(dst, dv.Flags)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = append(dst, dv.UUID[:]...)
	return append(dst, dv.MIGUUID[:]...)
}

// AppendLaunches appends one launches frame holding ls.
func AppendLaunches(dst []byte, ls []Launch) []byte {
	dst = AppendHeader(dst, FrameTypeLaunches, records2Pre+len(ls)*LaunchSize)
	dst = binary.LittleEndian.AppendUint16(dst, LaunchSize)
	dst = binary.LittleEndian.AppendUint16(dst, 0)
	for _, l := range ls {
		dst = append(dst, byte(l.Kind), l.Domain, 0, 0)
		dst = binary.LittleEndian.AppendUint32(dst, l.Correlation)
		dst = binary.LittleEndian.AppendUint32(dst, l.ThreadID)
		dst = binary.LittleEndian.AppendUint32(dst, 0)
		dst = binary.LittleEndian.AppendUint64(dst, l.Time)
	}
	return dst
}
