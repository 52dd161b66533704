package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/srt-mcp/srt-mcp/nofollow"
	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/printable"
)

// Writable host paths on a root runner, through idmapped mounts.
//
// A root runner runs every sandbox as an unprivileged host uid (the
// --sandbox-user, or a data session's own uid), so a directory the
// operator allows it to write is usable only if that uid may write it by
// its modes; a chown cannot serve every session's uid at once. For each
// writable root the sandbox user may not write, the runner instead mounts
// an idmapped clone of it: the sandbox's uid and gid stand for the
// directory owner's on that mount only, so the sandbox writes where the
// owner may, and what it creates belongs to the owner on the host. The
// directory's modes on the host stay as they are.
//
// How, per run (prepareIdmaps, then idmapped.start):
//   - the root's source, already opened without following links
//     (openSources), is cloned by descriptor (open_tree OPEN_TREE_CLONE,
//     recursively, as bwrap binds recursively): the object checked, never
//     the name again;
//   - a user namespace whose only mapping is owner -> sandbox uid (and
//     group -> sandbox gid) is made by a child that never runs (stopped by
//     ptrace at its exec, then killed), and the clone gets that mapping
//     plus nosuid and nodev (mount_setattr MOUNT_ATTR_IDMAP);
//   - bwrap 0.8 turns every descriptor back into a path (realpath of
//     /proc/self/fd/N) and mounts by path, so a detached clone cannot be
//     handed to it (its "path" is "/", which it would bind instead: its
//     own fstat check catches that). So bwrap is started from a thread
//     that first enters a mount namespace of its own (private
//     propagation), where each clone is attached at a mount point under
//     the runner's cache directory (<cache>/idmap/d0, f0, ...; the host's
//     mount table never sees it, and the namespace ends with bwrap);
//   - binds the plan makes inside a mapped root (protected names, pinned
//     directories) are re-opened beneath the attached clone, again
//     without following a link, and must be the same objects (device and
//     inode) the plan checked; they inherit the mapping.
//
// Why mapping to the owner is safe enough, root included. Only the owner's
// uid and gid are mapped: every other file in the tree shows as the
// overflow id, so the sandbox has only "other" rights on them. When the
// owner is root, the sandbox's uid stands for host uid 0 on that mount and
// what it creates there is root's on the host. The sandbox is still an
// unprivileged process: no capability in any namespace (bwrap drops them
// all, no_new_privs, nested user namespaces off), and the mapping grants
// none (it only translates ids), so it may do to that tree what the
// owner's permission bits allow and nothing else, nowhere else. What root
// ownership could add is closed separately:
//   - set-uid and set-gid files: the mount is nosuid (inside), and the
//     seccomp filter refuses those mode bits on every call that sets them
//     (the chmod family, creating opens, mknod; openat2 and io_uring are
//     refused whole), so no new one can appear on the host. An existing
//     one would keep its bits under a store through a shared mmap (only
//     write(2) and truncate clear them), and so would a program's file
//     capabilities: a tree holding a set-uid file of the owner's, a
//     set-gid file of the group's or a file of the owner's with
//     security.capability is not mapped (refusePrivilegedFiles walks it,
//     bounded, before each clone; only root or the owner could add one
//     during the run, and they are the grant);
//   - device nodes: nodev, and mknod of a device needs CAP_MKNOD;
//   - file capabilities: setting security.capability needs CAP_SETFCAP;
//   - symbolic links: the plan follows a link where it grants access only
//     when root owns it (a sandbox never ran as root). A link a sandbox
//     made here is root's, so the runner marks each mapped directory
//     (sandboxWrittenXattr, a trusted.* attribute only CAP_SYS_ADMIN can
//     set or remove) before the sandbox starts, and no link under a
//     marked directory is trusted (trustedLink). A link can be moved out
//     of the marked tree by a later run that writes a directory of the
//     same mount without a mapping, so a root-owned link is also trusted
//     only where every directory above it is root's and writable by root
//     alone (writableByOthersAbove): there only a mapped sandbox, under a
//     mark, could have put it;
//   - whose identity: a call's narrower path is mapped only when its owner
//     and group are those of the operator's writable root it lies in
//     (ownerAllowed); naming another session's or user's private
//     directory inside a shared allowed one gives nothing.
//
// The operator's grant is what it always was: write access to that tree.
// A root operator who allows a root-owned directory lets sandboxes change
// root's files there (as allowing it to a regular user's tree lets them
// change that user's), and anything on the host that trusts a file because
// root owns it should not read from such a tree.
//
// Where the kernel (Linux 5.12 or newer) or the filesystem (ext4, xfs,
// btrfs, f2fs, vfat; tmpfs from 6.3; overlayfs from 5.19; not NFS, FUSE
// or ramfs) cannot map, the run is refused as before, with the reason and
// the chown that makes it work without a mapping.

