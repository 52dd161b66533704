//go:build unix

// Package nofollow is the host side's access to directory trees a sandbox
// can write (writable roots, session workspaces): it never follows a
// symbolic link. A path is opened one component at a time (or with
// openat2's RESOLVE_NO_SYMLINKS where the kernel has it), every later
// operation is relative to an open directory, and a symlink where a
// directory was expected is an error, never a jump. Deep trees are walked
// and removed with a bounded number of open descriptors.
//
// The threat this answers: untrusted code plants a symlink (".git/hooks ->
// /var/lib/srt-mcp") or swaps a directory for one between the host's check
// and its use, and the host then reads, deletes or mounts the target.
package nofollow

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// ErrSymlink is returned (wrapped) when a path component is a symbolic link.
var ErrSymlink = errors.New("a path component is a symbolic link; srt-mcp does not follow links in trees a sandbox can write")

// Dir is an open directory. Every name given to its methods is a single
// component (no "/"), resolved without following a link.
type Dir struct {
	fd   int
	name string // for error messages only; never used to resolve anything
}

// Stat is what Lstat reports about one entry.
type Stat struct {
	Mode  fs.FileMode
	Size  int64
	Dev   uint64
	Ino   uint64
	UID   uint32
	GID   uint32
	Nlink uint64
	// Blocks are the 512-byte blocks allocated to it (st_blocks): what
	// it takes on disk, preallocated blocks past its size included.
	Blocks int64
	Mtime  time.Time
	Ctime  time.Time
}

// IsDir reports whether the entry is a directory.
func (s Stat) IsDir() bool { return s.Mode.IsDir() }

// Entry is one directory entry as read from the directory itself.
type Entry struct {
	Name string
	Type fs.FileMode // fs.ModeDir, fs.ModeSymlink, 0 (regular) or another type bit
}

// IsDir reports whether the entry is a directory (never a link to one).
func (e Entry) IsDir() bool { return e.Type == fs.ModeDir }

func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') || strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("nofollow: %q is not a single path component", name)
	}
	return nil
}

// components splits a clean absolute path into its names.
func components(path string) ([]string, error) {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return nil, fmt.Errorf("nofollow: %q is not a clean absolute path", path)
	}
	if path == "/" {
		return nil, nil
	}
	return strings.Split(path[1:], "/"), nil
}

