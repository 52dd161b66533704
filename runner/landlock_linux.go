package runner

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// LandlockABI returns the kernel's Landlock ABI version, 0 if Landlock is
// unavailable (kernel older than 5.13, or not in the LSM list).
func LandlockABI() int {
	landlockOnce.Do(func() {
		v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
		if errno == 0 {
			landlockVersion = int(v)
		}
	})
	return landlockVersion
}

var (
	landlockOnce    sync.Once
	landlockVersion int
)

// landlockScope puts the calling thread (and so the command it execs) into
// a Landlock domain. The domain restricts no file access of its own: the
// mount namespace does that. What it adds is Landlock's scoping: a process
// in the domain cannot ptrace, or open /proc/<pid>/mem, environ or fd of, a
// process outside it, which is bwrap's PID 1; with ABI 6 or newer it also
// cannot signal it or reach abstract unix sockets bound outside the domain.
func landlockScope(abi int) error {
	attr := unix.LandlockRulesetAttr{}
	size := uintptr(8)
	if abi >= 6 {
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		size = 24
	} else {
		// Older ABIs need a handled right to form a domain; handle EXECUTE
		// and grant it beneath the sandbox root, which restricts nothing.
		attr.Handled_access_fs = unix.LANDLOCK_ACCESS_FS_EXECUTE
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return errno
	}
	defer unix.Close(int(fd))
	if abi < 6 {
		root, err := unix.Open("/", unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(root)
		rule := unix.LandlockPathBeneathAttr{Allowed_access: unix.LANDLOCK_ACCESS_FS_EXECUTE, Parent_fd: int32(root)}
		if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
			return errno
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return errno
	}
	return nil
}
