package sessions

// Workspaces as filesystems of their own (Config.VolumeBytes, a root
// server): each session's workspace and cache live in one ext4 image of
// its quota's size (package volume), so the kernel refuses a write past
// the quota with ENOSPC in the middle of a run, whatever the write (a
// fallocate, a file unlinked but kept open, a package in the cache).
//
//	workspaces/<w>/instance   the owning server
//	workspaces/<w>/image      the ext4 image (0600, only the server's)
//	workspaces/<w>/fs/        its mount point (0711)
//	    data/                 the workspace, /mnt/data
//	    cache/                the sandbox's ~/.cache
//
// A few volumes are kept formatted and mounted ahead of need, so a new
// session costs no mkfs.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/srt-mcp/srt-mcp/nofollow"
	"github.com/srt-mcp/srt-mcp/volume"
)

// readyVolumes is how many volumes wait for the next sessions.
const readyVolumes = 1

// volumeMount is the mount point's name in a workspace directory.
const volumeMount = "fs"

// VolumeInodes is how many files a volume of size bytes holds (its cache
// included): one per 8 KiB, at least 4096, at most MaxFiles.
func VolumeInodes(size int64) int {
	return int(min(max(size/8192, 4096), MaxFiles))
}

// readyPrefix names a workspace directory whose volume waits for a
// session: ready-<instance>-<random>.
const readyPrefix = "ready-"

