// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package enginestepreceiver // import "github.com/inferprof/inferprof/receiver/enginestepreceiver"

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/inferprof/inferprof/internal/unixsock"
)

const transport = "unixgram"

// listen binds a non-blocking Unix datagram socket in a private folder,
// owner-only. The socket is deliberately not an *os.File or net.Conn: those
// register it with Go's network poller, and a datagram arriving while the
// poller sleeps would then wake it from the sender's system call, on the
// engine's thread.
func listen(path string) (int, error) {
	if err := unixsock.Prepare(path, transport); err != nil {
		return -1, err
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open socket for %s: %w", path, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := unixsock.Restrict(path); err != nil {
		_ = unix.Close(fd)
		_ = os.Remove(path)
		return -1, err
	}
	return fd, nil
}

// recvmsg reads one datagram into buf and the descriptors sent with it
// into oob, without allocating (unix.Recvmsg allocates the sender's
// address). Received descriptors are close-on-exec.
func recvmsg(fd int, buf, oob []byte) (n, oobn int, err error) {
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	msg := unix.Msghdr{Iov: &iov, Control: &oob[0]}
	msg.SetIovlen(1)
	msg.SetControllen(len(oob))
	got, _, e := unix.Syscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg)), unix.MSG_CMSG_CLOEXEC)
	if e != 0 {
		return 0, 0, e
	}
	return int(got), int(msg.Controllen), nil
}

// rights returns the descriptors in control messages b.
func rights(b []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(b)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		if got, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
}
