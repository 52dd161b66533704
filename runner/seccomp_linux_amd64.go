package runner

import "golang.org/x/sys/unix"

// legacyModeSyscalls are amd64's path-only forms of the mode-setting calls.
var legacyModeSyscalls = []modeSyscall{
	{unix.SYS_CHMOD, -1, 1, true}, {unix.SYS_MKNOD, -1, 1, false}, {unix.SYS_CREAT, -1, 1, false}, {unix.SYS_OPEN, 1, 2, false},
}
