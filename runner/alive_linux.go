package runner

import "golang.org/x/sys/unix"

// processAlive tells whether the child pid has not exited, without reaping
// it (a killed child is a zombie until waited for, and a zombie still
// takes signal 0).
func processAlive(pid int) bool {
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil {
		return false
	}
	return info.Signo == 0 // no child state change: still running
}
