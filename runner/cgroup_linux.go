package runner

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
// just each process. The same cgroup (v2 with the cpu controller, or v1's
// cpu hierarchy) makes the sandbox one unit for the scheduler: every
// sandbox has the same weight (cpu.shares 1024, cpu.weight 100: a new
// cgroup's default), so a tenant's 40 busy processes get the CPU of one
// tenant, not of 40; the weight is work-conserving, so a sandbox alone may
// still use every core. This applies to every root run, limits or not (see
// cgroupWanted). Nothing of the command runs outside it: on cgroup v1
// the exec stage moves its own thread in (selfMove below) after the
// runner's go and before it execs the command; on v2 the runner moves the
// sandbox's PID 1 in, and the exec stage it forks inherits the cgroup.

const cgroupRoot = "/sys/fs/cgroup"

// sandboxCgroup is one execution's cgroup directories (one for v2, one per
// hierarchy for v1).
type sandboxCgroup struct {
	dirs []string
	// selfMove (cgroup v1): the exec stage moves itself in, through the
	// tasks files the runner opens (tasks, until takeTasks hands them on).
	selfMove bool
	tasks    []*os.File
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

// cgroupWanted reports whether a run with limits l gets a cgroup: as root,
// where cgroups are usable, when it has a process or memory limit to
// enforce or the cpu controller is there to share the CPU by sandbox
// rather than by process. On v1 the cpu cgroup costs a mkdir and an open
// while bwrap starts, the exec stage's self-move (~15 µs) and an rmdir
// after: within noise of a cold run on a quiet machine, ~2.7 ms under CPU
// contention, where the move and the command's exit each cross a group
// boundary (runner/README.md). On v2 a run without limits now pays PID 1's
// move (see cgroupPrep).
func cgroupWanted(l policy.Limits) bool {
	switch CgroupMode() {
	case "v1":
		return l.MaxProcesses > 0 || l.MaxMemoryBytes > 0 || v1CPU()
	case "v2":
		return l.MaxProcesses > 0 || l.MaxMemoryBytes > 0 || v2CPU()
	}
	return false
}

// newSandboxCgroup creates the cgroup for execution id with the limits of
// l; it returns nil when cgroups are not usable here.
func newSandboxCgroup(id string, l policy.Limits) (*sandboxCgroup, error) {
	mode := CgroupMode()
	if !cgroupWanted(l) {
		return nil, nil
	}
	name := "srt-mcp-" + sanitize(id)
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
		// cpu is enabled once (v2CPU; in a write of its own, as a write
		// naming one controller the kernel refuses enables none of them);
		// a sandbox's cpu.weight stays at a new cgroup's 100.
		_ = v2CPU()
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
		c.selfMove = true
		for _, h := range v1Hierarchies(l) {
			dir := filepath.Join(cgroupRoot, h, "srt-mcp", name)
			if h == "cpu" {
				// At the hierarchy's root, not under a shared parent: a
				// sandbox weighs what one process of the host weighs. Under
				// one parent of default weight, every sandbox together
				// weighed one process, and 50 busy clients on the host
				// starved 50 workspaces' interpreters (bench --load:
				// 623 -> 494 calls/s; at the root 652).
				dir = filepath.Join(cgroupRoot, h, name)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				c.remove()
				return nil, err
			}
			c.dirs = append(c.dirs, dir)
			var file, value string
			switch h {
			case "cpu":
				// cpu.shares stays at a new cgroup's 1024, the same for
				// every sandbox: nothing to write.
				continue
			case "pids":
				file, value = "pids.max", strconv.Itoa(l.MaxProcesses+processHeadroom)
			case "memory":
				file, value = "memory.limit_in_bytes", strconv.FormatInt(l.MaxMemoryBytes, 10)
			}
			if err := write(dir, file, value); err != nil {
				c.remove()
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			if h == "memory" {
				_ = write(dir, "memory.memsw.limit_in_bytes", value)
			}
		}
		// Opened here, while bwrap starts, rather than on the run's path
		// after the stage's verified message (~17 µs per file).
		if err := c.openTasks(); err != nil {
			c.remove()
			return nil, err
		}
	}
	return c, nil
}

// cgroupPrep is a sandbox's cgroup being made while bwrap starts.
//
// Moving a process between cgroups takes cgroup_threadgroup_rwsem for
// writing, which waits for an RCU grace period unless another move happened
// within the last one: 5–20 ms on this project's machines, measured, for the
// first move after an idle spell, ~20 µs for the next. The one move that
// skips that lock is a thread moving itself alone (pid 0 written to a v1
// tasks file): that is how the exec stage joins a v1 cgroup (selfMove).
// For v2, where a thread cannot leave its process's cgroup alone, the
// preparation makes a move that changes nothing (the runner into the cgroup
// it is already in) as soon as the run starts: the grace period then runs
// while bwrap builds the sandbox, and moving the sandbox's PID 1 in, once
// bwrap names it, waits for what is left of it.
type cgroupPrep struct {
	done chan struct{}
	cg   *sandboxCgroup
	err  error
}

// prepareCgroup starts making the cgroup for a run with limits l; nil when
// cgroups do not apply (see cgroupWanted). One preparation in 16 then
// sweeps the cgroups crashed runners left behind (every run did, at ~5% of
// a runner's CPU).
func prepareCgroup(id string, l policy.Limits) *cgroupPrep {
	if !cgroupWanted(l) {
		return nil
	}
	p := &cgroupPrep{done: make(chan struct{})}
	go func() {
		p.cg, p.err = newSandboxCgroup(fmt.Sprintf("%s-%d-%d", id, os.Getpid(), prepSeq.Add(1)), l)
		if p.err == nil && p.cg != nil && !p.cg.selfMove {
			warmCgroupMoves()
		}
		close(p.done)
		if rand.IntN(16) == 0 { // after the run's own need: off its path
			for _, d := range cgroupParents() {
				sweepStale(d)
			}
		}
	}()
	return p
}

var prepSeq atomic.Int64

// wait returns the prepared cgroup once it exists and the grace period the
// preparation started has passed.
func (p *cgroupPrep) wait() (*sandboxCgroup, error) {
	if p == nil {
		return nil, nil
	}
	<-p.done
	return p.cg, p.err
}

// discard removes a prepared cgroup that no sandbox joined.
func (p *cgroupPrep) discard() {
	if cg, _ := p.wait(); cg != nil {
		cg.remove()
	}
}

// warmCgroupMoves moves the calling process into the cgroup it is already
// in (pids for v1, the unified hierarchy for v2): a no-op that starts the
// kernel's grace period for cgroup moves (see cgroupPrep).
func warmCgroupMoves() {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || strings.Contains(f[2], "..") {
			continue
		}
		var dir string
		switch {
		case CgroupMode() == "v1" && f[1] == "pids":
			dir = filepath.Join(cgroupRoot, "pids", f[2])
		case CgroupMode() == "v2" && f[0] == "0" && f[1] == "":
			dir = filepath.Join(cgroupRoot, f[2])
		default:
			continue
		}
		// Only into the cgroup that lists us: with a cgroup namespace the
		// path above can name another cgroup of the mount (one above ours),
		// and this move must never take the runner anywhere.
		procs := filepath.Join(dir, "cgroup.procs")
		b, err := os.ReadFile(procs)
		pid := strconv.Itoa(os.Getpid())
		if err != nil || !slices.Contains(strings.Fields(string(b)), pid) {
			return
		}
		_ = os.WriteFile(procs, []byte(pid), 0o644)
		return
	}
}

