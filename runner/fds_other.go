//go:build !linux

package runner

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// CloexecFrom marks fds from first up (to 1024) close-on-exec.
func CloexecFrom(first int) {
	for fd := first; fd < 1024; fd++ {
		syscall.CloseOnExec(fd)
	}
}

// recvCloexec: no MSG_CMSG_CLOEXEC here; receiveRun marks the fds itself.
const recvCloexec = 0

// streamSocketpair is a connected pair of close-on-exec unix stream
// sockets (marked under ForkLock: no SOCK_CLOEXEC here).
func streamSocketpair() ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.CloseOnExec(fds[0])
		unix.CloseOnExec(fds[1])
	}
	return fds, err
}
