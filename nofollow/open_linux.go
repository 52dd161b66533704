package nofollow

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
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

// HasXattr reports whether the entry name in d carries the extended
// attribute attr. It looks at that entry itself: the name is one component
// below the open directory, and a link is never followed (a link's own
// attributes are read).
func (d *Dir) HasXattr(name, attr string) (bool, error) {
	if err := checkName(name); err != nil {
		return false, err
	}
	_, err := unix.Lgetxattr("/proc/self/fd/"+strconv.Itoa(d.fd)+"/"+name, attr, nil)
	switch {
	case err == nil || errors.Is(err, unix.ERANGE):
		return true, nil
	case errors.Is(err, unix.ENODATA), errors.Is(err, unix.EOPNOTSUPP):
		return false, nil
	}
	return false, &fs.PathError{Op: "getxattr", Path: d.child(name), Err: err}
}

// ReopenDir opens for reading the directory f is open on (f may be an
// O_PATH descriptor): the object f holds, never a path again.
func ReopenDir(f *os.File) (*Dir, error) {
	fd, err := openatRetry(int(f.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: f.Name(), Err: err}
	}
	return &Dir{fd: fd, name: f.Name()}, nil
}

// FileHasXattr reports whether the object f is open on (f may be an
// O_PATH descriptor) carries the extended attribute attr.
func FileHasXattr(f *os.File, attr string) (bool, error) {
	// The magic link of /proc/self/fd is followed to the object itself.
	_, err := unix.Getxattr("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), attr, nil)
	switch {
	case err == nil || errors.Is(err, unix.ERANGE):
		return true, nil
	case errors.Is(err, unix.ENODATA), errors.Is(err, unix.EOPNOTSUPP):
		return false, nil
	}
	return false, &fs.PathError{Op: "getxattr", Path: f.Name(), Err: err}
}
