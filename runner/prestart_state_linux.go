package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
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

// stateFiles are the parts of a sandbox's state its mounts and files do
// not show, recorded as they read: its SysV IPC objects, its routes, and
// the exec stage's own rlimits and OOM score (the command inherits them).
// A process of the sandbox's uid on the host can change each of them
// while the sandbox waits, from outside (prlimit, oom_score_adj) or from
// the user namespace bwrap made, which that uid owns.
var stateFiles = []string{"/proc/sysvipc/shm", "/proc/sysvipc/msg", "/proc/sysvipc/sem",
	"/proc/net/route", "/proc/net/ipv6_route", "/proc/self/limits", "/proc/self/oom_score_adj"}

// sandboxState is what a pre-started sandbox is, seen from inside by its
// exec stage: its mount table, the object at every mount's destination,
// every entry of its private directories (its root, its tmpfs mounts and
// /dev, the terminals of its devpts), what its namespaces hold besides
// (namespaceState), the processes of its pid namespace and the sockets of
// its network namespace.
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
	fresh := func(p string) bool {
		return made[p] || filepath.Dir(p) == "/dev" && devNodes[filepath.Base(p)] || p == "/dev/pts/ptmx"
	}
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
			if p != d && st.Dev != root.Dev {
				// Another filesystem, mounted here: its mount is in the
				// table, and what it holds is a host directory's (whose
				// times are the host's) or another of these directories.
				// Only the terminals of the sandbox's devpts are looked
				// at: one opened through /proc/PID/root from outside is a
				// line to the host.
				fmt.Fprintf(&b, "%s %d:%d %o\n", p, st.Dev, st.Ino, st.Mode)
				if st.Mode&unix.S_IFMT == unix.S_IFDIR && p != "/dev/pts" {
					return fs.SkipDir
				}
				return nil
			}
			fmt.Fprintf(&b, "%s %d:%d %o %d %d.%d %d.%d\n", p, st.Dev, st.Ino, st.Mode, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	if err := namespaceState(&b); err != nil {
		return "", err
	}
	b.WriteString("processes\n")
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return "", fmt.Errorf("list the sandbox's processes: %v", err)
	}
	var pids []string
	for _, e := range ents {
		if c := e.Name()[0]; c >= '0' && c <= '9' {
			pids = append(pids, e.Name())
			b.WriteString(e.Name())
			b.WriteByte(' ')
		}
	}
	inuse := map[string]int{}
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
					inuse[proto], _ = strconv.Atoi(fields[i+1])
				}
			}
		}
	}
	// What a fresh sandbox has is known: its PID 1 and exec stage, and the
	// proxy listeners; a process or socket that joined it before the
	// record (from the user namespace its uid owns) is no part of it.
	if err := strangers(pids, cfg.PID, inuse, cfg.Proxy); err != nil {
		return "", err
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

// namespaceState records what the sandbox's namespaces hold besides its
// mounts, files, processes and sockets: its host and domain name, its
// SysV IPC objects, its network interfaces (state, addresses) and routes,
// and what the command inherits from the exec stage's thread (rlimits, OOM
// score, scheduling, CPUs and memory nodes, I/O priority).
func namespaceState(b *strings.Builder) error {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return fmt.Errorf("uname: %v", err)
	}
	fmt.Fprintf(b, "uts\n%q %q\n", unix.ByteSliceToString(u.Nodename[:]), unix.ByteSliceToString(u.Domainname[:]))
	for _, f := range stateFiles {
		data, err := os.ReadFile(f)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("read %s: %v", f, err)
		}
		b.WriteString(f)
		b.WriteByte('\n')
		b.Write(data)
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("list the sandbox's network interfaces: %v", err)
	}
	b.WriteString("interfaces\n")
	for _, i := range ifaces {
		addrs, err := i.Addrs()
		if err != nil {
			return fmt.Errorf("addresses of %s: %v", i.Name, err)
		}
		fmt.Fprintf(b, "%d %q %v %d %s %v\n", i.Index, i.Name, i.Flags, i.MTU, i.HardwareAddr, addrs)
	}
	// The thread that will exec the command (the stage is locked to it).
	stat, err := os.ReadFile("/proc/thread-self/stat")
	if err != nil {
		return fmt.Errorf("read the stage's scheduling: %v", err)
	}
	f := statFields(stat)
	if len(f) < 39 {
		return fmt.Errorf("short /proc/thread-self/stat")
	}
	// rt_priority (40), policy (41); the nice value (19) is checked at the
	// claim apart (threadNice): a root runner starts the sandbox at 19 and
	// gives it 0 back before the check.
	fmt.Fprintf(b, "sched\n%s %s\n", f[37], f[38])
	status, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		return fmt.Errorf("read the stage's status: %v", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "Cpus_allowed_list:") || strings.HasPrefix(line, "Mems_allowed_list:") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	ioprio, _, errno := unix.Syscall(unix.SYS_IOPRIO_GET, 1, 0, 0) // IOPRIO_WHO_PROCESS, this thread
	fmt.Fprintf(b, "ioprio %d %d\n", ioprio, errno)
	return nil
}

// statFields are the fields of a /proc/PID/stat line after the command's
// name (which may hold spaces and parentheses): the state is [0], the
// parent's pid [1], the nice value [16].
func statFields(stat []byte) []string {
	return strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
}

// threadNice is the calling thread's nice value (the exec stage's, which
// the command inherits).
func threadNice() (int, error) {
	stat, err := os.ReadFile("/proc/thread-self/stat")
	if err != nil {
		return 0, err
	}
	f := statFields(stat)
	if len(f) < 17 {
		return 0, fmt.Errorf("short /proc/thread-self/stat")
	}
	return strconv.Atoi(f[16])
}

// strangers checks a sandbox's processes (the names of /proc's pid
// entries) and its sockets (sockstat's in-use counts by protocol) against
// those of a fresh sandbox: PID 1 and the exec stage (stage), and the two
// proxy listeners when it has them.
func strangers(pids []string, stage int, inuse map[string]int, proxy bool) error {
	for _, p := range pids {
		if p != "1" && p != strconv.Itoa(stage) {
			return fmt.Errorf("process %s is in the sandbox, which a fresh sandbox does not have", p)
		}
	}
	for proto, n := range inuse {
		want := 0
		switch proto {
		case "FRAG", "FRAG6":
			continue // fragments being reassembled, not sockets
		case "TCP":
			if proxy {
				want = 2
			}
		}
		if n != want {
			return fmt.Errorf("%d %s sockets are in use in the sandbox, which a fresh sandbox has %d of", n, proto, want)
		}
	}
	return nil
}
