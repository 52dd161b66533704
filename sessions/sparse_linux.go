package sessions

import (
	"errors"
	"os"

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
