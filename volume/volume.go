// Package volume gives a workspace a filesystem of its own: a sparse image
// file in the server's state directory, formatted ext4 by mkfs, attached to
// a loop device and mounted nodev,nosuid. The kernel then bounds the
// workspace as it bounds any disk: a write past its size fails with
// ENOSPC in the middle of the run, and everything stored there counts
// (allocated blocks, fallocate's KEEP_SIZE, files unlinked but still
// open, directories, the session's cache). A sandbox's mount table shows
// the loop device and a path inside the image, never a host path.
//
// It needs root (loop devices, mount) and mkfs.ext4; Supported says why
// not. An image is only ever mounted from a file this package made and
// mkfs formatted, in a directory only the server can write: never from
// bytes a caller supplied.
package volume

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Layout of a mounted volume: the workspace and the session's cache, side
// by side, so both count against the one size.
const (
	DataDir  = "data"
	CacheDir = "cache"
)

// Overhead is what ext4 keeps for itself in an image holding inodes files
// (journal, inode tables, bitmaps and group descriptors): an image of
// Overhead(size, inodes) more than size holds about size of files.
func Overhead(size int64, inodes int) int64 {
	const journal = 4 << 20
	return journal + int64(inodes)*inodeSize + size/64 + 1<<20
}

const inodeSize = 256

// mkfsDirs are where mkfs.ext4 is looked for when PATH (a service's
// minimal one) lacks the sbin directories.
var mkfsDirs = []string{"/usr/sbin", "/sbin", "/usr/local/sbin"}

// mkfs is the path of mkfs.ext4 ("" when there is none).
var mkfs = sync.OnceValue(func() string {
	if p, err := exec.LookPath("mkfs.ext4"); err == nil {
		return p
	}
	for _, d := range mkfsDirs {
		p := filepath.Join(d, "mkfs.ext4")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
})

// Format makes image, a new sparse file of size bytes (mode 0600, never an
// existing file or a link), and formats it ext4 for up to inodes files,
// with no blocks reserved for root and the smallest journal. The host
// allocates its blocks as the workspace writes them, up to size: the
// caller makes sure the host has room for what it promised (see
// Allocated). On error nothing is left at image.
func Format(image string, size int64, inodes int) (err error) {
	if ok, why := Supported(); !ok {
		return errors.New(why)
	}
	f, err := os.OpenFile(image, os.O_CREATE|os.O_EXCL|os.O_WRONLY|noFollow, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(image)
		}
	}()
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// lazy_*_init: mkfs leaves the tables it would zero as holes (a sparse
	// file reads zeros), so formatting writes a few MiB, not the image.
	cmd := exec.Command(mkfs(), "-q", "-F", "-t", "ext4", "-b", "4096", "-I", strconv.Itoa(inodeSize),
		"-m", "0", "-N", strconv.Itoa(max(inodes, 64)), "-J", "size=4",
		"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", "-O", "^resize_inode", image)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.SysProcAttr = dieWithParent()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4: %v: %s", err, strings.ReplaceAll(strings.TrimSpace(string(out)), image, "the image"))
	}
	return nil
}

// Allocated is how many bytes of image the host has allocated.
func Allocated(image string) (int64, error) {
	fi, err := os.Lstat(image)
	if err != nil {
		return 0, err
	}
	return allocated(fi), nil
}
