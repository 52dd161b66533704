package runner

import "golang.org/x/sys/unix"

// CloexecFrom marks every fd from first up close-on-exec, so that fds this
// process inherited by accident (from a shell, a job runner, a server's
// parent) never reach bwrap or the sandbox. Go's own fds already are.
func CloexecFrom(first int) {
	_ = unix.CloseRange(uint(first), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
}
