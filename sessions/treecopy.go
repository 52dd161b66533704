package sessions

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/srt-mcp/srt-mcp/nofollow"
)

// treeCopy bounds a copy of a tree a sandbox wrote: at most files entries,
// bytes bytes, and maxTreeDepth levels.
type treeCopy struct {
	files int
	bytes int64
	used  int64 // what the copy takes so far, as the quota charges it (Charge)
}

// charge adds what the new entry name in dst takes (its blocks, as the
// quota counts them: a directory or a link takes blocks too), or
// fallback if it cannot be looked at.
func (c *treeCopy) charge(dst *nofollow.Dir, name string, fallback int64) {
	if st, err := dst.Lstat(name); err == nil {
		c.used += max(Charge(st), fallback)
		return
	}
	c.used += fallback
}

const maxTreeDepth = 256

var errTreeTooBig = errors.New("the tree is larger than its bound")

// copyTree copies what src (a directory a sandbox may have written) holds
// into dst (a new, empty directory only the server writes), never
// following a link: regular files are copied (copy_file_range: a reflink
// where the filesystem has them), directories recursed into, symbolic
// links copied as links, anything else (FIFOs, sockets, devices) left out.
// Modes keep their permission bits only (no set-id bits).
func (c *treeCopy) copyTree(src, dst *nofollow.Dir, depth int) error {
	if depth > maxTreeDepth {
		return errTreeTooBig
	}
	var subs []string
	err := src.ReadDir(func(e nofollow.Entry) error {
		if c.files--; c.files < 0 || c.used > c.bytes {
			return errTreeTooBig
		}
		switch {
		case e.IsDir():
			if err := dst.Mkdir(e.Name, 0o700); err != nil {
				return err
			}
			c.charge(dst, e.Name, 0)
			subs = append(subs, e.Name)
		case e.Type == os.ModeSymlink:
			target, err := readlinkAt(src, e.Name)
			if err != nil {
				return nil // gone meanwhile
			}
			if err := unix.Symlinkat(target, dst.Fd(), e.Name); err != nil {
				return err
			}
			c.charge(dst, e.Name, 0)
			return nil
		case e.Type == 0:
			return c.copyFile(src, dst, e.Name)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range subs {
		if err := c.copySub(src, dst, name, depth); err != nil {
			return err
		}
	}
	return nil
}

func (c *treeCopy) copySub(src, dst *nofollow.Dir, name string, depth int) error {
	s, err := src.Sub(name)
	if err != nil {
		return nil // replaced or removed meanwhile
	}
	defer s.Close()
	d, err := dst.Sub(name)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := c.copyTree(s, d, depth+1); err != nil {
		return err
	}
	if st, err := s.Stat(); err == nil {
		_ = unix.Fchmod(d.Fd(), uint32(st.Mode.Perm()))
	}
	return nil
}

func (c *treeCopy) copyFile(src, dst *nofollow.Dir, name string) error {
	in, err := src.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil // gone, or not openable: left out
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil // replaced by something else meanwhile
	}
	if c.used+fi.Size() > c.bytes {
		return errTreeTooBig
	}
	out, err := dst.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, uint32(fi.Mode().Perm()))
	if err != nil {
		return err
	}
	// A file still growing is cut at the bound: LimitReader.
	n, err := io.Copy(out, io.LimitReader(in, c.bytes-c.used))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	c.charge(dst, name, n)
	if err == nil {
		t := unix.NsecToTimespec(fi.ModTime().UnixNano())
		_ = unix.UtimesNanoAt(dst.Fd(), name, []unix.Timespec{t, t}, unix.AT_SYMLINK_NOFOLLOW)
	}
	return err
}

// readlinkAt reads the link name in d.
func readlinkAt(d *nofollow.Dir, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(d.Fd(), name, buf)
	if err != nil {
		return "", err
	}
	if n >= len(buf) {
		return "", fmt.Errorf("link %s: target too long", name)
	}
	return string(buf[:n]), nil
}
