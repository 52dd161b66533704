//go:build !linux

package runner

import "syscall"

// CloexecFrom marks fds from first up (to 1024) close-on-exec.
func CloexecFrom(first int) {
	for fd := first; fd < 1024; fd++ {
		syscall.CloseOnExec(fd)
	}
}
