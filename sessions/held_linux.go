package sessions

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// heldUnlinked is what the session's processes hold open in its workspace
// and cache after removing the names (unlinked files, O_TMPFILE files):
// blocks the host keeps that no walk of the trees sees. A directory
// workspace has no filesystem of its own to bound them, so the quota
// counts them here. A process is the session's when it runs as the
// session's uid and /mnt/data in its root is the workspace (so the
// sandboxes of either backend, the interpreters included, and nothing
// else); each file counts once, by Charge. What a
// process maps after closing the descriptor is not seen (reading
// /proc/<pid>/map_files needs CAP_SYS_ADMIN); each such file is at most
// RLIMIT_FSIZE.
func (ss *Session) heldUnlinked() int64 {
	var ws, cache unix.Stat_t
	if unix.Stat(ss.Workspace, &ws) != nil {
		return 0
	}
	haveCache := ss.Cache != "" && unix.Stat(ss.Cache, &cache) == nil
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
	for _, pid := range names {
		if pid[0] < '0' || pid[0] > '9' {
			continue
		}
		var st unix.Stat_t
		if unix.Lstat("/proc/"+pid, &st) != nil || st.Uid != uid {
			continue
		}
		// The magic root link is the process's own root; a name below it
		// the sandbox could swap only for something else in its own view.
		if unix.Stat("/proc/"+pid+"/root"+WorkspaceMount, &st) != nil || st.Dev != ws.Dev || st.Ino != ws.Ino {
			continue
		}
		fdDir := "/proc/" + pid + "/fd"
		d, err := os.Open(fdDir)
		if err != nil {
			continue
		}
		fds, _ := d.Readdirnames(-1)
		d.Close()
		for _, fd := range fds {
			if _, err := strconv.Atoi(fd); err != nil {
				continue
			}
			if unix.Stat(fdDir+"/"+fd, &st) != nil || st.Nlink != 0 || st.Mode&unix.S_IFMT != unix.S_IFREG {
				continue
			}
			if st.Dev != ws.Dev && !(haveCache && st.Dev == cache.Dev) {
				continue
			}
			id := fileID{uint64(st.Dev), st.Ino}
			if seen[id] {
				continue
			}
			seen[id] = true
			b := st.Blocks * 512
			if st.Size > b {
				b = st.Size
			}
			held += b
		}
	}
	return held
}