// cgroupParents lists the directories srt-mcp makes its executions'
// cgroups in (v2, and each v1 hierarchy; v1's cpu ones at its root), for
// the sweep.
func cgroupParents() []string {
	var out []string
	for _, h := range []string{"", "pids", "memory"} {
		out = append(out, filepath.Join(cgroupRoot, h, "srt-mcp"))
	}
	return append(out, filepath.Join(cgroupRoot, "cpu"))
}

// cgroupBoundsMemory reports whether a root run's cgroup enforces l's
// memory limit: always on v2 (memory.max is written or the run fails),
// on v1 where the memory hierarchy is mounted.
func cgroupBoundsMemory(l policy.Limits) bool {
	if l.MaxMemoryBytes <= 0 {
		return false
	}
	switch CgroupMode() {
	case "v1":
		return v1Memory()
	case "v2":
		return true
	}
	return false
}

// v1Hierarchies names the v1 hierarchies a sandbox with limits l gets a
// directory in: pids for a process limit, memory for a memory limit, and
// cpu always, the last two where that hierarchy is mounted.
func v1Hierarchies(l policy.Limits) []string {
	var hs []string
	if l.MaxProcesses > 0 {
		hs = append(hs, "pids")
	}
	if l.MaxMemoryBytes > 0 && v1Memory() {
		hs = append(hs, "memory")
	}
	if v1CPU() {
		hs = append(hs, "cpu")
	}
	return hs
}

// v1Memory and v1CPU report whether v1's memory and cpu hierarchies are
// mounted (looked at once; "cpu" is often a link to "cpu,cpuacct").
var (
	v1Memory = sync.OnceValue(func() bool { return v1Mounted("memory") })
	v1CPU    = sync.OnceValue(func() bool { return v1Mounted("cpu") })
)

