package runner

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
		for _, parent := range []string{filepath.Join(cgroupRoot, "srt-mcp"), filepath.Join(cgroupRoot, "pids", "srt-mcp"), filepath.Join(cgroupRoot, "memory", "srt-mcp")} {
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
