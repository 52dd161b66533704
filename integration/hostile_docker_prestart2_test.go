//go:build linux

package integration

// More attacks on the exec stage waiting for a session's next run on the
// Docker backend (dockerbox/prestart.go): what code of the session running
// beside a waiting stage could leave in it for the next run.

import (
	"fmt"
	"testing"
	"time"
)

// An interactive run of the session stops the waiting stage (SIGSTOP: same
// user, no /proc needed) and ends. The next run must not claim the stopped
// stage and hang until its timeout: what a run did must not outlive it.
func TestHostileDockerWaitingStageStopped(t *testing.T) {
	parallel(t)
	d, sid := dockerSessionWaiting(t)
	out := interactiveRun(t, d, sid, stageFinderBrief+`if [ -n "$w" ] && kill -STOP $w; then echo stopped; else echo none; fi`)
	t.Logf("attacker: %q", out)
	start := time.Now()
	c, _ := d.call("execute_code", map[string]any{"session_id": sid, "command": "echo after", "timeout_seconds": 15})
	if got := stdoutOf(c); got != "after\n" || fmt.Sprint(c["exit_code"]) != "0" {
		t.Fatalf("the run after a run stopped the waiting stage (%s): %v", time.Since(start), c)
	}
}

// dockerTamperProbe prints the process attributes another process of the
// same user can change from outside (no ptrace: limits, nice, scheduling
// policy, CPU affinity).
const dockerTamperProbe = `cat /proc/self/limits; cut -d' ' -f19,41 /proc/self/stat; grep Cpus_allowed_list /proc/self/status`

// An interactive run of the session lowers the waiting stage's limits,
// nice and CPU set (prlimit, setpriority, sched_setaffinity need only the
// same user) and ends: the next run must be the run a cold stage gives.
func TestHostileDockerWaitingStageTampered(t *testing.T) {
	parallel(t)
	d := startData(t, dockerArgs(t), prestartFlags...)
	sid := d.upload("", "a.txt", "x")
	cold := stdoutOf(d.wantErrorless("execute_code", map[string]any{"session_id": sid, "command": dockerTamperProbe}))
	waitDockerReady(t, d)
	out := interactiveRun(t, d, sid, stageFinderBrief+`[ -n "$w" ] || { echo none; exit 0; }
python3 -c '
import os, resource, sys
w = int(sys.argv[1])
for name, f in [
    ("sigpending", lambda: resource.prlimit(w, resource.RLIMIT_SIGPENDING, (7, 7))),
    ("stack", lambda: resource.prlimit(w, resource.RLIMIT_STACK, (1 << 20, 1 << 20))),
    ("nice", lambda: os.setpriority(os.PRIO_PROCESS, w, 19)),
    ("batch", lambda: os.sched_setscheduler(w, os.SCHED_BATCH, os.sched_param(0))),
    ("cpus", lambda: os.sched_setaffinity(w, {0})),
]:
    try:
        f(); print("tampered", name)
    except OSError as e:
        print("refused", name, e)
' $w`)
	t.Logf("attacker: %q", out)
	claimed := stdoutOf(d.wantErrorless("execute_code", map[string]any{"session_id": sid, "command": dockerTamperProbe}))
	if claimed != cold {
		t.Fatalf("what a run did to the waiting stage reached the next run:\ncold:\n%s\nnext:\n%s", cold, claimed)
	}
}
