//go:build linux

package integration

// A session's next run on the Docker backend claims an exec stage started
// in its container after the previous run (dockerbox/prestart.go): the
// command must not be able to tell it from a stage started for it.

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// dockerStageProbe prints what a command could tell of how its stage
// started: identity, working directory, environment, limits, privileges,
// stdin, cgroup (the run's own name and a pipe's inode masked) and the
// container's processes but the probe's own (a command line on one line:
// how many of the probe's subshells are alive is its own timing).
const dockerStageProbe = `id; pwd; env | LC_ALL=C sort | grep -v -e '^_=' -e '^SHLVL='; ulimit -a
grep -E '^(Seccomp|NoNewPrivs|Cap(Inh|Prm|Eff|Bnd|Amb)|Uid|Gid|Groups|Cpus_allowed_list)' /proc/self/status
readlink /proc/self/fd/0 | tr -d 0-9; cat /proc/self/oom_score_adj; sed 's/srt-run-[0-9a-f]*/RUN/' /proc/self/cgroup
for p in /proc/[0-9]*; do c=$(tr '\0\n' '  ' < $p/cmdline 2>/dev/null); [ -n "$c" ] && echo "$c"; done | grep -v -e oom_score_adj -e '^sed ' -e '^tr ' -e '^grep ' -e '^sort' | LC_ALL=C sort`

// dockerStats is /healthz's sandbox_pool.docker: the Docker backend's
// session runs that claimed a stage started ahead, started their own, and
// the stages waiting.
func dockerStats(t *testing.T, d *dataServer) map[string]any {
	t.Helper()
	m, _ := prestartStats(t, d.mcpServer)["docker"].(map[string]any)
	if m == nil {
		t.Fatalf("/healthz has no sandbox_pool.docker: %v", prestartStats(t, d.mcpServer))
	}
	return m
}

// waitDockerReady waits until the server counts a stage waiting.
func waitDockerReady(t *testing.T, d *dataServer) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); statOf(dockerStats(t, d), "ready") < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no exec stage waits for the session's next run: %v", dockerStats(t, d))
		}
	}
}

// dockerSessionWaiting starts a Docker-backend server that starts stages
// ahead, and a session whose first run is done, and waits until the stage
// of the session's next run waits.
func dockerSessionWaiting(t *testing.T) (*dataServer, string) {
	t.Helper()
	d := startData(t, dockerArgs(t), prestartFlags...)
	sid := d.upload("", "a.txt", "x")
	d.wantErrorless("execute_code", map[string]any{"session_id": sid, "command": "true"})
	waitDockerReady(t, d)
	return d, sid
}

func TestDockerPrestartedStageIsLikeCold(t *testing.T) {
	parallel(t)
	d := startData(t, dockerArgs(t), prestartFlags...)
	sid := d.upload("", "a.txt", "x")
	args := map[string]any{"session_id": sid, "command": dockerStageProbe, "working_directory": "/mnt/data", "environment": map[string]any{"PROBE": "on"}}
	before := dockerStats(t, d)
	cold := d.wantErrorless("execute_code", args)
	if after := dockerStats(t, d); statOf(after, "claimed") != statOf(before, "claimed") || statOf(after, "cold") <= statOf(before, "cold") {
		t.Fatalf("the session's first run did not start its own stage: %v -> %v", before, after)
	}
	waitDockerReady(t, d)
	before = dockerStats(t, d)
	claimed := d.wantErrorless("execute_code", args)
	if got := statOf(dockerStats(t, d), "claimed"); got != statOf(before, "claimed")+1 {
		t.Fatalf("the session's second run did not claim the stage started for it: %v", dockerStats(t, d))
	}
	if c, w := stdoutOf(cold), stdoutOf(claimed); c != w || !strings.Contains(c, "PROBE=on") || !strings.Contains(c, "/mnt/data\n") {
		t.Fatalf("a claimed stage differs from a cold one:\ncold:\n%s\nclaimed:\n%s", c, w)
	} else {
		t.Logf("cold and claimed alike:\n%s", c)
	}
	// Its stdin is the run's, all of it (the run's configuration came
	// first on the same stream), and a missing command is reported as one.
	waitDockerReady(t, d)
	v := d.wantErrorless("execute_code_async", map[string]any{"session_id": sid, "command": `read -r a; read -r b; echo "got $a $b"; if [ -t 0 ]; then echo tty; fi`})
	id := v["execution_id"].(string)
	if v, isErr := d.call("send_stdin", map[string]any{"execution_id": id, "input_data": "one\ntwo\n", "close_stdin": true}); isErr {
		out, _ := d.call("get_execution_output", map[string]any{"execution_id": id})
		t.Fatalf("send_stdin: %v\n%v", v, out)
	}
	done, _ := d.call("get_execution_output", map[string]any{"execution_id": id, "wait": true})
	if out := stdoutOf(done); out != "got one two\n" {
		t.Fatalf("a claimed stage's stdin: %q (%v)", out, done)
	}
	waitDockerReady(t, d)
	r, _ := d.call("execute_code", map[string]any{"session_id": sid, "command": "no-such-command-here"})
	if s := flat(r); !strings.Contains(s, "not found") {
		t.Fatalf("a missing command in a claimed stage: %s", s)
	}
	// A working directory the stage cannot enter is invalid_cwd, as in a
	// stage started for the run (below).
	waitDockerReady(t, d)
	if r, _ := d.call("execute_code", map[string]any{"session_id": sid, "command": "true", "working_directory": "/mnt/data/a.txt"}); !strings.HasPrefix(fmt.Sprint(r["error"]), "invalid_cwd") {
		t.Fatalf("a claimed stage's working directory that is a file: %s", flat(r))
	}
	if n := statOf(dockerStats(t, d), "claimed"); n < 4 {
		t.Fatalf("the later runs did not claim stages: %v", dockerStats(t, d))
	}
	// --sandbox-pool 0: none is started ahead.
	d0 := startData(t, dockerArgs(t), "--sandbox-pool", "0")
	sid0 := d0.upload("", "a.txt", "x")
	for i := 0; i < 3; i++ {
		d0.wantErrorless("execute_code", map[string]any{"session_id": sid0, "command": "true"})
		time.Sleep(300 * time.Millisecond)
	}
	if st := dockerStats(t, d0); statOf(st, "claimed") != 0 || statOf(st, "ready") != 0 {
		t.Fatalf("--sandbox-pool 0 started stages ahead: %v", st)
	}
	for _, cwd := range []string{"/mnt/data/a.txt", "/mnt/data/nope"} {
		if r, _ := d0.call("execute_code", map[string]any{"session_id": sid0, "command": "true", "working_directory": cwd}); !strings.HasPrefix(fmt.Sprint(r["error"]), "invalid_cwd") {
			t.Fatalf("a stage's own working directory %s: %s", cwd, flat(r))
		}
	}
}