// sandboxWrittenXattr marks a directory srt-mcp mapped for sandboxes: a
// root-owned link below it may have been made by one.
const sandboxWrittenXattr = "trusted.srt-mcp.sandbox-written"

// idmapRoot is one writable root mounted through an idmapped clone.
type idmapRoot struct {
	index    int      // in plan.Mounts
	slot     int      // in bwrap's ExtraFiles
	src, dst string   // as in the plan
	tree     *os.File // the clone: detached until attached in the private namespace
	point    string   // its mount point there
}

// idmapNested is a bind inside a mapped root, re-opened beneath the clone.
type idmapNested struct {
	slot     int
	root     int    // index in idmapped.roots
	rel      string // below the root
	dev, ino uint64 // the object the plan opened
}

// idmapped is a run's mapped roots and the binds inside them.
type idmapped struct {
	roots   []idmapRoot
	nested  []idmapNested
	covered map[int]bool // plan.Mounts indices of the roots and the nested binds
	opened  []*os.File   // descriptors opened beneath the clones, closed after start
}

// covers reports whether mount i of the plan is a mapped root or a bind
// inside one: bwrap reaches it through the clone, not by its host path.
func (m *idmapped) covers(i int) bool {
	return m != nil && m.covered[i]
}

// inRoot reports whether the sandbox path p lies in a mapped root.
func (m *idmapped) inRoot(p string) bool {
	if m == nil {
		return false
	}
	for _, r := range m.roots {
		if policy.Within(p, r.dst) {
			return true
		}
	}
	return false
}

// close releases the clones and what was opened beneath them (a detached
// clone is unmounted with its last descriptor).
func (m *idmapped) close() {
	if m == nil {
		return
	}
	for _, r := range m.roots {
		r.tree.Close()
	}
	for _, f := range m.opened {
		f.Close()
	}
}

