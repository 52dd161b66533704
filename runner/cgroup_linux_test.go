package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWarmCgroupMovesStaysPut: the no-op move that starts the kernel's grace
// period must leave the runner where it is, also when a cgroup namespace
// makes /proc/self/cgroup name a path the mount resolves elsewhere (here:
// "/" for a process in a child cgroup, which the host's mount resolves to
// the root cgroup, outside every limit).
func TestWarmCgroupMovesStaysPut(t *testing.T) {
	if os.Getenv("SRT_WARM_HELPER") != "" {
		warmCgroupMoves()
		fmt.Println("warmed")
		time.Sleep(200 * time.Millisecond) // checked from outside meanwhile
		return
	}
	if CgroupMode() != "v1" && CgroupMode() != "v2" {
		t.Skip("needs root and a writable cgroup hierarchy")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare(1)")
	}
	parent := filepath.Join(cgroupRoot, "srt-mcp")
	if CgroupMode() == "v1" {
		parent = filepath.Join(cgroupRoot, "pids", "srt-mcp")
	}
	dir := filepath.Join(parent, fmt.Sprintf("warm-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(dir)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A shell joins the child cgroup, then enters a new cgroup namespace
	// (rooted at that cgroup) and runs the helper.
	script := fmt.Sprintf("echo $$ > %s/cgroup.procs && exec %s --cgroup %s -test.run '^TestWarmCgroupMovesStaysPut$'", dir, unshare, self)
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = append(os.Environ(), "SRT_WARM_HELPER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := out.Read(buf)
	if !strings.Contains(string(buf[:n]), "warmed") {
		_ = cmd.Wait()
		t.Skipf("the helper did not run in a cgroup namespace (%q)", buf[:n])
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
	_ = cmd.Wait()
	if err != nil {
		t.Fatal(err)
	}
	want := "/srt-mcp/" + filepath.Base(dir)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && ((CgroupMode() == "v1" && f[1] == "pids") || (CgroupMode() == "v2" && f[0] == "0")) {
			if f[2] != want {
				t.Fatalf("the warm-up moved the process from %s to %s", want, f[2])
			}
			return
		}
	}
	t.Fatalf("no pids cgroup line in %q", b)
}

// TestCgroupRemovedAfterRun: a run's cgroups go soon after it ends, also
// when rmdir at bwrap's exit meets a kernel that still counts the sandbox
// in; they used to stay for the minute-old sweep, one per run, and every
// sweep then walked them all (6.6% of a pooled runner's CPU under load).
func TestCgroupRemovedAfterRun(t *testing.T) {
	requireBwrap(t)
	if CgroupMode() == "" {
		t.Skip("needs root and a writable cgroup hierarchy")
	}
	p := NewPool("", "", 1)
	defer p.Close()
	id := fmt.Sprintf("cgroup-gone-%d", os.Getpid())
	for i := 0; i < 6; i++ {
		var c collector
		s := testSpec(t, "/bin/true")
		s.ID = id
		h, err := p.Start(s, c.sink)
		if err != nil {
			t.Fatal(err)
		}
		h.Wait()
		if _, _, end := c.check(t); end.Type != EventExit || end.ExitCode != 0 {
			t.Fatalf("run %d: %+v", i, end)
		}
	}
	left := func() []string {
		var out []string
		for _, parent := range cgroupParents() {
			m, _ := filepath.Glob(filepath.Join(parent, "srt-mcp-"+id+"-*"))
			out = append(out, m...)
		}
		return out
	}
	deadline := time.Now().Add(3 * time.Second)
	for len(left()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("cgroups of finished runs are still there: %v", left())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCgroupHoldsTheCommand: as root, the command and what it starts are
// in the run's cgroups (on v1 the exec stage moved its own thread in before
// exec), so the process limit holds although uid 0 ignores RLIMIT_NPROC.
func TestCgroupHoldsTheCommand(t *testing.T) {
	if CgroupMode() == "" {
		t.Skip("needs root and a writable cgroup hierarchy")
	}
	both(t, func(t *testing.T, start func(Spec, func(Event)) Handle) {
		var c collector
		s := testSpec(t, "/bin/sh", "-c", `grep -E ':(pids|memory):' /proc/self/cgroup; sh -c 'grep :pids: /proc/self/cgroup'
			for i in $(seq 60); do sleep 5 & done; kill $(jobs -p) 2>/dev/null; true`)
		s.ID = fmt.Sprintf("holds-%d", os.Getpid())
		s.Policy.Limits.MaxProcesses = 10
		h := start(s, c.sink)
		h.Wait()
		out, errs, end := c.check(t)
		if end.Type != EventExit {
			t.Fatalf("%+v %s", end, errs)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		want := 2 // pids and memory (v1), or the one v2 line
		if CgroupMode() == "v2" {
			want = 1
		}
		for _, l := range lines[:want+1] {
			if !strings.Contains(l, "/srt-mcp-"+s.ID+"-") {
				t.Errorf("the command or its child is outside the run's cgroup: %q\n%s", l, out)
			}
		}
		if !strings.Contains(errs, "fork") && !strings.Contains(errs, "Resource temporarily unavailable") {
			t.Errorf("60 processes started under a limit of 10: stderr %q", errs)
		}
	})
}

// requireCPUCgroup skips a test where sandboxes get no cpu cgroup (not
// root, no writable cgroups, or no cpu controller).
func requireCPUCgroup(t *testing.T) {
	t.Helper()
	switch CgroupMode() {
	case "v1":
		if !v1CPU() {
			t.Skip("needs cgroup v1's cpu hierarchy")
		}
	case "v2":
		if !v2CPU() {
			t.Skip("needs cgroup v2's cpu controller")
		}
	default:
		t.Skip("needs root and a writable cgroup hierarchy")
	}
}

// cpuCgroupOf returns the cpu cgroup a /proc/<pid>/cgroup text names (v1's
// cpu hierarchy, often "cpu,cpuacct"; on v2 the one unified line).
func cpuCgroupOf(procCgroup string) string {
	for _, line := range strings.Split(procCgroup, "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if CgroupMode() == "v2" && f[0] == "0" && f[1] == "" {
			return f[2]
		}
		if CgroupMode() == "v1" && slices.Contains(strings.Split(f[1], ","), "cpu") {
			return f[2]
		}
	}
	return ""
}

// TestCgroupHoldsTheCPU: as root, the command and what it starts are in
// the run's cpu cgroup, with or without a process or memory limit (the
// exec stage moved its own thread in on v1), so the scheduler shares the
// CPU between sandboxes, not between their processes.
func TestCgroupHoldsTheCPU(t *testing.T) {
	requireCPUCgroup(t)
	both(t, func(t *testing.T, start func(Spec, func(Event)) Handle) {
		for _, limited := range []bool{true, false} {
			var c collector
			s := testSpec(t, "/bin/sh", "-c", `cat /proc/self/cgroup; echo --; sh -c 'cat /proc/self/cgroup'`)
			s.ID = fmt.Sprintf("cpu-%d", os.Getpid())
			if !limited {
				s.Policy.Limits.MaxProcesses, s.Policy.Limits.MaxMemoryBytes = 0, 0
			}
			h := start(s, c.sink)
			h.Wait()
			out, errs, end := c.check(t)
			if end.Type != EventExit || end.ExitCode != 0 {
				t.Fatalf("limited=%v: %+v %s", limited, end, errs)
			}
			parts := strings.Split(out, "--\n")
			if len(parts) != 2 {
				t.Fatalf("limited=%v: output %q", limited, out)
			}
			for i, who := range []string{"the command", "its child"} {
				if got := cpuCgroupOf(parts[i]); !strings.HasPrefix(got, "/srt-mcp-"+s.ID+"-") {
					t.Errorf("limited=%v: %s is in cpu cgroup %q, not the run's\n%s", limited, who, got, parts[i])
				}
			}
		}
	})
}

// TestCPUSharedBySandbox: two sandboxes started together on a saturated
// machine, one running four busy loops and one running one, get about the
// same CPU; sharing by process gave the first four times the second's.
// Each loop starts a session of its own: bwrap's --new-session already puts
// a sandbox in an autogroup of its own where the kernel groups by session
// (sched_autogroup_enabled), but a command may leave it with setsid.
func TestCPUSharedBySandbox(t *testing.T) {
	requireBwrap(t)
	requireCPUCgroup(t)
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("needs setsid(1)")
	}
	// The quiet sandbox can use its fair half of the machine, the busy one
	// runs four times its loops: with both, every core is busy.
	quiet := max(1, runtime.NumCPU()/2)
	busy := 4 * quiet
	loops := func(n int) string {
		return fmt.Sprintf(`p=; for i in $(seq %d); do setsid /bin/sh -c 'while :; do :; done' & p="$p $!"; done
			sleep 3; kill $p; wait; times`, n)
	}
	// CPU seconds each sandbox's loops got; on a machine so busy that the
	// two together got under a sixth of its 3 s (a few clock ticks each, too
	// few to compare), try again, then give up.
	measure := func(attempt int) []float64 {
		cpu := make([]float64, 2)
		var wg sync.WaitGroup
		for i, n := range []int{busy, quiet} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var c collector
				s := testSpec(t, "/bin/sh", "-c", loops(n))
				s.ID = fmt.Sprintf("fair-%d-%d-%d", os.Getpid(), attempt, i)
				r, err := Start(context.Background(), s, c.sink, Options{})
				if err != nil {
					t.Error(err)
					return
				}
				r.Wait()
				out, errs, end := c.check(t)
				if end.Type != EventExit || end.ExitCode != 0 {
					t.Errorf("%d loops: %+v %s", n, end, errs)
					return
				}
				// times: the shell's user and system time, then its
				// reaped children's (the loops).
				lines := strings.Split(strings.TrimSpace(out), "\n")
				m := regexp.MustCompile(`(\d+)m([\d.]+)s`).FindAllStringSubmatch(lines[len(lines)-1], -1)
				if len(m) != 2 {
					t.Errorf("%d loops: times printed %q", n, out)
					return
				}
				for _, f := range m {
					min, _ := strconv.ParseFloat(f[1], 64)
					sec, _ := strconv.ParseFloat(f[2], 64)
					cpu[i] += 60*min + sec
				}
			}()
		}
		wg.Wait()
		return cpu
	}
	var cpu []float64
	for attempt := 1; ; attempt++ {
		cpu = measure(attempt)
		if t.Failed() {
			return
		}
		if cpu[0]+cpu[1] >= 0.5*float64(runtime.NumCPU()) {
			break
		}
		t.Logf("attempt %d: the sandboxes got %.2f s and %.2f s of CPU in 3 s; the machine is too busy to compare", attempt, cpu[0], cpu[1])
		if attempt == 3 {
			t.Skip("the machine is too busy to measure the sandboxes' shares")
		}
	}
	ratio := cpu[0] / max(cpu[1], 0.01)
	t.Logf("CPU over 3 s: %d loops %.2f s, %d %.2f s (%.2fx)", busy, cpu[0], quiet, cpu[1], ratio)
	if ratio > 2 {
		t.Errorf("the sandbox with %d busy loops got %.1fx the CPU of the one with %d: shared by process, not by sandbox", busy, ratio, quiet)
	}
}
