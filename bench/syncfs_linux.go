package bench

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncFS writes out the filesystem f is on.
func syncFS(f *os.File) error { return unix.Syncfs(int(f.Fd())) }
