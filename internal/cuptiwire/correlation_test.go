// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptiwire

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// correlating is a collect that also takes the correlation frames.
type correlating struct {
	collect
	ppid     uint32
	instance string
	service  string
	devices  []Device
	launches []Launch
}

func (c *correlating) Identity(id Identity) error {
	c.ppid, c.instance, c.service = id.PPID, string(id.InstanceID), string(id.ServiceName)
	return nil
}

func (c *correlating) Device(d Device) error {
	c.devices = append(c.devices, d)
	return nil
}

func (c *correlating) Launches(ls []Launch) error {
	c.launches = append(c.launches, ls...)
	return nil
}

var testUUID = [16]byte{0x5a, 0x3f, 0x1c, 0x22, 0x9b, 0x10, 0x4e, 0x8d, 0xa1, 0x02, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}

func correlationStream() []byte {
	b := AppendHello(nil, 4242, 1_700_000_000_000_000_000, "gpu-node-1")
	b = AppendIdentity(b, 4000, "7d9f0c1e-instance", "vllm")
	b = AppendDevice(b, Device{Ordinal: 1, UUID: testUUID})
	b = AppendString(b, 1, "k")
	b = AppendLaunches(b, []Launch{
		{Kind: LaunchKindKernel, Domain: 2, Correlation: 41, ThreadID: 4243, Time: 1_700_000_000_000_000_100},
		{Kind: LaunchKindGraph, Domain: 1, Correlation: 42, ThreadID: 4243, Time: 1_700_000_000_000_000_200},
	})
	return AppendRecords2(b, []Record{kernel(1, 1000, 500)})
}

func TestCorrelationFramesRoundTrip(t *testing.T) {
	t.Parallel()
	var c correlating
	require.NoError(t, NewDecoder(bytes.NewReader(correlationStream()), &c).Run())
	assert.Equal(t, uint32(4000), c.ppid)
	assert.Equal(t, "7d9f0c1e-instance", c.instance)
	assert.Equal(t, "vllm", c.service)
	assert.Equal(t, []Device{{Ordinal: 1, UUID: testUUID}}, c.devices)
	assert.Equal(t, []Launch{
		{Kind: LaunchKindKernel, Domain: 2, Correlation: 41, ThreadID: 4243, Time: 1_700_000_000_000_000_100},
		{Kind: LaunchKindGraph, Domain: 1, Correlation: 42, ThreadID: 4243, Time: 1_700_000_000_000_000_200},
	}, c.launches)
	require.Len(t, c.recs, 1)
}

// A handler that does not take the new frames still reads the stream.
func TestCorrelationFramesSkippedByOlderHandlers(t *testing.T) {
	t.Parallel()
	var c collect
	d := NewDecoder(bytes.NewReader(correlationStream()), &c)
	require.NoError(t, d.Run())
	assert.Equal(t, uint64(6), d.Frames())
	assert.Len(t, c.recs, 1)
}

func TestUUIDString(t *testing.T) {
	t.Parallel()
	// nvidia-smi -L and NVML print "GPU-" and 8-4-4-4-12 hex digits.
	assert.Equal(t, "GPU-5a3f1c22-9b10-4e8d-a102-334455667788", UUIDString("GPU-", testUUID))
	assert.Equal(t, "MIG-00000000-0000-0000-0000-000000000000", UUIDString("MIG-", [16]byte{}))
}

// Newer libraries may append fields; the known ones still decode.
func TestLongerCorrelationFramesDecode(t *testing.T) {
	t.Parallel()
	b := AppendHello(nil, 1, 0, "h")
	id := AppendIdentity(nil, 7, "i", "s")
	b = AppendHeader(b, FrameTypeIdentity, len(id)-HeaderSize+8)
	b = append(append(b, id[HeaderSize:]...), make([]byte, 8)...)
	dv := AppendDevice(nil, Device{Ordinal: 3, Flags: DeviceFlagMIG, UUID: testUUID, MIGUUID: testUUID})
	b = AppendHeader(b, FrameTypeDevice, len(dv)-HeaderSize+8)
	b = append(append(b, dv[HeaderSize:]...), make([]byte, 8)...)
	const size = 32
	b = AppendHeader(b, FrameTypeLaunches, 4+size)
	b = binary.LittleEndian.AppendUint16(b, size)
	b = binary.LittleEndian.AppendUint16(b, 0)
	l := AppendLaunches(nil, []Launch{{Kind: LaunchKindKernel, Correlation: 9, ThreadID: 1, Time: 5}})
	b = append(append(b, l[HeaderSize+4:]...), make([]byte, size-LaunchSize)...)
	var c correlating
	require.NoError(t, NewDecoder(bytes.NewReader(b), &c).Run())
	assert.Equal(t, "i", c.instance)
	assert.Equal(t, "s", c.service)
	assert.Equal(t, []Device{{Ordinal: 3, Flags: DeviceFlagMIG, UUID: testUUID, MIGUUID: testUUID}}, c.devices)
	assert.Equal(t, []Launch{{Kind: LaunchKindKernel, Correlation: 9, ThreadID: 1, Time: 5}}, c.launches)
}

func TestBadCorrelationFrames(t *testing.T) {
	t.Parallel()
	hello := AppendHello(nil, 1, 0, "h")
	frame := func(t FrameType, p []byte) []byte {
		return append(AppendHeader(append([]byte(nil), hello...), t, len(p)), p...)
	}
	launches := func(size uint16, kind byte, n int) []byte {
		p := binary.LittleEndian.AppendUint16(nil, size)
		p = append(p, 0, 0)
		rec := make([]byte, n)
		if n > 0 {
			rec[0] = kind
		}
		return frame(FrameTypeLaunches, append(p, rec...))
	}
	tests := []struct {
		name  string
		input []byte
		want  error
	}{
		{"identity too short", frame(FrameTypeIdentity, make([]byte, 9)), ErrBadPayload},
		{"identity instance past the end", frame(FrameTypeIdentity, []byte{0, 0, 0, 0, 0, 0, 0, 0, 5, 'a'}), ErrBadPayload},
		{"identity service past the end", frame(FrameTypeIdentity, []byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 'a', 3, 'b'}), ErrBadPayload},
		{"device too short", frame(FrameTypeDevice, make([]byte, 39)), ErrBadPayload},
		{"launches without size", frame(FrameTypeLaunches, []byte{24}), ErrBadPayload},
		{"launch size under 24", launches(16, 1, 16), ErrBadPayload},
		{"launch size not whole words", launches(28, 1, 28), ErrBadPayload},
		{"launches not a multiple", launches(24, 1, 30), ErrBadPayload},
		{"unknown launch kind", launches(24, 9, 24), ErrUnknownRecord},
		{"identity before hello", AppendIdentity(nil, 1, "", ""), ErrHelloMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := NewDecoder(bytes.NewReader(tt.input), &correlating{}).Run()
			require.ErrorIs(t, err, tt.want)
		})
	}
}
