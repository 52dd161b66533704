//go:build linux

package integration

// Attacks on the exec stage a session's container keeps waiting for the
// session's next run on the Docker backend (dockerbox/prestart.go). The
// stage runs as the session's user in the session's container, so code
// of the session can reach it while another of the session's runs goes
// on: it must not be able to write the next run's configuration in, read
// what the stage holds, or break the next run by ending it. (No code of the
// session runs beside a waiting stage any more: an interactive run ends
// it, and one is started again after the run; these attacks then find
// none, or one no run claims.)

import (
	"fmt"
	"strings"
	"testing"
)

// stageFinderBrief is shell that sets $w to the pid of an exec stage
// waiting in this container (not this run's own), looking for one for 3 s:
// $w is empty when none waits beside this run.
const stageFinderBrief = `w=; for i in $(seq 60); do
  for p in /proc/[0-9]*; do
    c=$(tr '\0' ' ' < $p/cmdline 2>/dev/null)
    case "$c" in "/.srt-mcp/exec __docker-exec "*'"wait":true'*) w=${p#/proc/};; esac
  done
  [ -n "$w" ] && break; sleep 0.05
done
`

// An interactive run of the session opens the waiting stage's stdin through
// /proc and writes a run configuration of its own: the next run would be
// the attacker's command (and the real one its stdin). The stage is not
// dumpable, so /proc does not open its descriptors, its memory or its
// environment to processes of its user.
func TestHostileDockerWaitingStageInjected(t *testing.T) {
	parallel(t)
	d, sid := dockerSessionWaiting(t)
	out := interactiveRun(t, d, sid, stageFinderBrief+`[ -n "$w" ] || { echo "none done"; exit 0; }
cfg='{"v":1,"argv":["/bin/sh","-c","echo INJECTED"]}'
if printf '\000\000\000\057%s' "$cfg" > /proc/$w/fd/0 2>/dev/null; then echo wrote-stdin; fi
if cat /proc/$w/environ > /dev/null 2>&1; then echo read-environ; fi
if cat /proc/$w/mem > /dev/null 2>&1; then echo read-mem; fi
echo done`)
	if !strings.Contains(out, "done") {
		t.Fatalf("the attacking run did not get to its attempts: %q", out)
	}
	waitDockerReady(t, d)
	before := dockerStats(t, d)
	c := d.wantErrorless("execute_code", map[string]any{"session_id": sid, "command": "echo real-run"})
	if got := stdoutOf(c); got != "real-run\n" {
		t.Fatalf("the next run's output is not its own (%q); the attacker said %q", got, out)
	}
	if after := dockerStats(t, d); statOf(after, "claimed") != statOf(before, "claimed")+1 {
		t.Fatalf("the next run did not claim the stage waiting for it: %v -> %v", before, after)
	}
	for _, w := range []string{"wrote-stdin", "read-environ", "read-mem"} {
		if strings.Contains(out, w) {
			t.Fatalf("a run of the session could %s of the stage waiting for the next run: %q", w, out)
		}
	}
	t.Logf("attacker: %q; stats %v -> %v", out, before, dockerStats(t, d))
}

// Code of the session ends the waiting stage (or the one an interactive
// run ended as it started): the next run runs as if nothing had been
// there.
func TestHostileDockerWaitingStageKilled(t *testing.T) {
	parallel(t)
	d, sid := dockerSessionWaiting(t)
	out := interactiveRun(t, d, sid, stageFinderBrief+`[ -n "$w" ] && kill -9 $w && echo killed`)
	t.Logf("attacker: %q", out)
	c := d.wantErrorless("execute_code", map[string]any{"session_id": sid, "command": "echo after"})
	if got := stdoutOf(c); got != "after\n" || fmt.Sprint(c["exit_code"]) != "0" {
		t.Fatalf("the run after its stage was killed: %v", c)
	}
}

// interactiveRun runs command on a terminal in session sid and returns
// what it printed.
func interactiveRun(t *testing.T, d *dataServer, sid, command string) string {
	t.Helper()
	a := d.wantErrorless("execute_code_async", map[string]any{"session_id": sid, "interactive": true, "command": command})
	done, _ := d.call("get_execution_output", map[string]any{"execution_id": a["execution_id"], "wait": true})
	return strings.ReplaceAll(stdoutOf(done), "\r\n", "\n")
}
