// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

// Package timeline keeps the recent request, phase, engine step and GPU kernel
// spans and the GPU counters the exporter sees, within a memory budget, and
// renders a time window of them as Chrome Trace Event JSON (Perfetto UI and
// chrome://tracing open it as it is).
package timeline // import "github.com/inferprof/inferprof/exporter/inferprofuiexporter/internal/timeline"

import (
	"math"
	"slices"
	"sync"
	"time"
	"unique"
	"unsafe"
)

// queue is a FIFO of records with their arrival number, so the store can
// evict the oldest record of any kind. Records live in fixed chunks of
// chunkLen, freed as soon as their last record is popped, so what the queue
// holds is its live records plus at most two partial chunks: a growing slice
// held up to twice its records in spare capacity, and again in a dead prefix
// (TestBudgetMatchesHeap measured 32 MB held for a 16 MiB budget with slices).
type queue[T record] struct {
	chunks []*chunk[T]
	head   int // next record to pop in chunks[0]
	tail   int // records in the last chunk
}

// chunkLen keeps a chunk small (a few KiB to tens of KiB), so a chunk is a
// small step of the budget.
const chunkLen = 64

type chunk[T record] struct {
	items [chunkLen]T
	seqs  [chunkLen]uint64
	sizes [chunkLen]int64 // each record's own heap beyond its slot
	// strs are the distinct shared strings the chunk's records name, so
	// the store counts each string once while a chunk holds it, with one
	// map update per chunk rather than per record.
	strs []string
}

// chunkBytes is the heap one chunk of T takes.
func chunkBytes[T record]() int64 { return allocSize(int64(unsafe.Sizeof(chunk[T]{}))) }

// push appends a record whose own heap (a string, a slice) is size bytes
// and returns the bytes it added: size, a chunk when it opened one, and the
// shared strings the store did not hold yet.
func (q *queue[T]) push(v T, seq uint64, size int64, s *Store) int64 {
	added := size
	if len(q.chunks) == 0 || q.tail == chunkLen {
		q.chunks = append(q.chunks, new(chunk[T]))
		q.tail = 0
		added += chunkBytes[T]()
	}
	c := q.chunks[len(q.chunks)-1]
	c.items[q.tail], c.seqs[q.tail], c.sizes[q.tail] = v, seq, size
	q.tail++
	for _, str := range v.shared() {
		if str == "" || slices.Contains(c.strs, str) {
			continue
		}
		before := cap(c.strs)
		c.strs = append(c.strs, str)
		added += stringsSize(cap(c.strs)) - stringsSize(before) + s.hold(str)
	}
	return added
}

func stringsSize(n int) int64 { return allocSize(int64(n) * int64(unsafe.Sizeof(""))) }

func (q *queue[T]) len() int {
	if len(q.chunks) == 0 {
		return 0
	}
	return (len(q.chunks)-1)*chunkLen + q.tail - q.head
}

func (q *queue[T]) headSeq() uint64 {
	if q.len() == 0 {
		return math.MaxUint64
	}
	return q.chunks[0].seqs[q.head]
}

// front is the oldest record; the queue must not be empty.
func (q *queue[T]) front() *T { return &q.chunks[0].items[q.head] }

// pop drops the oldest record and returns the bytes it freed: its own, and
// its chunk's and the chunk's shared strings when it was the chunk's last.
func (q *queue[T]) pop(s *Store) int64 {
	c := q.chunks[0]
	var zero T
	c.items[q.head] = zero // let go of its strings and slices
	freed := c.sizes[q.head]
	q.head++
	if q.head == chunkLen || (len(q.chunks) == 1 && q.head == q.tail) {
		for _, str := range c.strs {
			freed += s.release(str)
		}
		freed += stringsSize(cap(c.strs)) + chunkBytes[T]()
		q.chunks[0] = nil
		q.chunks = q.chunks[1:] // pointers only; append reallocates past them
		q.head = 0
		if len(q.chunks) == 0 {
			q.chunks, q.tail = nil, 0
		}
	}
	return freed
}

// all yields the records oldest first.
func (q *queue[T]) all(yield func(*T) bool) {
	for i, c := range q.chunks {
		lo, hi := 0, chunkLen
		if i == 0 {
			lo = q.head
		}
		if i == len(q.chunks)-1 {
			hi = q.tail
		}
		for j := lo; j < hi; j++ {
			if !yield(&c.items[j]) {
				return
			}
		}
	}
}

// sharedEntry bounds what one distinct shared string costs beyond its bytes:
// its entry in the store's count and in the unique package's table.
const sharedEntry = 96

// hold counts one more chunk holding a shared string and returns the bytes
// the string adds when no chunk held it.
func (s *Store) hold(str string) int64 {
	n := s.shared[str]
	s.shared[str] = n + 1
	if n == 0 {
		return allocSize(int64(len(str))) + sharedEntry
	}
	return 0
}

// release is hold's inverse: the last chunk holding a string frees it.
func (s *Store) release(str string) int64 {
	if n := s.shared[str]; n > 1 {
		s.shared[str] = n - 1
		return 0
	}
	delete(s.shared, str)
	return allocSize(int64(len(str))) + sharedEntry
}

