package runner

import "syscall"

// runnerSysProcAttr ties the runner to its parent: if the server dies, even
// by SIGKILL, the kernel kills the runner, and the runner's bwrap and PID 1
// follow (--die-with-parent). The runner gets its own process group so a
// terminal's ^C reaches the server only.
func runnerSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
