// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package keyindex maps the attribute keys a component reads to small
// indexes with one table probe and one string comparison.
//
// pdata maps are slices, so reading a span's figures means walking every
// attribute and asking, per key, whether it is one of ours. A Go switch
// over thirty-odd keys compiles to a binary search of string comparisons
// (about 14 ns a key here); vLLM spans carry about 22 attributes, and both
// the inference processor and the inference_metrics connector walk them.
// The table here is a perfect hash over the known keys: a few of the key's
// bytes and its length pick a slot, and one comparison confirms it.
package keyindex // import "github.com/inferprof/inferprof/internal/keyindex"

const (
	bits = 8
	size = 1 << bits
)

type slot struct {
	key string
	idx int
}

// Table is immutable once built and safe for concurrent use.
type Table struct {
	seed  uint32
	mul   uint32 // seed*0x9e3779b1 | 1, once rather than per look-up
	slots [size]slot
	// fallback is used only when no seed separates the keys.
	fallback map[string]int
}

// New builds a table from each key to its index. Keys must be non-empty.
// Whether a seed separates the keys does not depend on the order they are
// tried in, so the table is the same at every start.
func New(index map[string]int) *Table {
	t := &Table{}
	for seed := uint32(1); seed < 1<<16; seed++ {
		t.seed, t.mul = seed, seed*0x9e3779b1|1
		t.slots = [size]slot{}
		ok := true
		for k, i := range index {
			if k == "" {
				panic("keyindex: empty key")
			}
			s := &t.slots[t.hash(k)]
			if s.key != "" {
				ok = false
				break
			}
			*s = slot{key: k, idx: i}
		}
		if ok {
			return t
		}
	}
	// Not reached for the key sets of this repository (TestTables); kept
	// so that a new key can never make a lookup wrong.
	t.slots = [size]slot{}
	t.fallback = make(map[string]int, len(index))
	for k, i := range index {
		t.fallback[k] = i
	}
	return t
}

// hash mixes the length and five bytes of k (the first, the first after
// the common "gen_ai." prefix, the middle, one near the end and the last),
// which tell apart keys that share long prefixes or suffixes.
func (t *Table) hash(k string) uint32 {
	n := len(k)
	h := uint32(n) | uint32(k[n-1])<<8 | uint32(k[n/2])<<16 | uint32(k[n-1-n/8])<<24
	h ^= (uint32(k[min(7, n-1)]) | uint32(k[0])<<8) * 0x9e37
	h *= t.mul
	return h >> (32 - bits)
}

// Index returns k's index, or -1 when k is not one of the table's keys.
func (t *Table) Index(k string) int {
	if len(k) == 0 {
		return -1
	}
	if t.fallback != nil {
		if i, ok := t.fallback[k]; ok {
			return i
		}
		return -1
	}
	s := &t.slots[t.hash(k)]
	if s.key == k {
		return s.idx
	}
	return -1
}

// Perfect reports whether the table needed no fallback map.
func (t *Table) Perfect() bool { return t.fallback == nil }
