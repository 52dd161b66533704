//go:build embedserver

package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// execSealed executes program from a sealed memfd (memfd_create, write,
// F_SEAL_WRITE|SHRINK|GROW|SEAL): its bytes can no longer change, and
// there is no path anyone else could write.
func execSealed(name string, program []byte, argv, env []string) error {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return fmt.Errorf("memfd_create: %w", err)
	}
	for off := 0; off < len(program); {
		n, err := unix.Write(fd, program[off:])
		if err != nil {
			return fmt.Errorf("write memfd: %w", err)
		}
		off += n
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL); err != nil {
		return fmt.Errorf("seal memfd: %w", err)
	}
	// execveat(fd, "", AT_EMPTY_PATH): the descriptor is close-on-exec, so
	// the server does not inherit it.
	return unix.Exec(fmt.Sprintf("/proc/self/fd/%d", fd), argv, env)
}
