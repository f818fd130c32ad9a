// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package stepwire // import "github.com/inferprof/inferprof/internal/stepwire"

// maxInterned bounds a Decoder's id table; reaching it starts the table over.
const maxInterned = 1 << 16

// Decoder decodes datagrams like Decode but keeps the request ids it has
// seen, so the ids of running requests, which repeat every step, cost no
// allocation. A Decoder is not safe for concurrent use.
type Decoder struct {
	ids    map[string]string
	resets uint64
}

// NewDecoder returns a Decoder with an empty id table.
func NewDecoder() *Decoder { return &Decoder{ids: make(map[string]string)} }

// Resets returns how often the id table reached its limit and started over.
func (d *Decoder) Resets() uint64 { return d.resets }

func (d *Decoder) intern(b []byte) string {
	if v, ok := d.ids[string(b)]; ok {
		return v
	}
	if len(d.ids) >= maxInterned {
		// A cache: starting over costs allocations, never correctness.
		clear(d.ids)
		d.resets++
	}
	v := string(b)
	d.ids[v] = v
	return v
}
