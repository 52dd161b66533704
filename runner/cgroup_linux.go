package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/srt-mcp/srt-mcp/policy"
)

// Process and memory limits have two mechanisms. RLIMIT_NPROC, set inside
// the sandbox's user namespace, bounds a non-root caller's sandbox; but the
// kernel exempts uid 0 from RLIMIT_NPROC, and a root caller's sandbox runs
// as uid 0. So when srt-mcp runs as root it also puts the whole sandbox in a
// cgroup of its own (v2, or v1's pids and memory hierarchies): pids.max
// bounds the processes and the memory limit bounds the sandbox's total, not
// just each process. The processes are moved in while the exec stage waits
// for the runner's go, so nothing of the command runs outside it.

const cgroupRoot = "/sys/fs/cgroup"

// sandboxCgroup is one execution's cgroup directories (one for v2, one per
// hierarchy for v1).
type sandboxCgroup struct {
	dirs []string
}

// CgroupMode reports the mechanism runs get on this host: "v2", "v1", or
// "" when cgroups are not usable (not root, not mounted, or read-only as in
// many containers; then only the rlimits apply, and doctor says so).
func CgroupMode() string {
	cgroupOnce.Do(func() { cgroupMode = detectCgroupMode() })
	return cgroupMode
}

var (
	cgroupOnce sync.Once
	cgroupMode string
)

func detectCgroupMode() string {
	if os.Geteuid() != 0 {
		return ""
	}
	var st unix.Statfs_t
	if unix.Statfs(cgroupRoot, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		if os.MkdirAll(filepath.Join(cgroupRoot, "srt-mcp"), 0o755) == nil {
			return "v2"
		}
		return ""
	}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "pids", "cgroup.procs")); err == nil {
		if os.MkdirAll(filepath.Join(cgroupRoot, "pids", "srt-mcp"), 0o755) == nil {
			return "v1"
		}
	}
	return ""
}

// newSandboxCgroup creates the cgroup for execution id with the limits of
// l; it returns nil when cgroups are not usable here.
func newSandboxCgroup(id string, l policy.Limits) (*sandboxCgroup, error) {
	mode := CgroupMode()
	if mode == "" || (l.MaxProcesses == 0 && l.MaxMemoryBytes == 0) {
		return nil, nil
	}
	name := "srt-mcp-" + sanitize(id)
	for _, p := range []string{filepath.Join(cgroupRoot, "srt-mcp"), filepath.Join(cgroupRoot, "pids", "srt-mcp"), filepath.Join(cgroupRoot, "memory", "srt-mcp")} {
		sweepStale(p)
	}
	c := &sandboxCgroup{}
	write := func(dir, file, value string) error {
		return os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644)
	}
	switch mode {
	case "v2":
		parent := filepath.Join(cgroupRoot, "srt-mcp")
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return nil, err
		}
		_ = write(cgroupRoot, "cgroup.subtree_control", "+pids +memory")
		_ = write(parent, "cgroup.subtree_control", "+pids +memory")
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, err
		}
		c.dirs = []string{dir}
		if l.MaxProcesses > 0 {
			if err := write(dir, "pids.max", strconv.Itoa(l.MaxProcesses+processHeadroom)); err != nil {
				c.remove()
				return nil, fmt.Errorf("pids.max: %w", err)
			}
		}
		if l.MaxMemoryBytes > 0 {
			if err := write(dir, "memory.max", strconv.FormatInt(l.MaxMemoryBytes, 10)); err != nil {
				c.remove()
				return nil, fmt.Errorf("memory.max: %w", err)
			}
			_ = write(dir, "memory.swap.max", "0")
		}
	case "v1":
		if l.MaxProcesses > 0 {
			dir := filepath.Join(cgroupRoot, "pids", "srt-mcp", name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			c.dirs = append(c.dirs, dir)
			if err := write(dir, "pids.max", strconv.Itoa(l.MaxProcesses+processHeadroom)); err != nil {
				c.remove()
				return nil, fmt.Errorf("pids.max: %w", err)
			}
		}
		if l.MaxMemoryBytes > 0 {
			if _, err := os.Stat(filepath.Join(cgroupRoot, "memory", "cgroup.procs")); err == nil {
				dir := filepath.Join(cgroupRoot, "memory", "srt-mcp", name)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					c.remove()
					return nil, err
				}
				c.dirs = append(c.dirs, dir)
				if err := write(dir, "memory.limit_in_bytes", strconv.FormatInt(l.MaxMemoryBytes, 10)); err != nil {
					c.remove()
					return nil, fmt.Errorf("memory.limit_in_bytes: %w", err)
				}
				_ = write(dir, "memory.memsw.limit_in_bytes", strconv.FormatInt(l.MaxMemoryBytes, 10))
			}
		}
	}
	return c, nil
}

// add moves pids into the cgroup.
func (c *sandboxCgroup) add(pids ...int) error {
	for _, dir := range c.dirs {
		for _, pid := range pids {
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
				return fmt.Errorf("move pid %d into %s: %w", pid, dir, err)
			}
		}
	}
	return nil
}

// contains reports whether pid is in every one of the cgroup's directories.
func (c *sandboxCgroup) contains(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false
	}
	for _, dir := range c.dirs {
		if !strings.Contains(string(b), "/"+filepath.Base(dir)+"\n") {
			return false
		}
	}
	return true
}

// remove deletes the cgroup directories if the kernel has already let go
// of the last process. A dying pid namespace can take a moment; rather than
// wait for it, whatever is left is swept by the next newSandboxCgroup.
func (c *sandboxCgroup) remove() {
	if c == nil {
		return
	}
	for _, dir := range c.dirs {
		_ = os.Remove(dir)
	}
}

// sweepStale removes empty execution cgroups left by crashed runners. A
// cgroup another runner has just made is empty too until its sandbox moves
// in, so only those older than a minute go.
func sweepStale(parent string) {
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "srt-mcp-") {
			continue
		}
		if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < time.Minute {
			continue
		}
		_ = os.Remove(filepath.Join(parent, e.Name())) // EBUSY while in use
	}
}

// children lists the host pids of pid's children (the sandbox's exec stage
// is PID 1's only child at start-up).
func children(pid int) []int {
	// Each thread lists the children it forked: srt-mcp's own PID 1 is a Go
	// program, which may fork from any of its threads.
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

func sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, s)
	if s == "" {
		return "run"
	}
	return s
}