// allocSize is an upper bound of the heap an allocation of n bytes takes:
// Go rounds small objects up to a size class (steps of 16 B up to 128 B,
// at most 12.5% above that) and large ones to 8 KiB pages.
func allocSize(n int64) int64 {
	switch {
	case n <= 0:
		return 0
	case n <= 128:
		return (n + 15) &^ 15
	case n <= 32<<10:
		return n + n/8
	default:
		return (n + 8191) &^ 8191
	}
}

// Stats counts what the store did with its input.
type Stats struct {
	Evicted int64 // records dropped to stay within the budget or max age
	Bad     int64 // spans with no usable time range, skipped
}

// Store holds recent timeline records within a memory budget. It is safe for
// concurrent use.
type Store struct {
	mu       sync.Mutex
	budget   int64
	maxAge   time.Duration
	now      func() time.Time
	used     int64
	seq      uint64
	requests queue[Request]
	phases   queue[Phase]
	steps    queue[Step]
	kernels  queue[Kernel]
	samples  queue[Sample]
	memLimit map[string]float64 // host/device -> memory limit, bytes
	shared   map[string]int32   // interned strings the records hold, by chunks holding them
	stats    Stats
}

// New returns a store that keeps records up to budget bytes (estimated) and
// for at most maxAge.
func New(budget int64, maxAge time.Duration, now func() time.Time) *Store {
	return &Store{budget: budget, maxAge: maxAge, now: now, memLimit: map[string]float64{}, shared: map[string]int32{}}
}

// What the store counts is what it holds: chunks of record slots (counted
// per chunk), the heap a record holds on its own (a request's id and its
// gaps), and each distinct interned string once (instances, models, kernel
// names, devices), with its table entries.

// intern shares repeated strings (instances, kernel names, devices) between
// records.
func intern(s string) string { return unique.Make(s).Value() }

// Used returns the estimated bytes held.
func (s *Store) Used() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// Stats returns the counts since the store was made.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Batch is what one batch of spans or metrics adds to the store, read out of
// the pdata first so that the store can be fed after the data has gone on
// (to a queue that owns it) and only if it was accepted.
type Batch struct {
	requests []Request
	phases   []Phase
	steps    []Step
	kernels  []Kernel
	samples  []Sample
	limits   map[string]float64
	// Bad counts spans skipped for a bad time range.
	Bad int
}

// Empty tells whether the batch adds nothing.
func (b *Batch) Empty() bool {
	return len(b.requests)+len(b.phases)+len(b.steps)+len(b.kernels)+len(b.samples)+len(b.limits) == 0
}

// Apply adds a batch and returns how many records it evicted to stay within
// the budget and max age.
func (s *Store) Apply(b *Batch) (evicted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range b.requests {
		s.seq++
		own := allocSize(int64(len(r.RequestID))) + allocSize(8*int64(cap(r.Gaps)))
		s.used += s.requests.push(r, s.seq, own, s)
	}
	for _, p := range b.phases {
		s.seq++
		s.used += s.phases.push(p, s.seq, 0, s)
	}
	for _, st := range b.steps {
		s.seq++
		s.used += s.steps.push(st, s.seq, 0, s)
	}
	for _, k := range b.kernels {
		s.seq++
		s.used += s.kernels.push(k, s.seq, 0, s)
	}
	for k, v := range b.limits {
		if _, ok := s.memLimit[k]; ok || len(s.memLimit) < 4096 {
			s.memLimit[k] = v
		}
	}
	for _, sm := range b.samples {
		s.seq++
		s.used += s.samples.push(sm, s.seq, 0, s)
	}
	s.stats.Bad += int64(b.Bad)
	return s.evictLocked()
}

// evictLocked drops the oldest records until the store fits its budget, and
// records older than maxAge.
func (s *Store) evictLocked() int {
	n := 0
	cutoff := s.now().Add(-s.maxAge).UnixNano()
	for {
		q, seq := s.oldestLocked()
		if q == nil {
			break
		}
		if s.used <= s.budget && !s.expiredLocked(seq, cutoff) {
			break
		}
		s.used -= q.pop(s)
		n++
	}
	s.stats.Evicted += int64(n)
	return n
}

// popper is what eviction needs from a queue of any record type.
type popper interface {
	headSeq() uint64
	pop(*Store) int64
	len() int
}

func (s *Store) oldestLocked() (popper, uint64) {
	var best popper
	seq := uint64(math.MaxUint64)
	for _, q := range []popper{&s.requests, &s.phases, &s.steps, &s.kernels, &s.samples} {
		if q.len() > 0 && q.headSeq() < seq {
			best, seq = q, q.headSeq()
		}
	}
	return best, seq
}

// expiredLocked tells whether the record with arrival number seq ended
// before cutoff.
func (s *Store) expiredLocked(seq uint64, cutoff int64) bool {
	if s.maxAge <= 0 {
		return false
	}
	switch {
	case s.requests.headSeq() == seq:
		return s.requests.front().End < cutoff
	case s.phases.headSeq() == seq:
		return s.phases.front().End < cutoff
	case s.steps.headSeq() == seq:
		return s.steps.front().End < cutoff
	case s.kernels.headSeq() == seq:
		return s.kernels.front().End < cutoff
	case s.samples.headSeq() == seq:
		return s.samples.front().TS < cutoff
	}
	return false
}
