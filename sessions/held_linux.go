package sessions

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/srt-mcp/srt-mcp/nofollow"
)

// heldUnlinked is what the session's processes hold in its workspace and
// cache after removing the names (unlinked files, O_TMPFILE files):
// blocks the host keeps that no walk of the trees sees. A directory
// workspace has no filesystem of its own to bound them, so the quota
// counts them here. A process is the session's when it runs as the
// session's uid and /mnt/data in its root is the workspace (so the
// sandboxes of either backend, the interpreters included, and nothing
// else). Held means open in any of its threads' file tables (a thread may
// have a table of its own: unshare(CLONE_FILES)) or mapped after the
// descriptor was closed. Each file counts once, by Charge; a mapped one
// whose size cannot be read (/proc/<pid>/map_files needs CAP_SYS_ADMIN)
// counts what is mapped of it. Not seen: a descriptor in flight in a unix
// socket's queue, held by no process (the README says so).
func (ss *Session) heldUnlinked() int64 {
	var ws, cache unix.Stat_t
	if unix.Stat(ss.Workspace, &ws) != nil {
		return 0
	}
	haveCache := ss.Cache != "" && unix.Stat(ss.Cache, &cache) == nil
	ours := func(dev uint64) bool { return dev == ws.Dev || haveCache && dev == cache.Dev }
	procs, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	names, _ := procs.Readdirnames(-1)
	procs.Close()
	// The session's processes run as its uid (a root server's sessions
	// each have their own), or as the server's. Only those are looked
	// into: another local user's process could have a mount at its
	// /mnt/data (FUSE in a user namespace of its own) that never answers.
	uid := uint32(os.Getuid())
	if ss.owner != nil {
		uid = uint32(ss.owner.UID)
	}
	seen := map[fileID]bool{}
	var held int64
	count := func(st *unix.Stat_t) {
		if st.Nlink != 0 || st.Mode&unix.S_IFMT != unix.S_IFREG || !ours(st.Dev) {
			return
		}
		id := fileID{st.Dev, st.Ino}
		if !seen[id] {
			seen[id] = true
			held += Charge(nofollow.StatOf(st))
		}
	}
	for _, pid := range names {
		if pid[0] < '0' || pid[0] > '9' {
			continue
		}
		proc := "/proc/" + pid
		var st unix.Stat_t
		if unix.Lstat(proc, &st) != nil || st.Uid != uid {
			continue
		}
		// The magic root link is the process's own root; a name below it
		// the sandbox could swap only for something else in its own view.
		if unix.Stat(proc+"/root"+WorkspaceMount, &st) != nil || st.Dev != ws.Dev || st.Ino != ws.Ino {
			continue
		}
		tids := listNumeric(proc + "/task")
		if len(tids) == 0 {
			tids = []string{pid}
		}
		for _, tid := range tids {
			fdDir := proc + "/task/" + tid + "/fd"
			for _, fd := range listNumeric(fdDir) {
				if unix.Stat(fdDir+"/"+fd, &st) == nil {
					count(&st)
				}
			}
		}
		held += heldMapped(proc, ours, seen)
	}
	return held
}

// heldMapped is what process proc maps of files with no name left on a
// device ours accepts, not in seen (which it adds them to).
func heldMapped(proc string, ours func(uint64) bool, seen map[fileID]bool) int64 {
	b, err := os.ReadFile(proc + "/maps")
	if err != nil {
		return 0
	}
	var held int64
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasSuffix(line, " (deleted)") {
			continue
		}
		// start-end perms offset major:minor inode path
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		ino, err := strconv.ParseUint(f[4], 10, 64)
		majmin := strings.SplitN(f[3], ":", 2)
		if err != nil || ino == 0 || len(majmin) != 2 {
			continue
		}
		major, err1 := strconv.ParseUint(majmin[0], 16, 32)
		minor, err2 := strconv.ParseUint(majmin[1], 16, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		dev := unix.Mkdev(uint32(major), uint32(minor))
		if !ours(dev) || seen[fileID{dev, ino}] {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(proc+"/map_files/"+f[0], &st) == nil && st.Dev == dev && st.Ino == ino {
			if st.Nlink == 0 && st.Mode&unix.S_IFMT == unix.S_IFREG {
				seen[fileID{dev, ino}] = true
				held += Charge(nofollow.StatOf(&st))
			}
			continue
		}
		// Without CAP_SYS_ADMIN: at least what is mapped of it.
		start, end, ok := strings.Cut(f[0], "-")
		lo, err1 := strconv.ParseUint(start, 16, 64)
		hi, err2 := strconv.ParseUint(end, 16, 64)
		off, err3 := strconv.ParseUint(f[2], 16, 64)
		if ok && err1 == nil && err2 == nil && err3 == nil && hi > lo {
			seen[fileID{dev, ino}] = true
			held += int64(off + hi - lo)
		}
	}
	return held
}

// listNumeric lists the numeric names in dir (pids, tids, descriptors).
func listNumeric(dir string) []string {
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	out := names[:0]
	for _, n := range names {
		if n != "" && n[0] >= '0' && n[0] <= '9' {
			out = append(out, n)
		}
	}
	return out
}
