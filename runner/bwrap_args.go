package runner

import (
	"strconv"
)

// BwrapOptions are the parts of the bwrap command line that do not come from
// the mount plan.
type BwrapOptions struct {
	// JSONStatusFD is the fd bwrap writes {"child-pid": N} and
	// {"exit-code": N} to; 0 omits it.
	JSONStatusFD int
	// Command is what bwrap executes inside the sandbox.
	Command []string
	// AsPID1 makes Command the sandbox's PID 1 instead of bwrap's own
	// reaper (used with srt-mcp's non-dumpable init where Landlock is
	// missing).
	AsPID1 bool
	// SourceFDs maps the index of a bind mount in plan.Mounts to the fd
	// (in bwrap) of its source, opened by the runner after the plan was
	// checked: bwrap mounts that object (--bind-fd, --ro-bind-fd), not
	// whatever the path names by then, and the command line shows no host
	// path. Binds without an fd are by path.
	SourceFDs map[int]int
}

// SandboxHostname is the host name every sandbox sees.
const SandboxHostname = "sandbox"

// BwrapArgs builds bubblewrap's arguments (without argv[0]) from a plan. It
// is pure: the same plan always gives the same argv, which testdata/ pins.
//
// The posture, in order on the command line:
//   - every namespace bwrap can unshare is new: user, pid, net, ipc, uts and
//     cgroup; nested user namespaces are disabled;
//   - --die-with-parent: the sandbox dies with the runner; PID 1 (bwrap's
//     reaper, or with AsPID1 srt-mcp's own) takes every process with it
//     when the command exits;
//   - --new-session so the command cannot push input into a terminal it
//     shares with the host (TIOCSTI); --cap-drop ALL;
//   - the mounts of the plan in plan order: bwrap applies binds left to
//     right and later binds win, so parents always come before children;
//   - --remount-ro of the root, /dev and hidden directories comes last.
//
// No environment crosses here: bwrap itself is started with an empty
// environment and PID 1 receives the command's environment over its fd.
func BwrapArgs(plan *Plan, o BwrapOptions) []string {
	a := []string{
		"--unshare-user", "--unshare-pid", "--unshare-net",
		"--unshare-ipc", "--unshare-uts", "--unshare-cgroup",
		"--disable-userns",
		"--die-with-parent", "--new-session",
	}
	if o.AsPID1 {
		a = append(a, "--as-pid-1")
	}
	a = append(a, "--cap-drop", "ALL", "--hostname", SandboxHostname)
	if o.JSONStatusFD > 0 {
		a = append(a, "--json-status-fd", strconv.Itoa(o.JSONStatusFD))
	}
	for i, m := range plan.Mounts {
		fd, byFD := o.SourceFDs[i]
		switch {
		case m.Kind == MountRO && byFD:
			a = append(a, "--ro-bind-fd", strconv.Itoa(fd), m.Dst)
		case m.Kind == MountRW && byFD:
			a = append(a, "--bind-fd", strconv.Itoa(fd), m.Dst)
		}
		switch m.Kind {
		case MountRO:
			if !byFD {
				a = append(a, "--ro-bind", m.Src, m.Dst)
			}
		case MountRW:
			if !byFD {
				a = append(a, "--bind", m.Src, m.Dst)
			}
		case MountTmpfs:
			if m.Size > 0 {
				a = append(a, "--size", strconv.FormatInt(m.Size, 10))
			}
			a = append(a, "--tmpfs", m.Dst)
		case MountHideFile:
			a = append(a, "--ro-bind", "/dev/null", m.Dst)
		case MountSymlink:
			a = append(a, "--symlink", m.Src, m.Dst)
		case MountDir:
			a = append(a, "--dir", m.Dst)
		case MountProc:
			a = append(a, "--proc", m.Dst)
		case MountDev:
			a = append(a, "--dev", m.Dst)
		case MountRemountRO:
			a = append(a, "--remount-ro", m.Dst)
		}
	}
	a = append(a, "--chdir", plan.Cwd, "--")
	return append(a, o.Command...)
}
