package integration

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// executionCgroups lists the cgroup directories (every v1 hierarchy, or
// v2's one) whose names carry one of ids (a run's cgroup is
// "srt-mcp-<execution id>-<runner pid>-<n>", under each hierarchy's
// srt-mcp parent).
func executionCgroups(ids []string) []string {
	var found []string
	parents := []string{"/sys/fs/cgroup/srt-mcp"}
	if hs, err := os.ReadDir("/sys/fs/cgroup"); err == nil {
		for _, h := range hs {
			parents = append(parents, filepath.Join("/sys/fs/cgroup", h.Name(), "srt-mcp"))
		}
	}
	for _, p := range parents {
		ents, _ := os.ReadDir(p)
		for _, e := range ents {
			for _, id := range ids {
				if e.IsDir() && strings.HasPrefix(e.Name(), "srt-mcp-"+id+"-") {
					found = append(found, filepath.Join(p, e.Name()))
				}
			}
		}
	}
	return found
}

// Code run during a drain cannot make the server leave its cgroups behind.
// A run's cgroup is removed when its sandbox ends; the kernel still counts
// the sandbox's last processes in for a moment (the more it forked, the
// longer), so the runner retries the rmdir in the background. A draining
// server closes its runner pool: each run gets a runner of its own, let go
// when its run ends. (Seen failing: the pool killed that runner at once,
// with its retries, and most such runs left their directories in each
// hierarchy, for a later server's sweep to find a minute on; now a runner
// let go exits by itself once its removals are done.)
func TestHostileDrainRunsLeaveNoCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxes get cgroups of their own only when the server is root")
	}
	s := startServe(t, "--backend", "native", "--drain-timeout", "60s")
	base := strings.TrimSuffix(s.url, "/mcp")
	c := sessionClient(t, s.url, "", false)
	run := executeOK(t, c)
	if out := stdoutOf(run(map[string]any{"command": "cat /proc/self/cgroup"})); !strings.Contains(out, "/srt-mcp/srt-mcp-") {
		t.Skipf("runs get no cgroup of their own here: %q", out)
	}
	var ids []string
	t.Cleanup(func() {
		for _, d := range executionCgroups(ids) {
			_ = os.Remove(d)
		}
	})
	// Keeps the drain going while the runs below are made.
	long, isErr := callTool(t, c, "execute_code_async", map[string]any{"command": "sleep 50"})
	if isErr {
		t.Fatalf("execute_code_async: %v", long)
	}
	waitRunning(t, base, 1)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if _, _, b := httpGet(t, base+"/readyz"); strings.Contains(string(b), `"draining"`) {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("the server did not start draining")
		}
	}
	time.Sleep(200 * time.Millisecond) // the drain has closed the runner pool
	for i := 0; i < 8; i++ {
		v := run(map[string]any{"command": "for i in $(seq 20); do (sleep 30 &); done; echo ran"})
		id, _ := v["execution_id"].(string)
		if id == "" || !strings.Contains(stdoutOf(v), "ran") {
			t.Fatalf("a run during the drain: %v", v)
		}
		ids = append(ids, id)
	}
	// The drain's last run ends; the server exits by itself.
	if v, isErr := callTool(t, c, "cancel_execution", map[string]any{"execution_id": long["execution_id"], "force": true}); isErr {
		t.Fatalf("cancel_execution: %v", v)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.wait() }()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the drained server did not exit")
	}
	// What a removal still retried a moment after its run is gone by now
	// (the retries stop after about four seconds).
	deadline := time.Now().Add(5 * time.Second)
	left := executionCgroups(ids)
	for len(left) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		left = executionCgroups(ids)
	}
	if len(left) > 0 {
		t.Errorf("%d cgroup directories of the %d runs made during the drain are left after the server exited: %v", len(left), len(ids), left)
	}
}
