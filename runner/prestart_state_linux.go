package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// maxPrivateEntries bounds the record of a pre-started sandbox's own
// directories: a fresh sandbox holds a handful of entries there, so more is
// something that reached it while it waited.
const maxPrivateEntries = 4096

// devNodes are the entries bwrap's --dev makes in a sandbox's /dev.
var devNodes = map[string]bool{"null": true, "zero": true, "full": true, "random": true, "urandom": true, "tty": true,
	"console": true, "pts": true, "ptmx": true, "shm": true, "fd": true, "stdin": true, "stdout": true, "stderr": true, "core": true}

// sandboxState is what a pre-started sandbox is, seen from inside by its
// exec stage: its mount table, the object at every mount's destination,
// every entry of its private directories (its tmpfs mounts and /dev), the
// processes of its pid namespace and the sockets of its network namespace.
// The stage records it once verified and compares it at go: a sandbox that
// something entered or changed while it waited (a process joining its
// namespaces, a file written through /proc/PID/root, a shared host
// directory renamed under one of its mounts, a connection to its proxy
// listeners) is not the sandbox that was verified, and is not used.
func sandboxState(cfg *initConfig) (string, error) {
	var b strings.Builder
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("read the sandbox's mount table: %v", err)
	}
	b.WriteString("mounts\n")
	b.Write(mi)
	b.WriteString("destinations\n")
	for _, d := range cfg.Dsts {
		var st unix.Stat_t
		if err := unix.Lstat(d, &st); err != nil {
			fmt.Fprintf(&b, "%s: %v\n", d, err)
			continue
		}
		fmt.Fprintf(&b, "%s %d:%d %o\n", d, st.Dev, st.Ino, st.Mode)
	}
	b.WriteString("private\n")
	// A fresh sandbox's own directories hold the mount points and
	// directories its plan made, and bwrap's /dev nodes: anything else
	// was put there by someone else, before or after the record.
	made := map[string]bool{}
	for _, d := range cfg.Dsts {
		for p := d; p != "/" && p != "."; p = filepath.Dir(p) {
			made[p] = true
		}
	}
	fresh := func(p string) bool { return made[p] || filepath.Dir(p) == "/dev" && devNodes[filepath.Base(p)] }
	n := 0
	for _, d := range cfg.Private {
		var root unix.Stat_t
		if err := unix.Lstat(d, &root); err != nil {
			fmt.Fprintf(&b, "%s: %v\n", d, err)
			continue
		}
		err := filepath.WalkDir(d, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				fmt.Fprintf(&b, "%s: %v\n", p, err)
				return nil
			}
			if n++; n > maxPrivateEntries {
				return fmt.Errorf("more than %d entries in the sandbox's own directories", maxPrivateEntries)
			}
			var st unix.Stat_t
			if err := unix.Lstat(p, &st); err != nil {
				fmt.Fprintf(&b, "%s: %v\n", p, err)
				return nil
			}
			if p != d && !fresh(p) {
				return fmt.Errorf("%s is in the sandbox's own %s, which a fresh sandbox does not have", p, d)
			}
			fmt.Fprintf(&b, "%s %d:%d %o %d %d.%d %d.%d\n", p, st.Dev, st.Ino, st.Mode, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
			if st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Dev != root.Dev {
				return fs.SkipDir // another filesystem (devpts, mqueue): its mount is in the table
			}
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	b.WriteString("processes\n")
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return "", fmt.Errorf("list the sandbox's processes: %v", err)
	}
	for _, e := range ents {
		if c := e.Name()[0]; c >= '0' && c <= '9' {
			b.WriteString(e.Name())
			b.WriteByte(' ')
		}
	}
	b.WriteString("\nsockets\n")
	// How many sockets of each kind the sandbox's network namespace has
	// (sockstat's per-namespace counts: listing /proc/net/tcp walks the
	// host's whole connection table, milliseconds), and its unix and
	// packet sockets.
	for _, f := range []string{"sockstat", "sockstat6"} {
		data, err := os.ReadFile("/proc/self/net/" + f)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("read the sandbox's sockets: %v", err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			proto, counts, _ := strings.Cut(line, ":")
			fields := strings.Fields(counts)
			for i := 0; i+1 < len(fields); i += 2 {
				if fields[i] == "inuse" {
					fmt.Fprintf(&b, "%s %s %s\n", proto, fields[i], fields[i+1])
				}
			}
		}
	}
	for _, f := range []string{"unix", "packet"} {
		data, err := os.ReadFile("/proc/self/net/" + f)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("read the sandbox's sockets: %v", err)
		}
		b.WriteString(f)
		b.WriteByte('\n')
		b.Write(data)
	}
	return b.String(), nil
}

// stateChange names the first difference between two records of
// sandboxState, for the error that discards the sandbox.
func stateChange(before, now string, err error) string {
	if err != nil {
		return err.Error()
	}
	a, b := strings.Split(before, "\n"), strings.Split(now, "\n")
	section := ""
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return fmt.Sprintf("%s: %.160q became %.160q", section, x, y)
		}
		if !strings.Contains(x, " ") && !strings.Contains(x, ":") {
			section = x
		}
	}
	return "no difference"
}
