package sessions

// Snapshots of workspaces that are filesystems of their own: a snapshot
// is a copy of the session's image taken while its filesystem is frozen
// (FIFREEZE: a consistent filesystem the kernel wrote, never bytes a
// caller supplied), stored apart from every session:
//
//	snapshots/<id>/meta.json   whose it is, its name, size and expiry
//	snapshots/<id>/image       the copied image (sparse)
//	snapshots/new-<id>/        one being made: never offered, removed at start
//
// A snapshot is published by renaming its finished directory into place,
// so a server killed while making one leaves only a new-* directory, which
// the next one removes. Restore and fork copy the image back into a
// session's directory and mount the copy; nothing is ever mounted from
// the snapshot itself.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/srt-mcp/srt-mcp/nofollow"
	"github.com/srt-mcp/srt-mcp/printable"
	"github.com/srt-mcp/srt-mcp/volume"
)

// SnapshotInfo describes a snapshot.
type SnapshotInfo struct {
	ID        string    `json:"snapshot_id"`
	Name      string    `json:"name"`
	Principal string    `json:"principal"`
	SessionID string    `json:"session_id"`
	Bytes     int64     `json:"size_bytes"`
	Created   time.Time `json:"created_at"`
	Expires   time.Time `json:"expires_at"`
	// Tree: a copy of a workspace that is a directory (its files, not an
	// image); it restores only into such workspaces.
	Tree bool `json:"tree,omitempty"`
}

var snapshotIDPattern = regexp.MustCompile(`^snap_[0-9a-f]{16}$`)

func (s *Registry) snapshotsDir() string { return filepath.Join(s.cfg.StateDir, "snapshots") }

// MaxLabel bounds the name a caller gives a snapshot or a persistent
// workspace.
const MaxLabel = 128

// CheckLabel refuses a name a snapshot or a persistent workspace cannot
// carry: empty, only spaces, too long, or with characters a client would
// show as something else.
func CheckLabel(name string) error {
	if name == "" || len(name) > MaxLabel {
		return &Error{Code: "invalid_arguments", Field: "name", Message: fmt.Sprintf("name must be 1 to %d bytes", MaxLabel)}
	}
	if strings.TrimSpace(name) == "" {
		return &Error{Code: "invalid_arguments", Field: "name", Message: "name must hold more than spaces"}
	}
	if _, clean := printable.Name(name); !clean || strings.ContainsAny(name, "/\\") {
		return &Error{Code: "invalid_arguments", Field: "name", Message: "name may not hold '/', '\\', control, invisible or direction-changing characters"}
	}
	return nil
}

// freezeWait is how long a snapshot's freeze waits for the session's
// writers before it stops the session's interpreters (Freeze's busy), and
// then again before it gives up.
const freezeWait = 3 * time.Second

