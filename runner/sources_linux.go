package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/srt-mcp/srt-mcp/nofollow"
	"github.com/srt-mcp/srt-mcp/policy"
)

// openSources opens the source of every bind mount of the plan, in plan
// order, as O_PATH descriptors numbered from first in bwrap: the objects
// the plan checked, pinned before bwrap runs. A source the sandbox side
// could have changed (anything but the system view, /etc and /proc) is
// opened without following any link: if a checked directory was swapped
// for a symlink since, the run fails instead of mounting the link's
// target. It returns the files, the map BwrapOptions.SourceFDs wants, and
// the identities the exec stage checks again from inside.
func openSources(plan *Plan, first int) ([]*os.File, map[int]int, []mountedObject, *Error) {
	var files []*os.File
	byIndex := map[int]int{}
	var mounted []mountedObject
	fail := func(e *Error) ([]*os.File, map[int]int, []mountedObject, *Error) {
		return files, nil, nil, e
	}
	for i, m := range plan.Mounts {
		if m.Kind != MountRO && m.Kind != MountRW {
			continue
		}
		if strings.HasPrefix(m.Src, "/proc/") || m.Src == "/dev/null" {
			continue // the kernel's own objects, by path
		}
		var fd int
		var err error
		if m.System {
			fd, err = unix.Open(m.Src, unix.O_PATH|unix.O_CLOEXEC, 0)
		} else {
			fd, err = nofollow.OpenPath(m.Src)
		}
		if err != nil {
			switch {
			case errors.Is(err, nofollow.ErrSymlink):
				return fail(errorf(ErrCodeSandboxFailed, "%s became a symbolic link after the policy was checked; srt-mcp mounts nothing through a link (something changed it during start-up)", m.Src))
			case errors.Is(err, fs.ErrNotExist):
				return fail(errorf(ErrCodeSandboxFailed, "%s disappeared after the policy was checked", m.Src))
			}
			return fail(errorf(ErrCodeSandboxFailed, "cannot open %s to mount it: %v", m.Src, err))
		}
		f := os.NewFile(uintptr(fd), m.Src)
		files = append(files, f)
		byIndex[i] = first + len(files) - 1
		if !m.System {
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				return fail(errorf(ErrCodeSandboxFailed, "stat %s: %v", m.Src, err))
			}
			mounted = append(mounted, mountedObject{Src: m.Src, Dst: m.Dst, Dev: uint64(st.Dev), Ino: st.Ino})
		}
	}
	return files, byIndex, mounted, nil
}

// checkAccessAs refuses, before anything starts, a run whose writable
// paths the sandbox user cannot write or whose working directory it cannot
// enter (a root srt-mcp runs sandboxes as that user, not as root), with
// the fix in the message. Paths of extra mounts are the caller's to
// prepare (a session's workspace belongs to the sandbox user).
//
// Paths reached through an idmapped mount (mapped: a writable root the
// user could not write, and the binds inside it) are not checked here:
// bwrap finds them at their mount points in srt-mcp's cache directory,
// and the user writes there as the directory's owner.
func checkAccessAs(u SandboxUser, plan *Plan, extra []ExtraMount, mapped *idmapped) *Error {
	inExtra := func(p string) bool {
		for _, m := range extra {
			if policy.Within(p, m.Dst) {
				return true
			}
		}
		return false
	}
	fix := func(path string) string {
		return fmt.Sprintf("srt-mcp runs as root, and runs sandboxes as the unprivileged user %s, never as root: give the directory to that user (chown %s %s), run srt-mcp as a regular user, or pick another --sandbox-user", u, u, path)
	}
	// bwrap, running as u, resolves every source by path (it turns even a
	// descriptor back into one): each must be reachable by u.
	for i, m := range plan.Mounts {
		if (m.Kind != MountRO && m.Kind != MountRW) || m.System || mapped.covers(i) {
			continue
		}
		if p := unreachableBy(u, m.Src); p != "" {
			code := ErrCodeInvalidPolicy
			if m.Dst == plan.Cwd {
				code = ErrCodeInvalidCwd
			}
			return errorf(code, "%s cannot be reached by the sandbox user %s: %s is not searchable by it (srt-mcp runs as root, and runs sandboxes as that unprivileged user, never as root); use a path it can reach, let others search %s (chmod o+x), run srt-mcp as a regular user, or pick another --sandbox-user", m.Src, u, p, p)
		}
	}
	for _, w := range plan.Writable {
		if inExtra(w.Dst) || mapped.inRoot(w.Dst) {
			continue
		}
		fi, err := os.Stat(w.Src)
		if !mayAccess(u, w.Src, writeAccess(err != nil || fi.IsDir())) {
			return errorf(ErrCodeInvalidPolicy, "%s is not writable by the sandbox user %s; %s", w.Src, u, fix(w.Src))
		}
	}
	if !plan.PrivateCwd && !inExtra(plan.Cwd) && !mapped.inRoot(plan.Cwd) && !mayAccess(u, plan.Cwd, 0o1) {
		return errorf(ErrCodeInvalidCwd, "the working directory %s cannot be entered by the sandbox user %s (srt-mcp runs as root, and runs sandboxes as that unprivileged user, never as root): start from a directory it can enter (--cwd /tmp, say), run srt-mcp as a regular user, or pick another --sandbox-user", plan.Cwd, u)
	}
	return nil
}

// unreachableBy returns the first directory above path that u may not
// search, "" if u can reach path.
func unreachableBy(u SandboxUser, path string) string {
	for _, d := range ancestors(path) {
		if !mayAccess(u, d, 0o1) {
			return d
		}
	}
	return ""
}

// ancestors lists the directories above path, from "/" down.
func ancestors(path string) []string {
	var out []string
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		out = append([]string{d}, out...)
		if d == "/" || d == "." {
			return out
		}
	}
}

// mayAccess reports whether u's permission bits on path (mode bits only;
// ACLs are not consulted) include want (2 write, 1 search/execute).
func mayAccess(u SandboxUser, path string, want uint32) bool {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return true // absent or unreadable: the mount or chdir reports it
	}
	bits := st.Mode & 0o7
	switch {
	case int(st.Uid) == u.UID:
		bits = (st.Mode >> 6) & 0o7
	case int(st.Gid) == u.GID:
		bits = (st.Mode >> 3) & 0o7
	}
	return bits&want == want
}
