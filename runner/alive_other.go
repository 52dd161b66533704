//go:build !linux

package runner

import "syscall"

// processAlive tells whether the child pid has not exited (best effort:
// a zombie still takes signal 0).
func processAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }
