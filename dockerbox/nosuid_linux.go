package dockerbox

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/srt-mcp/srt-mcp/volume"
)

// mountNosuid makes dir a mount of its own with nosuid and nodev (bind it
// over itself, then remount): every bind of a path below it — the engine's
// mounts of the workspaces — inherits the flags, so a set-uid file or a
// device node there is inert in any container. A bind of dir over itself
// that is already there (a killed server's) is taken over. It returns dir
// when the mount is srt-mcp's (to unmount at shutdown), "" otherwise (an
// operator's own mount there is left as it is; the seccomp filter still
// refuses set-id modes).
func mountNosuid(dir string) string {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return ""
	}
	if dir, err := filepath.EvalSymlinks(dir); err == nil {
		switch selfBound(dir) {
		case "ours":
			_ = unix.Mount("", dir, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, "")
			return dir
		case "other":
			return ""
		}
		if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
			return ""
		}
		if err := unix.Mount("", dir, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			_ = unix.Unmount(dir, unix.MNT_DETACH)
			return ""
		}
		return dir
	}
	return ""
}

// selfBound tells what is mounted at dir: "ours" for a bind of dir over
// itself (a mount whose device is its parent mount's, not a filesystem's
// root), "other" for another mount, "" for none.
func selfBound(dir string) string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "other"
	}
	defer f.Close()
	type ent struct{ id, parent, dev, root, point string }
	var all []ent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) >= 5 {
			all = append(all, ent{fl[0], fl[1], fl[2], fl[3], fl[4]})
		}
	}
	var top *ent
	for i := range all {
		if all[i].point == dir {
			top = &all[i]
		}
	}
	if top == nil {
		return ""
	}
	for _, p := range all {
		if p.id == top.parent && p.dev == top.dev && top.root != "/" {
			return "ours"
		}
	}
	return "other"
}

func unmountNosuid(dir string) { _ = unix.Unmount(dir, unix.MNT_DETACH) }

// privateBinDir makes dir (the exec stage's directory) a small tmpfs of
// its own when the server is root: a container mounts the stage from
// there, and its mount table then shows a path inside that tmpfs, not the
// state directory's host path. It returns dir when it mounted the tmpfs
// or took over one a killed server left (to unmount when the last server
// using it stops), "" when dir stays a directory.
func privateBinDir(dir string) string {
	if os.Geteuid() != 0 {
		return ""
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return ""
	}
	if volume.Mounted(dir) {
		var st unix.Statfs_t
		if unix.Statfs(dir, &st) == nil && st.Type == unix.TMPFS_MAGIC {
			return dir
		}
		return "" // an operator's own mount
	}
	if unix.Mount("srt-mcp-bin", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0711,size=256m") != nil {
		return ""
	}
	return dir
}

// mountsUnder reports whether anything is mounted below dir (workspaces'
// own filesystems).
func mountsUnder(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			return true
		}
	}
	return false
}