// prepareIdmaps decides which writable roots of the plan the sandbox user
// u cannot write by their modes, and makes an idmapped clone of each (by
// the descriptor openSources opened). It returns nil when none needs one.
// A root it cannot map is refused, with the reason and the fix.
func prepareIdmaps(u SandboxUser, plan *Plan, ceiling *Ceiling, extra []ExtraMount, sources []*os.File, byIndex map[int]int, cache string) (*idmapped, *Error) {
	writable := map[WritableRoot]bool{}
	for _, w := range plan.Writable {
		writable[w] = true
	}
	inExtra := func(p string) bool {
		for _, e := range extra {
			if policy.Within(p, e.Dst) {
				return true
			}
		}
		return false
	}
	m := &idmapped{covered: map[int]bool{}}
	fail := func(e *Error) (*idmapped, *Error) {
		m.close()
		return nil, e
	}
	for i, mt := range plan.Mounts {
		fd, ok := byIndex[i]
		if !ok || mt.Kind != MountRW || mt.System || !writable[WritableRoot{Src: mt.Src, Dst: mt.Dst}] || inExtra(mt.Dst) || m.inRoot(mt.Dst) {
			continue
		}
		src := sources[fd-fdFirstMount]
		var st unix.Stat_t
		if err := unix.Fstat(int(src.Fd()), &st); err != nil {
			return fail(errorf(ErrCodeSandboxFailed, "stat %s: %v", mt.Src, err))
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		want := writeAccess(isDir)
		if mayAccessStat(u, &st, want) {
			continue // writable as it is: bound as before, files stay the sandbox user's
		}
		if (st.Mode>>6)&want != want && (st.Mode>>3)&want != want {
			continue // its owner and group may not write it either: a mapping gives nothing (refused later, as before)
		}
		if !ownerAllowed(ceiling, mt.Src, st.Uid, st.Gid) {
			// A caller's narrower path owned by someone else than the
			// directory the operator allowed: the sandbox would act as
			// that owner (another session's or user's private files).
			continue
		}
		refuse := func(why string) (*idmapped, *Error) {
			return fail(errorf(ErrCodeInvalidPolicy, "%s is not writable by the sandbox user %s, and srt-mcp cannot map it to that user here (%s); srt-mcp runs as root, and runs sandboxes as that unprivileged user, never as root: give it to that user (chown %s %s), run srt-mcp as a regular user, or pick another --sandbox-user", mt.Src, u, why, u, mt.Src))
		}
		if cache == "" {
			return refuse("an idmapped mount needs a mount point in srt-mcp's private cache directory, and there is none")
		}
		point, err := idmapPoint(cache, len(m.roots), isDir)
		if err != nil {
			return refuse(fmt.Sprintf("an idmapped mount needs a mount point: %v", err))
		}
		if err := refusePrivilegedFiles(src, st.Uid, st.Gid, idmapCheckLimit); err != nil {
			return refuse(err.Error())
		}
		tree, err := idmapClone(src, int(st.Uid), int(st.Gid), u, true)
		if err != nil {
			return refuse(err.Error())
		}
		if isDir {
			// Before the sandbox starts: every link it may make is made
			// under the mark.
			if err := markSandboxWritten(src, int(st.Uid)); err != nil {
				tree.Close()
				return refuse(err.Error())
			}
		}
		m.roots = append(m.roots, idmapRoot{index: i, slot: fd - 3, src: mt.Src, dst: mt.Dst, tree: tree, point: point})
		m.covered[i] = true
	}
	if len(m.roots) == 0 {
		return nil, nil
	}
	for i, mt := range plan.Mounts {
		fd, ok := byIndex[i]
		if !ok || mt.System {
			continue
		}
		for k, r := range m.roots {
			if r.index == i || !policy.Within(mt.Dst, r.dst) {
				continue
			}
			rel, err := filepath.Rel(r.dst, mt.Dst)
			if err != nil || mt.Src != filepath.Join(r.src, rel) {
				break // another object mounted over part of it: bound by its own path, as before
			}
			var st unix.Stat_t
			if err := unix.Fstat(int(sources[fd-fdFirstMount].Fd()), &st); err != nil {
				return fail(errorf(ErrCodeSandboxFailed, "stat %s: %v", mt.Src, err))
			}
			m.nested = append(m.nested, idmapNested{slot: fd - 3, root: k, rel: rel, dev: uint64(st.Dev), ino: st.Ino})
			m.covered[i] = true
			break
		}
	}
	return m, nil
}

// ownerAllowed reports whether a writable root src owned by uid and gid
// may be mapped: without a ceiling the operator named it (srt-mcp exec);
// with one, they must own the ceiling's writable root src lies in, and be
// the only ones who may write it, so that the mapping stands for the owner
// the operator allowed, never for whoever owns a subpath a caller names.
func ownerAllowed(c *Ceiling, src string, uid, gid uint32) bool {
	if c == nil {
		return true
	}
	for _, root := range c.Write {
		canon, err := filepath.EvalSymlinks(root)
		if err != nil || !policy.Within(src, canon) {
			continue
		}
		// And only where the operator's root itself is the owner's alone
		// (not group- or other-writable, not sticky): in a shared drop
		// directory (1777, as /tmp is) sessions write as themselves, and
		// a private path of the owner's there is not what was allowed.
		var st unix.Stat_t
		if unix.Stat(canon, &st) == nil && st.Uid == uid && st.Gid == gid && st.Mode&(0o022|unix.S_ISVTX) == 0 {
			return true
		}
	}
	return false
}

// idmapCheckLimit bounds the entries refusePrivilegedFiles reads in one
// tree before a run: a larger tree is refused (what it costs: runner/README).
const idmapCheckLimit = 100_000

// refusePrivilegedFiles walks the tree at src (without following a link,
// across the mounts below it, which the clone maps too) and returns an
// error naming the first file a sandbox mapped to owner and group could
// use against the host:
//   - a set-uid file of owner's, a set-gid file of group's, or a file of
//     owner's with file capabilities (security.capability), whatever its
//     mode. A write(2) or truncate clears those bits and the capabilities,
//     but a store through a shared writable mmap does not, and a chmod by
//     the owner (the sandbox, there) keeps capabilities: such a file would
//     keep its privilege with the sandbox's code in it. The seccomp filter
//     keeps a sandbox from making new ones.
//   - a file of owner's (or group-writable of group's) with more links than
//     the tree has names for it: its other name is outside the tree (a
//     package manager's store, a cache, cp -al), and a chmod and a write
//     there would change it outside the policy.
func refusePrivilegedFiles(src *os.File, owner, group uint32, limit int) error {
	var fst unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &fst); err != nil {
		return err
	}
	privileged := func(d *nofollow.Dir, name string, st nofollow.Stat) (string, error) {
		if !st.Mode.IsRegular() {
			return "", nil
		}
		if st.Mode&fs.ModeSetuid != 0 && st.UID == owner {
			return "a set-uid program of its owner", nil
		}
		if st.Mode&fs.ModeSetgid != 0 && st.GID == group {
			return "a set-gid program of its group", nil
		}
		if st.UID != owner {
			return "", nil
		}
		has, err := false, error(nil)
		if d == nil { // the root itself is this file
			has, err = nofollow.FileHasXattr(src, "security.capability")
		} else {
			has, err = d.HasXattr(name, "security.capability")
		}
		if err != nil || !has {
			return "", err
		}
		return "a file with file capabilities", nil
	}
	linked := func(st nofollow.Stat) bool {
		return st.Mode.IsRegular() && st.Nlink > 1 && (st.UID == owner || st.GID == group && st.Mode&0o020 != 0)
	}
	why := func(p, what string) error {
		return fmt.Errorf("%s is %s: a sandbox writing as its owner could rewrite it through a shared mapping and the privilege would stay; clear it (chmod u-s,g-s; setcap -r) or move the file out", printable.String(p), what)
	}
	outside := func(p string, n uint64) error {
		return fmt.Errorf("%s has %d hard links, some outside this directory (a package manager's store or cache, cp -al): a sandbox writing as its owner would change the file there too; copy it instead of linking it (pnpm --package-import-method=copy, UV_LINK_MODE=copy)", printable.String(p), n)
	}
	if fst.Mode&unix.S_IFMT != unix.S_IFDIR {
		st := nofollow.StatOf(&fst)
		what, err := privileged(nil, "", st)
		if err != nil {
			return err
		}
		if what != "" {
			return why(src.Name(), what)
		}
		if linked(st) {
			return outside(src.Name(), st.Nlink)
		}
		return nil
	}
	root, err := nofollow.ReopenDir(src)
	if err != nil {
		return err
	}
	defer root.Close()
	type links struct {
		rel         string
		seen, nlink uint64
	}
	multi := map[fileID]*links{}
	err = nofollow.WalkTreeAt(root, limit, func(d *nofollow.Dir, name, rel string, st nofollow.Stat) error {
		what, err := privileged(d, name, st)
		if err != nil {
			return err
		}
		if what != "" {
			return why(filepath.Join(src.Name(), rel), what)
		}
		if linked(st) {
			id := fileID{st.Dev, st.Ino}
			if multi[id] == nil {
				multi[id] = &links{rel: rel, nlink: st.Nlink}
			}
			multi[id].seen++
		}
		return nil
	})
	if errors.Is(err, nofollow.ErrTooMany) {
		return fmt.Errorf("it holds more than %d entries, too many to check before each run for set-uid, set-gid and file-capability programs that a sandbox writing as its owner could keep privileged", limit)
	}
	if err != nil {
		return err
	}
	for _, l := range multi {
		if l.seen < l.nlink {
			return outside(filepath.Join(src.Name(), l.rel), l.nlink)
		}
	}
	return nil
}