// Snapshot copies ss's filesystem (held by the caller: no run in it) into
// a new snapshot of its principal, named name, kept for ttl. budget bounds
// the bytes the principal's snapshots may hold together (0: none); busy
// stops the session's interpreters when one of them keeps the filesystem
// from freezing.
func (s *Registry) Snapshot(ss *Session, name string, ttl time.Duration, budget int64, busy func()) (*SnapshotInfo, error) {
	if err := CheckLabel(name); err != nil {
		return nil, err
	}
	root := s.snapshotsDir()
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	// The copy holds what the image holds once the filesystem's dirty
	// pages are written: that much is promised to the budget before the
	// copy starts, so snapshots asked for at once are refused early
	// rather than after each copied a whole image.
	need, err := s.copyBytes(ss)
	if err != nil {
		return nil, err
	}
	release, err := s.promiseSnapshot(ss.Principal, need, budget)
	if err != nil {
		return nil, err
	}
	defer release()
	done, err := s.reserveCopy(root, need, "a snapshot of this workspace")
	if err != nil {
		return nil, err
	}
	defer done()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	id := "snap_" + hex.EncodeToString(b)
	tmp := filepath.Join(root, "new-"+id[len("snap_"):])
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, err
	}
	published := false
	defer func() {
		if !published {
			_ = nofollow.RemoveAll(tmp)
		}
	}()
	var size int64
	if ss.volume {
		if err := copyFrozen(ss, filepath.Join(tmp, "image"), busy); err != nil {
			return nil, err
		}
		size, _ = volume.Allocated(filepath.Join(tmp, "image"))
	} else {
		// No freeze for a directory: the files are copied as they are
		// (a program writing meanwhile leaves what a cp would see).
		if size, err = s.copyTrees(ss, tmp, need); err != nil {
			return nil, err
		}
	}
	now := time.Now()
	info := &SnapshotInfo{ID: id, Name: name, Principal: ss.Principal, SessionID: ss.ID, Bytes: size, Created: now, Expires: now.Add(ttl), Tree: !ss.volume}
	meta, _ := json.Marshal(info)
	if err := writeFileSync(filepath.Join(tmp, "meta.json"), meta); err != nil {
		return nil, fullOr(err, "writing the snapshot")
	}
	// The workspace may have grown between the promise and the freeze:
	// the copy's own size is checked, and published, under the budget's
	// lock, so the published snapshots never pass it.
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	if held := s.snapshotBytes(ss.Principal); budget > 0 && held+size > budget {
		return nil, budgetErr(size, held, budget)
	}
	if err := os.Rename(tmp, filepath.Join(root, id)); err != nil {
		return nil, err
	}
	published = true
	return info, nil
}

// imageBytes is what ss's image holds on the host once its free blocks
// are given back (FITRIM) and its dirty pages written (syncfs).
func imageBytes(ss *Session) (int64, error) {
	volume.Trim(filepath.Join(ss.Dir, volumeMount)) // the blocks of deleted files need no copy
	volume.Sync(filepath.Join(ss.Dir, volumeMount))
	return volume.Allocated(filepath.Join(ss.Dir, "image"))
}

// snapshotBytes is what principal's published snapshots hold.
func (s *Registry) snapshotBytes(principal string) int64 {
	held := int64(0)
	for _, o := range s.Snapshots(principal) {
		held += o.Bytes
	}
	return held
}

func budgetErr(size, held, budget int64) error {
	return &Error{Code: "quota_exceeded", Message: fmt.Sprintf("this snapshot (%d bytes) and this caller's others (%d bytes, those being made included) would pass its snapshot budget of %d bytes (--snapshot-budget); delete_snapshot an older one first", size, held, budget)}
}

// promiseSnapshot sets need bytes of principal's snapshot budget aside
// for a snapshot being made, or refuses when its published and promised
// snapshots leave no room; release gives the promise back once the
// snapshot is published (and counted as such) or abandoned.
func (s *Registry) promiseSnapshot(principal string, need, budget int64) (release func(), err error) {
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	if budget > 0 {
		if held := s.snapPromised[principal] + s.snapshotBytes(principal); held+need > budget {
			return nil, budgetErr(need, held, budget)
		}
	}
	if s.snapPromised == nil {
		s.snapPromised = map[string]int64{}
	}
	s.snapPromised[principal] += need
	return func() {
		s.snapMu.Lock()
		defer s.snapMu.Unlock()
		if s.snapPromised[principal] -= need; s.snapPromised[principal] <= 0 {
			delete(s.snapPromised, principal)
		}
	}, nil
}

// reservedCopy sizes a copy into dir's filesystem (size), reserves that
// room (reserveCopy) and makes the copy (fill, given the size) while it is
// held.
func (s *Registry) reservedCopy(dir, what string, size func() (int64, error), fill func(need int64) error) error {
	need, err := size()
	if err != nil {
		return err
	}
	done, err := s.reserveCopy(dir, need, what)
	if err != nil {
		return err
	}
	defer done()
	return fill(need)
}