func wrap(op, name string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EMLINK) {
		err = ErrSymlink
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// OpenDir opens the directory at path (clean and absolute). No component
// may be a symbolic link.
func OpenDir(path string) (*Dir, error) {
	fd, err := openNoSymlinks(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return nil, wrap("open", path, err)
	}
	return &Dir{fd: fd, name: path}, nil
}

// OpenTrusted opens the directory at path following links, for a path
// whose every component only trusted users can change (the operator's
// state directory, say). Operations below it never follow links.
func OpenTrusted(path string) (*Dir, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return &Dir{fd: fd, name: path}, nil
}

// Open opens the object at path (clean and absolute) with flags; no
// component, the last included, may be a symbolic link.
func Open(path string, flags int) (*os.File, error) {
	fd, err := openNoSymlinks(path, flags|unix.O_CLOEXEC)
	if err != nil {
		return nil, wrap("open", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// Close closes the directory.
func (d *Dir) Close() error {
	if d == nil || d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// Fd is the directory's descriptor (owned by d).
func (d *Dir) Fd() int { return d.fd }

// Name is the path d was opened as (for messages).
func (d *Dir) Name() string { return d.name }

func (d *Dir) child(name string) string {
	if d.name == "/" {
		return "/" + name
	}
	return d.name + "/" + name
}

// Sub opens the subdirectory name. A symlink there is ErrSymlink.
func (d *Dir) Sub(name string) (*Dir, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	fd, err := openatRetry(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) {
			if st, serr := d.Lstat(name); serr == nil && st.Mode&fs.ModeSymlink != 0 {
				err = unix.ELOOP
			}
		}
		return nil, wrap("open", d.child(name), err)
	}
	return &Dir{fd: fd, name: d.child(name)}, nil
}

// Walk opens the directory rel (slash-separated, relative to d), one
// component at a time.
func (d *Dir) Walk(rel string) (*Dir, error) {
	cur := &Dir{fd: -1, name: d.name}
	dupfd, err := unix.FcntlInt(uintptr(d.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	cur.fd = dupfd
	for _, c := range strings.Split(rel, "/") {
		if c == "" || c == "." {
			continue
		}
		next, err := cur.Sub(c)
		cur.Close()
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

// Lstat describes name without following it.
func (d *Dir) Lstat(name string) (Stat, error) {
	if err := checkName(name); err != nil {
		return Stat{}, err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return Stat{}, &fs.PathError{Op: "lstat", Path: d.child(name), Err: err}
	}
	return StatOf(&st), nil
}

// Stat describes d itself.
func (d *Dir) Stat() (Stat, error) {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return Stat{}, &fs.PathError{Op: "fstat", Path: d.name, Err: err}
	}
	return StatOf(&st), nil
}

// OpenFile opens name (never a link: O_NOFOLLOW) with flags and perm.
// Opening for reading does not block on a FIFO a sandbox planted.
func (d *Dir) OpenFile(name string, flags int, perm uint32) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	fd, err := openatRetry(d.fd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, perm)
	if err != nil {
		return nil, wrap("open", d.child(name), err)
	}
	if flags&unix.O_NONBLOCK == 0 {
		_ = unix.SetNonblock(fd, false)
	}
	return os.NewFile(uintptr(fd), d.child(name)), nil
}

// ReadFile reads the regular file name, at most max bytes; a larger file,
// a link or anything but a regular file is an error.
func (d *Dir) ReadFile(name string, max int64) ([]byte, error) {
	f, err := d.OpenFile(name, unix.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: d.child(name), Err: errors.New("not a regular file")}
	}
	if fi.Size() > max {
		return nil, &fs.PathError{Op: "read", Path: d.child(name), Err: fmt.Errorf("larger than %d bytes", max)}
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = &fs.PathError{Op: "read", Path: d.child(name), Err: fmt.Errorf("larger than %d bytes", max)}
	}
	return b, err
}

// Mkdir creates the directory name.
func (d *Dir) Mkdir(name string, perm uint32) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := unix.Mkdirat(d.fd, name, perm); err != nil {
		return &fs.PathError{Op: "mkdir", Path: d.child(name), Err: err}
	}
	return nil
}

// Chown sets the owner of name without following it.
func (d *Dir) Chown(name string, uid, gid int) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := unix.Fchownat(d.fd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "chown", Path: d.child(name), Err: err}
	}
	return nil
}

// Remove removes name: a file or link is unlinked, a directory must be
// empty.
func (d *Dir) Remove(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	err := unix.Unlinkat(d.fd, name, 0)
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
		if st, serr := d.Lstat(name); serr == nil && st.IsDir() {
			err = unix.Unlinkat(d.fd, name, unix.AT_REMOVEDIR)
		}
	}
	if err != nil {
		return &fs.PathError{Op: "remove", Path: d.child(name), Err: err}
	}
	return nil
}

// ReadDir calls fn for every entry of d (not "." and ".."), in directory
// order, reading in batches: a huge directory is never held in memory.
// fn may remove the entry it was given.
func (d *Dir) ReadDir(fn func(Entry) error) error {
	if _, err := unix.Seek(d.fd, 0, io.SeekStart); err != nil {
		return &fs.PathError{Op: "seek", Path: d.name, Err: err}
	}
	return readEntries(d, fn)
}

// maxHeld bounds how many directory descriptors RemoveAll holds at once;
// deeper levels are moved up the tree instead (see RemoveAll).
const maxHeld = 32

var flattenSeq atomic.Uint64

// RemoveAll removes name and, if it is a directory, everything in it. It
// never follows a link: a link is removed, not its target. Trees of any
// depth are removed with at most maxHeld open directories: a subtree
// deeper than that is first moved (renamed) up to the top of the tree
// being removed, which turns depth into width. A missing name is not an
// error.
func (d *Dir) RemoveAll(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	st, err := d.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return ignoreMissing(d.Remove(name))
	}
	sub, err := d.Sub(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if errors.Is(err, ErrSymlink) || errors.Is(err, unix.ENOTDIR) {
			return ignoreMissing(d.Remove(name)) // swapped for a link or a file: remove that
		}
		return err
	}
	err = removeContents(sub, sub, 1)
	sub.Close()
	if err != nil {
		return err
	}
	return ignoreMissing(d.Remove(name))
}