// fileID is a file by device and inode.
type fileID struct{ dev, ino uint64 }

// idmapPoint returns the index-th mount point (a directory, or a file for
// a file root) in <cache>/idmap, making it if needed. Only root can make
// anything there (the cache directory is checked to be root's and private),
// and the clones are attached only in the run's own mount namespace, so
// concurrent runs share these points without seeing each other's mounts.
// bwrap, as the sandbox user, must search down to them: 0711.
func idmapPoint(cache string, index int, dir bool) (string, error) {
	stage := filepath.Join(cache, "idmap")
	if err := os.Mkdir(stage, 0o711); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if err := checkRootDir(stage); err != nil {
		return "", err
	}
	kind := "d"
	if !dir {
		kind = "f"
	}
	p := filepath.Join(stage, kind+strconv.Itoa(index))
	var err error
	if dir {
		err = os.Mkdir(p, 0o711)
	} else {
		var fd int
		fd, err = unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err == nil {
			unix.Close(fd)
		}
	}
	if err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return "", err
	}
	want := uint32(unix.S_IFREG)
	if dir {
		want = unix.S_IFDIR
	}
	if st.Mode&unix.S_IFMT != want || st.Uid != 0 {
		return "", fmt.Errorf("%s is not a root-owned %s; remove it", p, map[bool]string{true: "directory", false: "file"}[dir])
	}
	return p, nil
}

