//go:build !embedserver

package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/srt-mcp/srt-mcp/runner"
)

// hostChecks reports the Linux features the sandbox depends on.
func hostChecks() []check {
	var out []check
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	out = append(out, check{Name: "kernel", Status: "ok", Detail: "Linux " + unix.ByteSliceToString(uts.Release[:])})

	if p, err := runner.FindBwrap(); err != nil {
		out = append(out, check{Name: "bubblewrap", Status: "missing", Detail: "bwrap not found", Fix: "apt-get install -y bubblewrap"})
	} else {
		v, _ := exec.Command(p, "--version").Output()
		ver := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(v)), "bubblewrap "))
		if versionLess(ver, "0.8.0") {
			out = append(out, check{Name: "bubblewrap", Status: "missing", Detail: p + " " + ver + " is older than 0.8.0 (needs --disable-userns, --size)", Fix: "apt-get install -y bubblewrap (0.8.0 or newer)"})
		} else {
			out = append(out, check{Name: "bubblewrap", Status: "ok", Detail: p + " " + ver})
		}
	}

	maxNS := readInt("/proc/sys/user/max_user_namespaces")
	switch {
	case maxNS == 0:
		out = append(out, check{Name: "user namespaces", Status: "missing", Detail: "user.max_user_namespaces is 0", Fix: "sysctl -w user.max_user_namespaces=15000"})
	case os.Getuid() != 0 && readInt("/proc/sys/kernel/unprivileged_userns_clone") == 0:
		out = append(out, check{Name: "user namespaces", Status: "missing", Detail: "kernel.unprivileged_userns_clone is 0: only root can sandbox", Fix: "sysctl -w kernel.unprivileged_userns_clone=1"})
	case os.Getuid() != 0 && readInt("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1:
		out = append(out, check{Name: "user namespaces", Status: "warn", Detail: "AppArmor restricts unprivileged user namespaces (Ubuntu 24.04+); bwrap needs a profile", Fix: "install an AppArmor profile for /usr/bin/bwrap with 'userns,' or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"})
	default:
		out = append(out, check{Name: "user namespaces", Status: "ok", Detail: fmt.Sprintf("enabled (max %d)", maxNS)})
	}

	if _, ok := selfStatus("Seccomp"); ok {
		out = append(out, check{Name: "seccomp", Status: "ok", Detail: "filters supported; applied to every command (AF_UNIX/VSOCK sockets, io_uring, namespaces, mount, ptrace, keyring, bpf, perf, TIOCSTI)"})
	} else {
		out = append(out, check{Name: "seccomp", Status: "missing", Detail: "kernel without seccomp filters", Fix: "use a kernel built with CONFIG_SECCOMP_FILTER"})
	}

	if abi := runner.LandlockABI(); abi > 0 {
		out = append(out, check{Name: "landlock", Status: "ok", Detail: fmt.Sprintf("ABI %d: commands are scoped away from the sandbox's PID 1 (bwrap's reaper)", abi)})
	} else {
		out = append(out, check{Name: "landlock", Status: "warn", Detail: "not available: srt-mcp's own non-dumpable PID 1 is used instead (about 3 ms slower per run)", Fix: "boot with lsm=landlock,... (kernel 5.13+) for faster starts"})
	}

	if os.Geteuid() == 0 {
		// A root srt-mcp mounts a writable path its sandbox user cannot
		// write through an idmapped mount; the root filesystem stands in
		// for the paths an operator will allow (each is checked per run).
		if err := runner.IdmapProbe("/"); err != nil {
			out = append(out, check{Name: "idmapped mounts", Status: "warn",
				Detail: fmt.Sprintf("not available on / (%v): a writable path the sandbox user cannot write is refused", err),
				Fix:    "use Linux 5.12+ and ext4, xfs, btrfs or tmpfs (6.3+) for writable paths, or chown them to the sandbox user"})
		} else {
			out = append(out, check{Name: "idmapped mounts", Status: "ok", Detail: "a writable path the sandbox user cannot write is mounted for it as the directory's owner (on / here; other filesystems are checked per run)"})
		}
	}

	var detail string
	switch runner.CgroupMode() {
	case "v2":
		detail = "cgroup v2 per sandbox (pids.max, memory.max for the whole sandbox), plus RLIMIT_AS per process"
	case "v1":
		detail = "cgroup v1 per sandbox (pids and memory hierarchies), plus RLIMIT_AS per process"
	default:
		detail = "RLIMIT_NPROC counted inside the sandbox's user namespace and RLIMIT_AS per process (cgroups are used when srt-mcp runs as root)"
		if os.Geteuid() == 0 {
			out = append(out, check{Name: "memory and process limits", Status: "warn",
				Detail: "running as root without a writable cgroup hierarchy: the kernel exempts uid 0 from RLIMIT_NPROC, so a fork bomb is not bounded",
				Fix:    "run srt-mcp as an unprivileged user, or give it a writable /sys/fs/cgroup"})
			return out
		}
	}
	out = append(out, check{Name: "memory and process limits", Status: "ok", Detail: detail})
	return out
}

// selfStatus is the value of key in /proc/self/status (ok false when the
// kernel does not report it).
func selfStatus(key string) (string, bool) {
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(st), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

func readInt(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
}

// versionLess compares dotted versions numerically.
func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) || i < len(pb); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}
