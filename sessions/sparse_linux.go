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
// the file image: by its device and inode (LOOP_GET_STATUS64), which no
// other path to the same file (a bind mount, a link) hides, or, for a
// device this process cannot open, by the path the kernel records.
func loopBacked(image string) bool {
	var st unix.Stat_t
	if err := unix.Stat(image, &st); err != nil {
		return false
	}
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		dev := "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(f)))
		if fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			info, err := unix.IoctlLoopGetStatus64(fd)
			unix.Close(fd)
			if err == nil {
				if info.Device == uint64(st.Dev) && info.Inode == st.Ino {
					return true
				}
				continue
			}
		}
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)") == image {
			return true
		}
	}
	return false
}
