package runner

import (
	"io/fs"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/srt-mcp/srt-mcp/nofollow"
)

// tighten takes group and other write off the entry name the run created
// or changed in a tree it wrote as the owner (the seccomp filter refuses
// such a chmod, but a umask of 0 still creates such files): another local
// user must not get into the owner's tree through the run. The entry is
// opened without following a link and changed by that descriptor.
func (s *sweeper) tighten(dir *nofollow.Dir, name string) {
	st, err := dir.Lstat(name)
	if err != nil || st.Mode.Perm()&0o022 == 0 || !s.changed(st) || st.Mode&fs.ModeSymlink != 0 {
		return
	}
	f, err := dir.OpenFile(name, unix.O_PATH, 0)
	if err != nil {
		return
	}
	defer f.Close()
	var fst unix.Stat_t
	if unix.Fstat(int(f.Fd()), &fst) != nil || fst.Mode&unix.S_IFMT == unix.S_IFLNK || uint64(fst.Ino) != st.Ino {
		return
	}
	// The magic link of /proc/self/fd is the object itself.
	_ = unix.Chmod("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), fst.Mode&0o7777&^0o022)
}