// reserveCopy admits a copy of need bytes into dir's filesystem only
// when, with the copies already under way, it leaves more than the disk's
// last 5% (at most 1 GiB) free: the running workspaces' sparse images grow
// into what is free, and copies that took it would turn their writes into
// I/O errors. release ends the reservation once the copy is done (its
// bytes then count in the free space itself).
func (s *Registry) reserveCopy(dir string, need int64, what string) (release func(), err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil, sessErr("internal_error", "reading the server's free space: %s", hostless(err))
	}
	free, total := int64(st.Bavail)*int64(st.Bsize), int64(st.Blocks)*int64(st.Bsize)
	keep := min(total/20, 1<<30)
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	if free-s.copying-need < keep {
		return nil, sessErr("storage_full", "the server's storage has %d bytes free (%d of them promised to copies under way); %s needs %d and the last %d stay for running workspaces; nothing was changed", free, s.copying, what, need, keep)
	}
	s.copying += need
	return func() {
		s.snapMu.Lock()
		s.copying -= need
		s.snapMu.Unlock()
	}, nil
}

// copyFrozen copies ss's image (held by the caller) to the new file dst
// while its filesystem is frozen; busy stops what keeps it from freezing.
func copyFrozen(ss *Session, dst string, busy func()) error {
	thaw, err := volume.Freeze(filepath.Join(ss.Dir, volumeMount), freezeWait, busy)
	if errors.Is(err, volume.ErrBusy) {
		return sessErr("session_busy", "the workspace's filesystem stayed busy for %s after its interpreters were stopped (a program in it kept a write going); nothing was copied; try again", 2*freezeWait)
	}
	if err != nil {
		return sessErr("internal_error", "could not freeze the workspace's filesystem: %s", hostless(err))
	}
	err = copySparse(filepath.Join(ss.Dir, "image"), dst)
	thaw()
	if err != nil {
		return fullOr(err, "copying the workspace")
	}
	return nil
}

// fullOr is a session error for err: storage_full for a full disk, else
// internal_error saying what failed, without a host path.
func fullOr(err error, what string) error {
	if isFull(err) {
		return sessErr("storage_full", "the server's storage is full: %s failed; nothing was changed", what)
	}
	return sessErr("internal_error", "%s: %s", what, hostless(err))
}

func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|noFollow, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// snapshot loads principal's snapshot id (another principal's is
// not_found, like one that does not exist; so is an expired one).
func (s *Registry) snapshot(id, principal string) (*SnapshotInfo, string, error) {
	notFound := &Error{Code: "not_found", Field: "snapshot_id", Message: fmt.Sprintf("no snapshot %s (list_snapshots lists yours)", printable.String(id))}
	if !snapshotIDPattern.MatchString(id) {
		return nil, "", notFound
	}
	dir := filepath.Join(s.snapshotsDir(), id)
	d, err := nofollow.OpenDir(dir)
	if err != nil {
		return nil, "", notFound
	}
	b, err := d.ReadFile("meta.json", 64<<10)
	d.Close()
	var info SnapshotInfo
	if err != nil || json.Unmarshal(b, &info) != nil || info.ID != id || info.Principal != principal || time.Now().After(info.Expires) {
		return nil, "", notFound
	}
	return &info, dir, nil
}

// SnapshotOf returns principal's snapshot id (not_found for another's).
func (s *Registry) SnapshotOf(id, principal string) (*SnapshotInfo, error) {
	info, _, err := s.snapshot(id, principal)
	return info, err
}