// checkRootDir refuses a path that is not a root-owned directory others
// cannot write.
func checkRootDir(p string) error {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != 0 || st.Mode&0o022 != 0 {
		return fmt.Errorf("%s is not a directory of root's that only root may write; remove it", p)
	}
	return nil
}

// markSandboxWritten sets sandboxWrittenXattr on the directory src (by its
// descriptor). A directory already marked is left as it is. Where the mark
// cannot be set, a root-owned directory is not mapped: links sandboxes
// made there would be root's, and nothing would tell them apart.
func markSandboxWritten(src *os.File, owner int) error {
	p := "/proc/self/fd/" + strconv.Itoa(int(src.Fd()))
	if _, err := unix.Getxattr(p, sandboxWrittenXattr, nil); err == nil {
		return nil
	}
	err := unix.Setxattr(p, sandboxWrittenXattr, []byte("1"), 0)
	if err == nil || owner != 0 {
		// A link a sandbox makes in another user's tree is that user's,
		// never followed where access is granted: the mark is a record.
		return nil
	}
	return fmt.Errorf("its links would be root's, and it cannot be marked as written by sandboxes (setxattr %s: %v)", sandboxWrittenXattr, err)
}

// sandboxWritten reports whether the directory at path carries the mark.
// Only a root runner reads it (trusted.* is invisible to others), and only
// a root runner's sandboxes can make root-owned files.
func sandboxWritten(path string) bool {
	_, err := unix.Lgetxattr(path, sandboxWrittenXattr, nil)
	return err == nil || errors.Is(err, unix.ERANGE)
}

