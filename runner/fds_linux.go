package runner

import "golang.org/x/sys/unix"

// CloexecFrom marks every fd from first up close-on-exec, so that fds this
// process inherited by accident (from a shell, a job runner, a server's
// parent) never reach bwrap or the sandbox. Go's own fds already are.
func CloexecFrom(first int) {
	_ = unix.CloseRange(uint(first), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
}

// recvCloexec makes fds received over a unix socket close-on-exec.
const recvCloexec = unix.MSG_CMSG_CLOEXEC

// streamSocketpair is a connected pair of close-on-exec unix stream sockets.
func streamSocketpair() ([2]int, error) {
	return unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
}
