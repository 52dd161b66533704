package nofollow

import (
	"errors"
	"io/fs"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set once the kernel answered ENOSYS (older than 5.6).
var noOpenat2 atomic.Bool

// openNoSymlinks opens path with openat2(RESOLVE_NO_SYMLINKS): the kernel
// refuses a symlink at any component, atomically. Older kernels get the
// component walk.
func openNoSymlinks(path string, flags int) (int, error) {
	if _, err := components(path); err != nil {
		return -1, err
	}
	if !noOpenat2.Load() {
		how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
		for {
			fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
				continue
			}
			if errors.Is(err, unix.ENOSYS) {
				noOpenat2.Store(true)
				break
			}
			return fd, err
		}
	}
	return openComponents(path, flags)
}

// readEntries reads d with getdents64, keeping each entry's type from the
// directory itself (os.File.ReadDir would lstat by path when a filesystem
// does not report types); an unknown type is asked with fstatat.
func readEntries(d *Dir, fn func(Entry) error) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(d.fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "getdents", Path: d.name, Err: err}
		}
		if n <= 0 {
			return nil
		}
		for off := 0; off < n; {
			// struct linux_dirent64 { u64 ino; s64 off; u16 reclen; u8 type; char name[]; }
			reclen := int(*(*uint16)(unsafe.Pointer(&buf[off+16])))
			typ := buf[off+18]
			nameb := buf[off+19 : off+reclen]
			for i, c := range nameb {
				if c == 0 {
					nameb = nameb[:i]
					break
				}
			}
			off += reclen
			name := string(nameb)
			if name == "." || name == ".." {
				continue
			}
			e := Entry{Name: name}
			switch typ {
			case unix.DT_DIR:
				e.Type = fs.ModeDir
			case unix.DT_LNK:
				e.Type = fs.ModeSymlink
			case unix.DT_REG:
			case unix.DT_UNKNOWN:
				st, err := d.Lstat(name)
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				if err != nil {
					return err
				}
				e.Type = st.Mode.Type()
			default:
				e.Type = fs.ModeIrregular
			}
			if err := fn(e); err != nil {
				return err
			}
		}
	}
}

// OpenPath returns an O_PATH descriptor of the object at path (clean and
// absolute; no component may be a link): a handle that names the object
// itself, to be mounted by descriptor so that a later rename or link swap
// cannot change what is mounted.
func OpenPath(path string) (int, error) {
	fd, err := openNoSymlinks(path, unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		return -1, wrap("open", path, err)
	}
	return fd, nil
}