// idmapClone clones the tree at src (a descriptor), with the mounts below
// it when recursive (as bwrap binds), and maps it: owner and group (the
// directory's) -> u's uid and gid, nosuid, nodev.
func idmapClone(src *os.File, owner, group int, u SandboxUser, recursive bool) (*os.File, error) {
	rec := 0
	if recursive {
		rec = unix.AT_RECURSIVE
	}
	tfd, err := unix.OpenTree(int(src.Fd()), "", uint(unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|rec))
	if err != nil {
		return nil, idmapErr("open_tree", src, err)
	}
	tree := os.NewFile(uintptr(tfd), "idmapped "+src.Name())
	ns, err := mappingNamespaces.get(owner, group, u)
	if err != nil {
		tree.Close()
		return nil, fmt.Errorf("a user namespace for the mapping: %v", err)
	}
	defer ns.Close()
	attr := unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(ns.Fd()),
	}
	if err := unix.MountSetattr(tfd, "", uint(unix.AT_EMPTY_PATH|rec), &attr); err != nil {
		tree.Close()
		return nil, idmapErr("mount_setattr", src, err)
	}
	return tree, nil
}

// idmapErr words a failed idmapping call.
func idmapErr(call string, src *os.File, err error) error {
	switch {
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("idmapped mounts need Linux 5.12 or newer (%s: %v)", call, err)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("idmapped mounts are not permitted here (%s: %v; a container's seccomp profile, or no CAP_SYS_ADMIN)", call, err)
	case errors.Is(err, unix.EINVAL) && call == "mount_setattr":
		return fmt.Errorf("its filesystem (%s), or that of a mount below it, does not support idmapped mounts, or a mount below it is idmapped already (ext4, xfs, btrfs, f2fs and vfat do; tmpfs from Linux 6.3, overlayfs from 5.19; NFS, FUSE, ramfs and procfs do not)", fsName(src))
	}
	return fmt.Errorf("idmapped mount (%s): %v", call, err)
}

// fsName names the filesystem of f for messages.
func fsName(f *os.File) string {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return "unknown"
	}
	names := map[int64]string{
		unix.EXT4_SUPER_MAGIC: "ext4", unix.XFS_SUPER_MAGIC: "xfs", unix.BTRFS_SUPER_MAGIC: "btrfs",
		unix.TMPFS_MAGIC: "tmpfs", unix.RAMFS_MAGIC: "ramfs", unix.NFS_SUPER_MAGIC: "nfs",
		unix.OVERLAYFS_SUPER_MAGIC: "overlayfs", unix.FUSE_SUPER_MAGIC: "fuse", unix.MSDOS_SUPER_MAGIC: "vfat",
		unix.F2FS_SUPER_MAGIC: "f2fs", 0x2fc12fc1: "zfs",
	}
	if n, ok := names[int64(st.Type)]; ok {
		return n
	}
	return fmt.Sprintf("magic %#x", st.Type)
}

// nsCache keeps the mapping namespaces a runner made, by mapping: a pooled
// runner serves run after run, mostly for the same few sessions and
// directories, and making one costs a process (~1 ms). A namespace is
// only an id mapping; keeping its descriptor keeps nothing else alive.
type nsCache struct {
	mu sync.Mutex
	m  map[[4]int]*os.File
}

// maxCachedNamespaces bounds the descriptors a long-lived runner keeps.
const maxCachedNamespaces = 32

var mappingNamespaces nsCache

