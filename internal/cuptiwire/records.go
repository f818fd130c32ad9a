// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package cuptiwire // import "github.com/inferprof/inferprof/internal/cuptiwire"

import "encoding/binary"

// RecordKind says what activity a record describes.
type RecordKind uint8

// Record kinds.
const (
	RecordKindKernel RecordKind = 1
	RecordKindMemcpy RecordKind = 2
	RecordKindMemset RecordKind = 3
	RecordKindSync   RecordKind = 4
	RecordKindGraph  RecordKind = 5
)

// DeviceUnknown is the device of a record whose device the library could not
// tell (a synchronization on a context it has not yet seen a kernel on).
const DeviceUnknown uint16 = 0xFFFF

// Record is one activity: a kernel, memcpy, memset, synchronization or graph
// launch. Times are Unix nanoseconds.
type Record struct {
	Kind        RecordKind
	Sub         uint8 // memcpy kind, memset memory kind or sync type, CUPTI's numbering
	Device      uint16
	Stream      uint32
	Start       uint64
	End         uint64
	Name        uint32 // string id of the kernel name; 0 for other kinds
	Correlation uint32
	Bytes       uint64
	GraphID     uint32
	GraphNode   uint64 // CUDA graph node id; 0 if none or from a version-1 record
}

// ParseRecord decodes one 48-byte record without checking it.
func ParseRecord(b []byte) Record {
	_ = b[RecordSize-1]
	return Record{
		Kind:        RecordKind(b[0]),
		Sub:         b[1],
		Device:      binary.LittleEndian.Uint16(b[2:]),
		Stream:      binary.LittleEndian.Uint32(b[4:]),
		Start:       binary.LittleEndian.Uint64(b[8:]),
		End:         binary.LittleEndian.Uint64(b[16:]),
		Name:        binary.LittleEndian.Uint32(b[24:]),
		Correlation: binary.LittleEndian.Uint32(b[28:]),
		Bytes:       binary.LittleEndian.Uint64(b[32:]),
		GraphID:     binary.LittleEndian.Uint32(b[40:]),
	}
}

// AppendRecords2 appends one sized records frame (type 5) holding recs.
func AppendRecords2(dst []byte, recs []Record) []byte {
	dst = AppendHeader(dst, FrameTypeRecords2, records2Pre+len(recs)*Record2Size)
	dst = binary.LittleEndian.AppendUint16(dst, Record2Size)
	dst = binary.LittleEndian.AppendUint16(dst, 0)
	for i := range recs {
		dst = AppendRecord(dst, &recs[i])
		dst = binary.LittleEndian.AppendUint64(dst, recs[i].GraphNode)
	}
	return dst
}

// AppendRecords appends one version-1 records frame holding recs.
func AppendRecords(dst []byte, recs []Record) []byte {
	dst = AppendHeader(dst, FrameTypeRecords, len(recs)*RecordSize)
	for i := range recs {
		dst = AppendRecord(dst, &recs[i])
	}
	return dst
}

// AppendRecord appends one 48-byte record (no frame header).
func AppendRecord(dst []byte, r *Record) []byte {
	dst = append(dst, byte(r.Kind), r.Sub)
	dst = binary.LittleEndian.AppendUint16(dst, r.Device)
	dst = binary.LittleEndian.AppendUint32(dst, r.Stream)
	dst = binary.LittleEndian.AppendUint64(dst, r.Start)
	dst = binary.LittleEndian.AppendUint64(dst, r.End)
	dst = binary.LittleEndian.AppendUint32(dst, r.Name)
	dst = binary.LittleEndian.AppendUint32(dst, r.Correlation)
	dst = binary.LittleEndian.AppendUint64(dst, r.Bytes)
	dst = binary.LittleEndian.AppendUint32(dst, r.GraphID)
	return binary.LittleEndian.AppendUint32(dst, 0)
}
