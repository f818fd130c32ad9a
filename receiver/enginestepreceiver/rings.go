// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package enginestepreceiver // import "github.com/inferprof/inferprof/receiver/enginestepreceiver"

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/inferprof/inferprof/internal/stepwire"
)

// maxRings bounds the rings the receiver maps at once; an announcement past
// it is refused (and counted), and that hook goes on with datagrams.
const maxRings = 256

// ring is one hook's shared-memory ring (see internal/stepwire/ring.go and
// integrations/python/inferprof_hook/ring.py).
type ring struct {
	mem   []byte // the mapping: header and records
	memfd int
	// pipe is the read end of a pipe whose write end only the hook holds:
	// it reports POLLHUP once the hook's process is gone.
	pipe int
	r    *stepwire.Ring
}

// rings are the rings attached to the receiver. They are owned by the read
// loop.
type rings struct {
	byID  map[uint64]*ring
	sleep uint64 // generation of the read loop's sleeps: odd while asleep
}

func newRings() *rings { return &rings{byID: map[uint64]*ring{}} }

var (
	errTooManyRings = errors.New("too many rings")
	errRingFDs      = errors.New("an announcement carries a memfd and a pipe")
)

// attach maps the ring a hook announced. It takes ownership of fds (closing
// them on every error) and returns whether the ring was new; an
// announcement of a ring already attached (the hook heard no beat for a
// second, as after a collector restart) is not an error.
func (rs *rings) attach(id uint64, fds []int) (bool, error) {
	closeAll := func() {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
	}
	if len(fds) != 2 {
		closeAll()
		return false, fmt.Errorf("%w, got %d descriptors", errRingFDs, len(fds))
	}
	if _, ok := rs.byID[id]; ok {
		closeAll()
		return false, nil
	}
	if len(rs.byID) >= maxRings {
		closeAll()
		return false, fmt.Errorf("%w (%d)", errTooManyRings, maxRings)
	}
	g, err := mapRing(fds[0], fds[1])
	if err != nil {
		closeAll()
		return false, err
	}
	if g.r.Header.ID != id {
		g.close()
		return false, fmt.Errorf("ring id %#x announced as %#x", g.r.Header.ID, id)
	}
	rs.byID[id] = g
	return true, nil
}

// mapRing checks that memfd is a sealed memory file of a ring's size and
// pipe is a pipe, and maps the ring. The seals matter: a file that could
// shrink would fault the collector when it reads a page past the new end.
func mapRing(memfd, pipe int) (*ring, error) {
	seals, err := unix.FcntlInt(uintptr(memfd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("ring is not a memfd: %w", err)
	}
	if want := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW; seals&want != want {
		return nil, fmt.Errorf("ring memfd not sealed against resizing (seals %#x)", seals)
	}
	var st unix.Stat_t
	if err := unix.Fstat(memfd, &st); err != nil {
		return nil, fmt.Errorf("stat ring: %w", err)
	}
	if st.Size < stepwire.RingHeaderBytes+stepwire.RingMinCapacity || st.Size > stepwire.RingHeaderBytes+stepwire.RingMaxCapacity {
		return nil, fmt.Errorf("%w: %d bytes", stepwire.ErrRingHeader, st.Size)
	}
	var pst unix.Stat_t
	if err := unix.Fstat(pipe, &pst); err != nil || pst.Mode&unix.S_IFMT != unix.S_IFIFO {
		return nil, errors.New("ring announcement: the second descriptor is not a pipe")
	}
	mem, err := unix.Mmap(memfd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map ring: %w", err)
	}
	r, err := stepwire.NewRing(mem)
	if r == nil {
		_ = unix.Munmap(mem)
		return nil, err
	}
	// A read index that could not be right was replaced; the ring is usable.
	return &ring{mem: mem, memfd: memfd, pipe: pipe, r: r}, nil
}

func (g *ring) close() {
	_ = unix.Munmap(g.mem)
	_ = unix.Close(g.memfd)
	_ = unix.Close(g.pipe)
}

// drain reads every ring, handing each record to handle. It reports
// whether there was any, and calls bad once per ring whose indexes were
// impossible (the reader skipped to the writer's position).
func (rs *rings) drain(buf []byte, handle func([]byte), bad func(error)) bool {
	got := false
	for _, g := range rs.byID {
		n, err := g.r.Read(buf, false, handle)
		if err != nil {
			bad(err)
		}
		if n > 0 {
			got = true
		}
		g.r.Beat()
	}
	return got
}

// reap reads what is left in the rings whose hook has exited and lets them
// go. It polls the rings' pipes without waiting.
func (rs *rings) reap(buf []byte, handle func([]byte), bad func(error)) (gone int) {
	if len(rs.byID) == 0 {
		return 0
	}
	fds := make([]unix.PollFd, 0, len(rs.byID))
	ids := make([]uint64, 0, len(rs.byID))
	for id, g := range rs.byID {
		fds = append(fds, unix.PollFd{Fd: int32(g.pipe), Events: unix.POLLIN})
		ids = append(ids, id)
	}
	if n, err := unix.Poll(fds, 0); err != nil || n == 0 {
		return 0
	}
	for i, fd := range fds {
		// POLLIN with nothing to read, or POLLHUP: every write end closed.
		if fd.Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL|unix.POLLIN) == 0 {
			continue
		}
		g := rs.byID[ids[i]]
		if _, err := g.r.Read(buf, true, handle); err != nil {
			bad(err)
		}
		g.close()
		delete(rs.byID, ids[i])
		gone++
	}
	return gone
}

// pollFDs are the rings' pipes, for the read loop's wait: a hook that exits
// wakes it.
func (rs *rings) pollFDs(dst []unix.PollFd) []unix.PollFd {
	for _, g := range rs.byID {
		dst = append(dst, unix.PollFd{Fd: int32(g.pipe), Events: unix.POLLIN})
	}
	return dst
}

// goToSleep marks every ring as read by a sleeping reader, so the hook's
// next record sends a wake datagram. It returns false (and marks them awake
// again) when a record came in meanwhile.
func (rs *rings) goToSleep() bool {
	if rs.sleep&1 == 0 {
		rs.sleep++
	}
	for _, g := range rs.byID {
		if !g.r.Sleep(rs.sleep) {
			rs.wake()
			return false
		}
	}
	return true
}

// wake marks every ring as read by an awake reader.
func (rs *rings) wake() {
	if rs.sleep&1 == 1 {
		rs.sleep++
	}
	for _, g := range rs.byID {
		g.r.Sleep(rs.sleep)
	}
}

// closeAll unmaps every ring. What is unread stays in the hook's memory: a
// restarted collector gets the ring announced again and reads on from the
// read index this one left.
func (rs *rings) closeAll() {
	for id, g := range rs.byID {
		g.close()
		delete(rs.byID, id)
	}
}

// control is a parsed control datagram.
type control struct {
	kind byte
	id   uint64
}

// parseControl reads a control datagram (stepwire.RingMagic, version 1);
// ok is false for anything else.
func parseControl(b []byte) (control, bool) {
	if len(b) != stepwire.ControlSize || [4]byte(b[0:4]) != stepwire.RingMagic || b[4] != stepwire.RingVersion {
		return control{}, false
	}
	return control{kind: b[5], id: binary.LittleEndian.Uint64(b[8:])}, true
}