// Snapshots lists principal's snapshots, newest first.
func (s *Registry) Snapshots(principal string) []SnapshotInfo {
	ents, _ := os.ReadDir(s.snapshotsDir())
	var out []SnapshotInfo
	for _, e := range ents {
		if info, _, err := s.snapshot(e.Name(), principal); err == nil {
			out = append(out, *info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out
}

// DeleteSnapshot removes principal's snapshot id.
func (s *Registry) DeleteSnapshot(id, principal string) error {
	_, dir, err := s.snapshot(id, principal)
	if err != nil {
		return err
	}
	return nofollow.RemoveAll(dir)
}

// Restore replaces ss's filesystem (held by the caller, its interpreters
// and sandboxes stopped) with a copy of principal's snapshot id.
func (s *Registry) Restore(ss *Session, id string) (*SnapshotInfo, error) {
	info, dir, err := s.snapshot(id, ss.Principal)
	if err != nil {
		return nil, err
	}
	if info.Tree != !ss.volume {
		return nil, sessErr("unsupported", "snapshot %s is a copy of a workspace that was %s, and this session's is %s: it restores only into the same kind (or fork it on a server whose workspaces are)", info.ID, kind(!info.Tree), kind(ss.volume))
	}
	if info.Tree {
		err := s.replaceTrees(ss, func(next string) error {
			return s.reservedCopy(ss.Dir, "restoring this snapshot", func() (int64, error) {
				n, err := treeSize(dir)
				if err != nil {
					return 0, sessErr("internal_error", "reading the snapshot's size: %s", hostless(err))
				}
				return n, nil
			}, func(need int64) error {
				_, err := copyTreesFrom(dir, next, need+(1<<20))
				return err
			})
		})
		if err != nil {
			return nil, err
		}
		return info, nil
	}
	src := filepath.Join(dir, "image")
	err = s.replaceImage(ss, func(next string) error {
		return s.reservedCopy(ss.Dir, "restoring this snapshot", func() (int64, error) {
			n, err := volume.Allocated(src)
			if err != nil {
				return 0, sessErr("internal_error", "reading the snapshot's size: %s", hostless(err))
			}
			return n, nil
		}, func(int64) error {
			if err := copySparse(src, next); err != nil {
				return fullOr(err, "copying the snapshot")
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return info, nil
}

// Fork replaces the filesystem of dst (new, held, nothing running in it)
// with a copy of src's (held by the caller) as it is now, taken while it
// is frozen; busy stops src's interpreters when one keeps it from
// freezing. Nothing but the two sessions ever holds the copy: a server
// killed meanwhile leaves no snapshot behind.
func (s *Registry) Fork(src, dst *Session, busy func()) error {
	if src.volume != dst.volume {
		return sessErr("unsupported", "the workspace is %s and a new one here is %s: a fork needs the same kind", kind(src.volume), kind(dst.volume))
	}
	if !src.volume {
		return s.replaceTrees(dst, func(next string) error {
			return s.reservedCopy(dst.Dir, "a fork of this workspace", func() (int64, error) { return s.copyBytes(src) }, func(need int64) error {
				_, err := s.copyTrees(src, next, need)
				return err
			})
		})
	}
	return s.replaceImage(dst, func(next string) error {
		return s.reservedCopy(dst.Dir, "a fork of this workspace", func() (int64, error) {
			n, err := imageBytes(src)
			if err != nil {
				return 0, sessErr("internal_error", "reading the workspace's size: %s", hostless(err))
			}
			return n, nil
		}, func(int64) error { return copyFrozen(src, next, busy) })
	})
}

// replaceImage mounts, in place of ss's filesystem, the image fill writes
// to a new file beside the current one: a failure (a full disk) leaves the
// workspace as it was. The files become ss's uid's (a fork's or an
// earlier session's are another's).
func (s *Registry) replaceImage(ss *Session, fill func(next string) error) error {
	image := filepath.Join(ss.Dir, "image")
	next := image + ".restore"
	_ = os.Remove(next)
	if err := fill(next); err != nil {
		_ = os.Remove(next)
		return err
	}
	mnt := filepath.Join(ss.Dir, volumeMount)
	if err := volume.Unmount(mnt); err != nil {
		_ = os.Remove(next)
		return sessErr("internal_error", "could not unmount the workspace: %s", hostless(err))
	}
	if err := volume.Mount(next, mnt); err != nil {
		_ = os.Remove(next)
		if merr := volume.Mount(image, mnt); merr != nil {
			return sessErr("internal_error", "the copied filesystem did not mount (%s), nor did the workspace's own again (%s): close the session", hostless(err), hostless(merr))
		}
		return sessErr("internal_error", "the copied filesystem did not mount (%s); the workspace is as it was", hostless(err))
	}
	// The loop device holds the old image open until it detaches; the
	// name goes now.
	_ = os.Rename(next, image)
	chownSession(ss) // a fork's or an earlier session's files become ss's
	return nil
}

// kind names what a workspace is.
func kind(volume bool) string {
	if volume {
		return "a filesystem of its own"
	}
	return "a directory"
}

// copyBytes is what a copy of ss's files takes on the host: its image's
// allocation, or its trees' files.
func (s *Registry) copyBytes(ss *Session) (int64, error) {
	if ss.volume {
		n, err := imageBytes(ss)
		if err != nil {
			return 0, sessErr("internal_error", "reading the workspace's size: %s", hostless(err))
		}
		return n, nil
	}
	n := int64(0)
	for _, d := range []string{ss.Workspace, ss.Cache} {
		b, err := treeSize(d)
		if err != nil {
			return 0, sessErr("internal_error", "reading the workspace's size: %s", hostless(err))
		}
		n += b
	}
	return n, nil
}

// treeSize totals what the entries below dir take as the quota charges
// them (Charge: directories, links and empty files take blocks too; never
// following a link), past MaxFiles entries an error.
func treeSize(dir string) (int64, error) {
	d, err := nofollow.OpenTrusted(dir)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	n := int64(0)
	err = nofollow.WalkTree(d, MaxFiles, func(rel string, st nofollow.Stat) error {
		n += Charge(st)
		return nil
	})
	return n, err
}

// copyTrees copies ss's workspace and cache into dir/data and dir/cache
// (new), at most limit bytes (plus what grows meanwhile: 1 MiB), and
// returns the bytes copied.
func (s *Registry) copyTrees(ss *Session, dir string, limit int64) (int64, error) {
	return copyPairs(map[string]string{ss.Workspace: filepath.Join(dir, "data"), ss.Cache: filepath.Join(dir, "cache")}, limit+(1<<20))
}

// copyTreesFrom copies a tree snapshot's data and cache into dir.
func copyTreesFrom(snap, dir string, limit int64) (int64, error) {
	return copyPairs(map[string]string{filepath.Join(snap, "data"): filepath.Join(dir, "data"), filepath.Join(snap, "cache"): filepath.Join(dir, "cache")}, limit)
}

func copyPairs(pairs map[string]string, limit int64) (int64, error) {
	c := &treeCopy{files: MaxFiles, bytes: limit}
	for from, to := range pairs {
		src, err := nofollow.OpenTrusted(from)
		if err != nil {
			return c.used, sessErr("internal_error", "copying the workspace: %s", hostless(err))
		}
		if err := os.Mkdir(to, 0o700); err != nil {
			src.Close()
			return c.used, fullOr(err, "copying the workspace")
		}
		dst, err := nofollow.OpenTrusted(to)
		if err == nil {
			err = c.copyTree(src, dst, 0)
			dst.Close()
		}
		src.Close()
		if errors.Is(err, errTreeTooBig) {
			return c.used, &Error{Code: "quota_exceeded", Message: fmt.Sprintf("the workspace holds more than a copy may (%d files, %d bytes): it grew while it was copied, or is past its quota; delete files first", MaxFiles, limit)}
		}
		if err != nil {
			return c.used, fullOr(err, "copying the workspace")
		}
	}
	return c.used, nil
}

// replaceTrees puts, in place of ss's workspace and cache (directories;
// its interpreters and sandboxes stopped), the trees fill writes into
// next/data and next/cache: a failure leaves the workspace as it was. The
// files become ss's owner's.
func (s *Registry) replaceTrees(ss *Session, fill func(next string) error) error {
	next := filepath.Join(ss.Dir, "restore")
	_ = nofollow.RemoveAll(next)
	if err := os.Mkdir(next, 0o700); err != nil {
		return fullOr(err, "restoring")
	}
	defer nofollow.RemoveAll(next)
	if err := fill(next); err != nil {
		return err
	}
	old := filepath.Join(ss.Dir, "restore-old")
	_ = nofollow.RemoveAll(old)
	if err := os.Mkdir(old, 0o700); err != nil {
		return fullOr(err, "restoring")
	}
	defer nofollow.RemoveAll(old)
	for _, p := range []struct{ cur, name string }{{ss.Workspace, "data"}, {ss.Cache, "cache"}} {
		if err := os.Rename(p.cur, filepath.Join(old, p.name)); err != nil {
			return sessErr("internal_error", "restoring: %s", hostless(err))
		}
		if err := os.Rename(filepath.Join(next, p.name), p.cur); err != nil {
			_ = os.Rename(filepath.Join(old, p.name), p.cur)
			return sessErr("internal_error", "restoring: %s", hostless(err))
		}
	}
	chownSession(ss)
	return nil
}

// chownTree gives every entry below d to uid:gid, never following a link,
// at most *budget entries and maxSweepDepth levels.
func chownTree(d *nofollow.Dir, uid, gid, depth int, budget *int) error {
	var subs []string
	err := d.ReadDir(func(e nofollow.Entry) error {
		if *budget--; *budget < 0 {
			return errTooManyEntries
		}
		if err := d.Chown(e.Name, uid, gid); err != nil {
			return err
		}
		if e.IsDir() {
			subs = append(subs, e.Name)
		}
		return nil
	})
	if err != nil || depth >= 256 {
		return err
	}
	for _, name := range subs {
		sub, err := d.Sub(name)
		if err != nil {
			continue
		}
		err = chownTree(sub, uid, gid, depth+1, budget)
		sub.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

var errTooManyEntries = errors.New("too many entries")

// copySparse copies the regular file src to a new file dst (0600, never
// through a link), holes kept as holes.
func copySparse(src, dst string) (err error) {
	in, err := os.OpenFile(src, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", filepath.Base(src))
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY|noFollow, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(dst)
		}
	}()
	if err := out.Truncate(fi.Size()); err != nil {
		return err
	}
	for off := int64(0); off < fi.Size(); {
		data, hole, err := nextData(in, off, fi.Size())
		if err != nil {
			return err
		}
		if data >= fi.Size() {
			break
		}
		if _, err := in.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := out.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.CopyN(out, in, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return out.Sync()
}

// isFull tells a full disk.
func isFull(err error) bool {
	return errors.Is(err, errNoSpace) || errors.Is(err, errQuota)
}

// SweepSnapshots removes expired snapshots and the unfinished ones a
// killed server left (new-*, older than a minute: a live server may be
// writing one), and returns how many it removed.
func (s *Registry) SweepSnapshots(now time.Time) int {
	ents, _ := os.ReadDir(s.snapshotsDir())
	n := 0
	for _, e := range ents {
		p := filepath.Join(s.snapshotsDir(), e.Name())
		gone := false
		switch {
		case strings.HasPrefix(e.Name(), "new-"):
			fi, err := os.Lstat(p)
			gone = err == nil && now.Sub(fi.ModTime()) > time.Minute
		case snapshotIDPattern.MatchString(e.Name()):
			var info SnapshotInfo
			d, err := nofollow.OpenDir(p)
			if err != nil {
				continue
			}
			b, err := d.ReadFile("meta.json", 64<<10)
			d.Close()
			gone = err != nil || json.Unmarshal(b, &info) != nil || now.After(info.Expires)
		default:
			gone = true // nothing else lives there
		}
		if gone && nofollow.RemoveAll(p) == nil {
			n++
		}
	}
	return n
}
