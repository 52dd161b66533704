package dockerbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// runCgroup is one run's cgroup, made by the server under its container's
// own: the run's first process (the exec stage, waiting) is moved in before
// it does anything, so every process the run ever starts is in it, whatever
// session or process group it makes, and none can move out (the container
// cannot write cgroupfs). The server signals and kills them all from the
// host: no new process in the container is needed, so an exhausted pids
// limit or a tampered file there cannot keep a run alive.
//
// cgroup v2: one directory in the container's cgroup (cgroup.kill where the
// kernel has it). cgroup v1: one in the freezer hierarchy (to stop forking
// while it kills) and one in the pids hierarchy.
type runCgroup struct {
	dirs    []string // [0] lists the processes
	v2      bool
	freezer string // v1 freezer directory, "" if none
}

// cgroupMounts finds the cgroup2 mount and the v1 freezer and pids
// hierarchies' mounts of this host.
func cgroupMounts() (v2 string, v1 map[string]string) {
	v1 = map[string]string{}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", v1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 || pf[3] != "/" {
			continue
		}
		switch qf[0] {
		case "cgroup2":
			if v2 == "" {
				v2 = pf[4]
			}
		case "cgroup":
			for _, o := range strings.Split(qf[2], ",") {
				if o == "freezer" || o == "pids" {
					v1[o] = pf[4]
				}
			}
		}
	}
	return v2, v1
}

// newRunCgroup makes the run's cgroup beside pid's (the exec stage's, in
// its container's cgroup) and moves pid into it.
func newRunCgroup(pid int, name string) (*runCgroup, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, err
	}
	c := planRunCgroup(b, name)
	if len(c.dirs) == 0 {
		return nil, errors.New("no cgroup hierarchy to hold the run (neither cgroup v2 nor v1 freezer/pids is mounted)")
	}
	for _, d := range c.dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			c.remove()
			return nil, fmt.Errorf("run cgroup %s: %w", d, err)
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			c.remove()
			return nil, fmt.Errorf("move the run into %s: %w", d, err)
		}
	}
	return c, nil
}

// runCgroupHierarchies is how many hierarchies newRunCgroup moves a run
// into (cgroup v1: freezer and pids, one at a time): the exec stage waits
// until its /proc/self/cgroup names the run's cgroup in all of them, not
// only the first (its command would start before it is in the others).
// The hierarchies are the host's: found once, not per run.
var runCgroupHierarchies = sync.OnceValue(func() int {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 1
	}
	return max(1, len(planRunCgroup(b, "x").dirs))
})

// planRunCgroup is the run's cgroup directories beside those of a process
// whose /proc/PID/cgroup is cgroupFile (nothing made yet).
func planRunCgroup(cgroupFile []byte, name string) *runCgroup {
	v2mnt, v1mnt := cgroupMounts()
	c := &runCgroup{}
	for _, line := range strings.Split(strings.TrimSpace(string(cgroupFile)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || strings.Contains(parts[2], "..") {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "" && v2mnt != "" && len(v1mnt) == 0:
			c.v2 = true
			c.dirs = append(c.dirs, filepath.Join(v2mnt, parts[2], name))
		case parts[1] != "":
			for _, ctl := range strings.Split(parts[1], ",") {
				if m, ok := v1mnt[ctl]; ok {
					d := filepath.Join(m, parts[2], name)
					if ctl == "freezer" {
						c.freezer = d
						c.dirs = append([]string{d}, c.dirs...)
					} else {
						c.dirs = append(c.dirs, d)
					}
				}
			}
		}
	}
	return c
}

// procs lists the run's processes (host pids).
func (c *runCgroup) procs() []int {
	b, err := os.ReadFile(filepath.Join(c.dirs[0], "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// signal sends sig to every process of the run.
func (c *runCgroup) signal(sig syscall.Signal) {
	for _, p := range c.procs() {
		_ = syscall.Kill(p, sig)
	}
}

// kill ends every process of the run and returns once none is left (or
// after 5 s). Forking stops first: cgroup.kill (v2) is atomic; in v1 the
// freezer holds them all while each gets SIGKILL.
func (c *runCgroup) kill() {
	deadline := time.Now().Add(5 * time.Second)
	for len(c.procs()) > 0 && time.Now().Before(deadline) {
		switch {
		case c.v2 && os.WriteFile(filepath.Join(c.dirs[0], "cgroup.kill"), []byte("1"), 0o644) == nil:
		case c.freezer != "":
			_ = os.WriteFile(filepath.Join(c.freezer, "freezer.state"), []byte("FROZEN"), 0o644)
			for i := 0; i < 100; i++ {
				st, _ := os.ReadFile(filepath.Join(c.freezer, "freezer.state"))
				if strings.TrimSpace(string(st)) == "FROZEN" {
					break
				}
				time.Sleep(time.Millisecond)
			}
			c.signal(syscall.SIGKILL)
			_ = os.WriteFile(filepath.Join(c.freezer, "freezer.state"), []byte("THAWED"), 0o644)
		default:
			c.signal(syscall.SIGKILL)
		}
		for i := 0; i < 20 && len(c.procs()) > 0; i++ {
			time.Sleep(time.Millisecond)
		}
	}
}

// remove deletes the run's cgroup directories (empty ones only).
func (c *runCgroup) remove() {
	if c == nil {
		return
	}
	for _, d := range c.dirs {
		for i := 0; i < 50; i++ {
			if err := os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}
