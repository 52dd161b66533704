package profiles

import "syscall"

// dieWithParent makes a child process get SIGKILL when the server dies.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