// get returns the namespace for the mapping, made if none is cached, as a
// descriptor of the caller's own to close.
func (c *nsCache) get(owner, group int, u SandboxUser) (*os.File, error) {
	key := [4]int{owner, group, u.UID, u.GID}
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.m[key]
	if !ok {
		var err error
		if f, err = mappingNamespace(owner, group, u); err != nil {
			return nil, err
		}
		if c.m == nil || len(c.m) >= maxCachedNamespaces {
			for _, old := range c.m {
				old.Close()
			}
			c.m = map[[4]int]*os.File{}
		}
		c.m[key] = f
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// mappingNamespace returns a user namespace whose only mappings are
// owner -> u.UID and group -> u.GID. Its creator is a child that never
// runs code: it stops at its exec (PTRACE_TRACEME) and is killed once the
// namespace is open. The namespace holds no process afterwards and gives
// nobody a capability; the mount only borrows its id mapping.
func mappingNamespace(owner, group int, u SandboxUser) (*os.File, error) {
	// The tracer is the thread that forks: keep it until the child is
	// gone, or a thread's exit would let the child run.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	proc, err := os.StartProcess("/proc/self/exe", []string{"srt-mcp-idmap"}, &os.ProcAttr{Sys: &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: owner, HostID: u.UID, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: group, HostID: u.GID, Size: 1}},
		Ptrace:      true,
		Pdeathsig:   syscall.SIGKILL,
	}})
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = proc.Kill()
		_, _ = proc.Wait()
	}()
	return os.Open("/proc/" + strconv.Itoa(proc.Pid) + "/ns/user")
}

// start starts cmd (bwrap) from a thread of its own in a mount namespace
// of its own, where the clones are attached at their points and the binds
// inside them re-opened beneath them; cmd.ExtraFiles then hold those
// descriptors. The thread stays until release is called, after cmd.Wait:
// the kernel sends bwrap its parent-death signal when the thread that
// started it ends. It never returns to Go's pool (it stays locked), so no
// other goroutine ever runs in that namespace.
func (m *idmapped) start(cmd *exec.Cmd) (release func(), err error) {
	res := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		if err := m.attach(cmd); err != nil {
			res <- errorf(ErrCodeSandboxFailed, "%v", err)
			return
		}
		if err := cmd.Start(); err != nil {
			res <- err
			return
		}
		res <- nil
		<-done
	}()
	if err := <-res; err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }, nil
}

// attach runs on start's locked thread.
func (m *idmapped) attach(cmd *exec.Cmd) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("a mount namespace for the idmapped mounts: %v", err)
	}
	// Nothing attached here may propagate to the host's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("private mount propagation: %v", err)
	}
	for _, r := range m.roots {
		if err := unix.MoveMount(int(r.tree.Fd()), "", unix.AT_FDCWD, r.point, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attach the idmapped %s: %v", r.src, err)
		}
		cmd.ExtraFiles[r.slot] = r.tree
	}
	for _, n := range m.nested {
		r := m.roots[n.root]
		how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
		fd, err := unix.Openat2(int(r.tree.Fd()), n.rel, &how)
		if err != nil {
			return fmt.Errorf("%s inside the idmapped %s (without following a link): %v", n.rel, r.src, err)
		}
		f := os.NewFile(uintptr(fd), filepath.Join(r.src, n.rel))
		m.opened = append(m.opened, f)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || uint64(st.Dev) != n.dev || st.Ino != n.ino {
			return fmt.Errorf("%s changed after the policy was checked", f.Name())
		}
		cmd.ExtraFiles[n.slot] = f
	}
	return nil
}

// writeAccess is the permission a writable root needs: write, and search
// for a directory.
func writeAccess(dir bool) uint32 {
	if dir {
		return 0o3
	}
	return 0o2
}

// mayAccessStat is mayAccess on a stat already taken (of the object that
// will be mounted, not of a name).
func mayAccessStat(u SandboxUser, st *unix.Stat_t, want uint32) bool {
	bits := st.Mode & 0o7
	switch {
	case int(st.Uid) == u.UID:
		bits = (st.Mode >> 6) & 0o7
	case int(st.Gid) == u.GID:
		bits = (st.Mode >> 3) & 0o7
	}
	return bits&want == want
}

// IdmapProbe reports whether the kernel and the filesystem of path (a
// directory the operator names; links followed; mounts below it left out)
// can give the default sandbox user an idmapped mount of it, as a root
// runner does for writable paths that user cannot write (nil: yes). It
// attaches nothing.
func IdmapProbe(path string) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	tree, err := idmapClone(f, int(st.Uid), int(st.Gid), DefaultSandboxUser, false)
	if err != nil {
		return err
	}
	return tree.Close()
}