func v1Mounted(h string) bool {
	_, err := os.Stat(filepath.Join(cgroupRoot, h, "cgroup.procs"))
	return err == nil
}

// v2CPU enables the cpu controller for srt-mcp's cgroups on cgroup v2 (once)
// and reports whether it is on. It may not be (a realtime thread outside
// the root cgroup keeps the controller off, for one); then the sandboxes
// share the CPU as their processes do.
var v2CPU = sync.OnceValue(func() bool {
	parent := filepath.Join(cgroupRoot, "srt-mcp")
	_ = os.WriteFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"), []byte("+cpu"), 0o644)
	_ = os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+cpu"), 0o644)
	b, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
	return err == nil && slices.Contains(strings.Fields(string(b)), "cpu")
})

// selfMoves is the number of tasks files newSandboxCgroup(l) gives the
// exec stage to move itself through: one per v1 hierarchy it makes, 0 on v2
// or without cgroups.
func selfMoves(l policy.Limits) int {
	if CgroupMode() != "v1" {
		return 0
	}
	return len(v1Hierarchies(l))
}

// openTasks opens each v1 directory's tasks file for writing, for the exec
// stage: writing 0 there moves the writing thread alone, without the
// global lock a process move takes. The kernel checks the opener's
// credentials (root's), so the sandbox user's stage may use them.
func (c *sandboxCgroup) openTasks() error {
	for _, dir := range c.dirs {
		f, err := os.OpenFile(filepath.Join(dir, "tasks"), os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		c.tasks = append(c.tasks, f)
	}
	return nil
}

// takeTasks hands the open tasks files to the caller, who closes them.
func (c *sandboxCgroup) takeTasks() []*os.File {
	fs := c.tasks
	c.tasks = nil
	return fs
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

// remove deletes the cgroup directories. Right after bwrap's exit the
// kernel often still counts the sandbox's last processes in (rmdir says
// EBUSY with cgroup.procs already empty; measured: free 1–3 ms later), so
// those are retried in the background, off the run's path; a runner
// waits for them before it exits (runnerMain). What a runner killed
// meanwhile (or crashed) leaves is for sweepStale.
func (c *sandboxCgroup) remove() {
	if c == nil {
		return
	}
	for _, f := range c.takeTasks() {
		f.Close()
	}
	if busy := rmdirAll(c.dirs); len(busy) > 0 {
		cgroupRemovals.Add(1)
		go func() {
			defer cgroupRemovals.Add(-1)
			removeWhenFree(busy)
		}()
	}
}

// rmdirAll removes the directories and returns those the kernel still
// counts processes in (EBUSY).
func rmdirAll(dirs []string) []string {
	var busy []string
	for _, dir := range dirs {
		if err := os.Remove(dir); errors.Is(err, unix.EBUSY) {
			busy = append(busy, dir)
		}
	}
	return busy
}

// removeWhenFree retries rmdir of dirs for up to about four seconds.
func removeWhenFree(dirs []string) {
	for wait := time.Millisecond; len(dirs) > 0 && wait < 4*time.Second; wait *= 2 {
		time.Sleep(wait)
		dirs = rmdirAll(dirs)
	}
}

// sweepStale removes empty execution cgroups left by crashed runners. A
// cgroup another runner has just made is empty too until its sandbox moves
// in, so only those older than a minute go; and one whose runner lives is
// that runner's to remove: on v1 a pre-started sandbox's cgroups stay
// empty while it waits (its exec stage moves in at go), however long.
func sweepStale(parent string) {
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "srt-mcp-") {
			continue
		}
		if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < time.Minute {
			continue
		}
		if pid := cgroupRunner(e.Name()); pid > 0 && pidExists(pid) {
			continue
		}
		_ = os.Remove(filepath.Join(parent, e.Name())) // EBUSY while in use
	}
}

// cgroupRunner is the pid of the runner that made the cgroup called name
// ("srt-mcp-ID-PID-SEQ", see prepareCgroup), 0 if the name has none.
func cgroupRunner(name string) int {
	f := strings.Split(name, "-")
	if len(f) < 4 {
		return 0
	}
	if _, err := strconv.Atoi(f[len(f)-1]); err != nil {
		return 0
	}
	pid, err := strconv.Atoi(f[len(f)-2])
	if err != nil {
		return 0
	}
	return pid
}

// pidExists tells whether a process pid exists (any owner).
func pidExists(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// present reports whether every directory of the cgroup still exists.
func (c *sandboxCgroup) present() bool {
	if c == nil {
		return true
	}
	for _, d := range c.dirs {
		if _, err := os.Stat(d); err != nil {
			return false
		}
	}
	return true
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
