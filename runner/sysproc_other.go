//go:build !linux

package runner

import "syscall"

// runnerSysProcAttr: without Pdeathsig, the runner notices its parent's
// death as EOF on the control fd and kills its sandbox.
func runnerSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