// newVolume makes a workspace directory holding a mounted volume with
// empty data/ and cache/ directories, and returns the directory.
func (s *Registry) newVolume() (dir string, err error) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	dir = filepath.Join(s.ws, readyPrefix+s.Instance()+"-"+hex.EncodeToString(b))
	if err := os.Mkdir(dir, s.dirMode()); err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			removeWorkspace(dir)
		}
	}()
	if err := os.Chmod(dir, s.dirMode()); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "instance"), []byte(s.Instance()), 0o600); err != nil {
		return "", err
	}
	if err := s.formatVolumeIn(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// formatVolumeIn makes, in the directory dir, an image of the quota's size
// mounted on dir/fs with empty data/ and cache/ directories.
func (s *Registry) formatVolumeIn(dir string) error {
	size := s.cfg.VolumeBytes
	inodes := VolumeInodes(size)
	image := filepath.Join(dir, "image")
	imageBytes := size + volume.Overhead(size, inodes)
	if err := s.room(dir, imageBytes); err != nil {
		return err
	}
	if err := volume.Format(image, imageBytes, inodes); err != nil {
		return err
	}
	mnt := filepath.Join(dir, volumeMount)
	if err := os.Mkdir(mnt, 0o711); err != nil {
		return err
	}
	if err := volume.Mount(image, mnt); err != nil {
		return err
	}
	// The filesystem's root: searchable by the sandbox user, never listed.
	if err := os.Chmod(mnt, 0o711); err != nil {
		return err
	}
	for _, d := range []string{volume.DataDir, volume.CacheDir, filepath.Join(volume.CacheDir, "site-packages")} {
		if err := os.Mkdir(filepath.Join(mnt, d), 0o700); err != nil {
			return err
		}
	}
	return nil
}

// takeVolume returns a ready volume's directory, renamed to a session's
// (a random name, as a directory workspace's), or makes one now.
func (s *Registry) takeVolume() (string, error) {
	var dir string
	select {
	case dir = <-s.ready:
	default:
	}
	s.refill()
	if dir == "" {
		var err error
		if dir, err = s.newVolume(); err != nil {
			return "", err
		}
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	named := filepath.Join(s.ws, hex.EncodeToString(b))
	if os.Rename(dir, named) != nil {
		return dir, nil // it works under its ready name too
	}
	return named, nil
}

// room admits a new volume of imageBytes only if the state directory's
// filesystem can hold all of it now. Images are sparse, so the quotas of
// all workspaces together may exceed the disk, as directories' did (one
// LibreChat upload is a workspace kept a day: reserving each quota would
// refuse uploads after a few dozen); a workspace is never made that could
// not grow to its quota alone.
func (s *Registry) room(dir string, imageBytes int64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(s.ws, &st); err != nil {
		return err
	}
	if int64(st.Bavail)*int64(st.Bsize) < imageBytes {
		return &os.PathError{Op: "reserve", Path: dir, Err: unix.ENOSPC}
	}
	return nil
}

// refill asks the filler for more ready volumes.
func (s *Registry) refill() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// fillVolumes keeps readyVolumes volumes ready until the registry stops;
// a failure waits a while before the next try (the fallback, a volume made
// for the session itself, says what went wrong).
func (s *Registry) fillVolumes() {
	for {
		for len(s.ready) < cap(s.ready) {
			dir, err := s.newVolume()
			if err != nil {
				select {
				case <-s.stop:
					return
				case <-time.After(10 * time.Second):
				}
				continue
			}
			select {
			case <-s.stop:
				removeWorkspace(dir)
				return
			default:
				s.ready <- dir // only this goroutine sends, below the capacity
			}
		}
		select {
		case <-s.kick:
		case <-s.stop:
			return
		}
	}
}

// dropReady removes the ready volumes (at shutdown).
func (s *Registry) dropReady() {
	for {
		select {
		case dir := <-s.ready:
			removeWorkspace(dir)
		default:
			return
		}
	}
}

// removeWorkspace removes a workspace directory: its volume, if one is
// mounted there, is unmounted first (lazily: a sandbox still running keeps
// it until it exits), so the removal never walks a tree the sandbox is
// writing through a mount that outlives the directory.
func removeWorkspace(dir string) error {
	mnt := filepath.Join(dir, volumeMount)
	var errs []error
	if volume.Mounted(mnt) {
		if err := volume.Unmount(mnt); err != nil {
			errs = append(errs, err)
		}
	}
	if volume.Mounted(mnt) {
		// Never remove what is still mounted: that would empty the
		// filesystem of a session that may still be running.
		return errors.Join(append(errs, &os.PathError{Op: "unmount", Path: mnt, Err: unix.EBUSY})...)
	}
	return errors.Join(append(errs, nofollow.RemoveAll(dir))...)
}

// hostless is err's text without the host paths it names (a reply may
// carry it).
func hostless(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}

// Volumes reports whether new sessions get filesystems of their own
// (VolumeStatus says more, at the cost of a statfs).
func (s *Registry) Volumes() bool { return s.cfg.VolumeBytes > 0 }

// Bounded reports whether the session's workspace is a filesystem of its
// own: the kernel bounds what it holds, no watch needs to.
func (ss *Session) Bounded() bool { return ss.volume }

// Space is what the session's filesystem holds and has free, its cache
// included (ok false for a workspace that is a directory).
func (ss *Session) Space() (used, free int64, ok bool) {
	if !ss.volume {
		return 0, 0, false
	}
	var st unix.Statfs_t
	if err := unix.Statfs(ss.Workspace, &st); err != nil {
		return 0, 0, false
	}
	return int64(st.Blocks-st.Bfree) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize), true
}

// fullErr is the error of a write of n bytes at rel that the session's
// full filesystem refused (its bytes, or its files).
func (ss *Session) fullErr(rel string, n int64) error {
	used, free, _ := ss.Space()
	files := ""
	var st unix.Statfs_t
	if unix.Statfs(ss.Workspace, &st) == nil && st.Ffree == 0 {
		files = fmt.Sprintf(", and all its %d files are in use", st.Files)
	}
	return &Error{Code: "quota_exceeded", Message: fmt.Sprintf("%s/%s (%d bytes) does not fit: the workspace's filesystem is full (%d bytes used with its cache, %d free%s; SANDBOX_WORKSPACE_QUOTA); delete files first; nothing was written",
		WorkspaceMount, rel, n, used, free, files)}
}

// writeErr is fileErr for a write of n bytes at rel, where a full
// filesystem of the session's own (blocks or inodes) is its quota, not
// the server's disk.
func (ss *Session) writeErr(rel string, n int64, err error) error {
	if ss.volume && isFull(err) {
		return ss.fullErr(rel, n)
	}
	return fileErr(rel, err)
}