// RemoveAll removes path (clean and absolute) and everything below it.
// The parent of path is trusted (opened following links); nothing below
// it is followed.
func RemoveAll(path string) error {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path || path == "/" {
		return fmt.Errorf("nofollow: refusing to remove %q", path)
	}
	parent, err := OpenTrusted(filepath.Dir(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer parent.Close()
	return parent.RemoveAll(filepath.Base(path))
}

func ignoreMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// removeContents empties dir, which is depth levels below top. Reading a
// directory while removing from it can skip entries, so it reads again
// until a pass finds nothing.
func removeContents(top, dir *Dir, depth int) error {
	for {
		found := 0
		err := dir.ReadDir(func(e Entry) error {
			found++
			if !e.IsDir() {
				return ignoreMissing(dir.Remove(e.Name))
			}
			if depth >= maxHeld {
				// Too deep to hold another descriptor: move the
				// subtree up to the top, where the top's own loop
				// finds it again with a fresh depth.
				to := ".srt-rm-" + strconv.FormatUint(flattenSeq.Add(1), 36) + "-" + strconv.Itoa(os.Getpid())
				if err := unix.Renameat(dir.fd, e.Name, top.fd, to); err == nil || errors.Is(err, unix.ENOENT) {
					return nil
				} else if !errors.Is(err, unix.EXDEV) {
					return &fs.PathError{Op: "rename", Path: dir.child(e.Name), Err: err}
				}
				// Another filesystem is mounted here: it cannot be moved;
				// hold one more descriptor for it.
			}
			sub, err := dir.Sub(e.Name)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				if errors.Is(err, ErrSymlink) || errors.Is(err, unix.ENOTDIR) {
					return ignoreMissing(dir.Remove(e.Name))
				}
				return err
			}
			err = removeContents(top, sub, depth+1)
			sub.Close()
			if err != nil {
				return err
			}
			return ignoreMissing(dir.Remove(e.Name))
		})
		if err != nil {
			return err
		}
		if found == 0 {
			return nil
		}
	}
}

// StatOf is the Stat of a stat(2) answer.
func StatOf(st *unix.Stat_t) Stat {
	m := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	}
	if st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return Stat{
		Mode: m, Size: st.Size, Dev: uint64(st.Dev), Ino: uint64(st.Ino), UID: st.Uid, GID: st.Gid, Nlink: uint64(st.Nlink),
		Blocks: int64(st.Blocks),
		Mtime:  time.Unix(int64(st.Mtim.Sec), int64(st.Mtim.Nsec)),
		Ctime:  time.Unix(int64(st.Ctim.Sec), int64(st.Ctim.Nsec)),
	}
}

func openatRetry(dirfd int, name string, flags int, perm uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, perm)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return fd, err
	}
}

// openComponents opens path one component at a time from "/", each with
// O_NOFOLLOW: the portable form of RESOLVE_NO_SYMLINKS.
func openComponents(path string, flags int) (int, error) {
	parts, err := components(path)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for i, p := range parts {
		f := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i == len(parts)-1 {
			f = flags | unix.O_NOFOLLOW | unix.O_CLOEXEC
		}
		next, err := openatRetry(fd, p, f, 0)
		if err != nil && errors.Is(err, unix.ENOTDIR) && i < len(parts)-1 {
			var st unix.Stat_t
			if unix.Fstatat(fd, p, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = unix.ELOOP
			}
		}
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	if len(parts) == 0 {
		unix.Close(fd)
		return unix.Open("/", flags|unix.O_CLOEXEC, 0)
	}
	return fd, nil
}
