package sessions

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

const noFollow = unix.O_NOFOLLOW

var (
	errNoSpace error = unix.ENOSPC
	errQuota   error = unix.EDQUOT
)

// nextData finds the first data range of f at or after off: [data, hole).
// Past the last data, data is size.
func nextData(f *os.File, off, size int64) (data, hole int64, err error) {
	data, err = unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
	if errors.Is(err, unix.ENXIO) {
		return size, size, nil
	}
	if err != nil {
		return 0, 0, err
	}
	hole, err = unix.Seek(int(f.Fd()), data, unix.SEEK_HOLE)
	return data, hole, err
}

// bootID names the running kernel (a new one each boot).
func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// loopBacked reports whether a loop device of this machine is attached to
// the file image (by its path, as the kernel records it).
func loopBacked(image string) bool {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		p := strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)")
		if p == image {
			return true
		}
	}
	return false
}
