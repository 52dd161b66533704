//go:build embedserver

package main

import (
	_ "embed"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// stageProgram is the stage binary (cmd/srt-mcp-stage), embedded by make
// build: what runs inside the server's sandboxes until the command's exec.
//
//go:embed embedded/srt-mcp-stage
var stageProgram []byte

// execSealed executes program from a sealed memfd (see sealedMemfd).
func execSealed(name string, program []byte, argv, env []string) error {
	fd, err := sealedMemfd(name, program, unix.MFD_CLOEXEC)
	if err != nil {
		return err
	}
	// execveat(fd, "", AT_EMPTY_PATH): the descriptor is close-on-exec, so
	// the server does not inherit it.
	return unix.Exec(fmt.Sprintf("/proc/self/fd/%d", fd), argv, env)
}

// stageEnv gives the server the stage binary (cmd/srt-mcp-stage) as a
// sealed memory file it inherits: the environment entry names its
// descriptor. Without one (a build without the stage, or no memfd) the
// runners' sandboxes run the runner's own binary.
func stageEnv() []string {
	if len(stageProgram) == 0 {
		return nil
	}
	fd, err := sealedMemfd("srt-mcp-stage", stageProgram, 0)
	if err != nil {
		return nil
	}
	return []string{fmt.Sprintf("%s=/proc/self/fd/%d", stageBinaryEnv, fd)}
}

// sealedMemfd writes program to a new memfd and seals it (F_SEAL_WRITE,
// SHRINK, GROW, SEAL): its bytes can no longer change, and there is no
// path anyone else could write.
func sealedMemfd(name string, program []byte, flags int) (int, error) {
	fd, err := unix.MemfdCreate(name, flags|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, fmt.Errorf("memfd_create: %w", err)
	}
	for off := 0; off < len(program); {
		n, err := unix.Write(fd, program[off:])
		if err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("write memfd: %w", err)
		}
		off += n
	}
	// F_SEAL_WRITE fails with EBUSY while the kernel still holds extra
	// references to the file's pages (the LRU batches just after a write,
	// on a busy machine): the kernel itself only waits a moment, so try
	// again for up to a second.
	for try := 0; ; try++ {
		_, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL)
		if err == nil {
			return fd, nil
		}
		if err != unix.EBUSY || try == 100 {
			unix.Close(fd)
			return -1, fmt.Errorf("seal memfd: %w", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
