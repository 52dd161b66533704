package integration

// The Docker half of the hostile suite: the attacks on `serve --backend
// docker` that the native half does not cover (identity, process lifetime,
// cleanup, start-up, resource edges, co-tenants). Root only, like every
// Docker test (the engine's socket is root's); each test was seen failing
// on the code before its fix.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

func bgctx() context.Context { return context.Background() }

func toolReq(name string, args map[string]any) mcp.CallToolRequest {
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	return req
}

// volumes lists the engine's volumes.
func volumes() []string {
	out, _ := exec.Command("docker", "volume", "ls", "-q").Output()
	return strings.Fields(string(out))
}

func dockerArgs(t *testing.T) []string {
	t.Helper()
	args, ok := dataBackends(t)["docker"]
	if !ok {
		t.Skip("the Docker backend is not available here")
	}
	return args
}

// containerOf returns the id of a session's running container.
func containerOf(t *testing.T, sid string) string {
	t.Helper()
	out, _ := exec.Command("docker", "ps", "-q", "--no-trunc", "--filter", "label=session_id="+sid).Output()
	return strings.TrimSpace(string(out))
}

// containerProcs lists the host pids of a container's processes.
func containerProcs(cid string) []int {
	var out []int
	for _, pid := range hostPIDs() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err == nil && cid != "" && bytes.Contains(b, []byte(cid)) {
			out = append(out, pid)
		}
	}
	return out
}

func hostUID(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return -1
}

// Class 1: each session's container runs as its own unprivileged host
// uid, shared with no other session and no account (it used to be 1000
// for all).
func TestHostileDockerIdentity(t *testing.T) {
	d := startData(t, dockerArgs(t))
	a, b := d.upload("", "a.txt", "a"), d.upload("", "b.txt", "b")
	uids := map[string]int{}
	for _, sid := range []string{a, b} {
		d.python(sid, "import time; print(1)")
		cid := containerOf(t, sid)
		procs := containerProcs(cid)
		if cid == "" || len(procs) == 0 {
			t.Fatalf("no processes for %s's container %q", sid, cid)
		}
		for _, p := range procs {
			u := hostUID(p)
			if u == 0 && p == procs[0] {
				continue // docker-init may be root; the command is not
			}
			uids[sid] = u
		}
		u := uids[sid]
		if u < 0 || u == 0 || u == 1000 {
			t.Errorf("%s runs as host uid %d", sid, u)
		}
		if acct, err := user.LookupId(strconv.Itoa(u)); err == nil {
			t.Errorf("%s's uid %d is the account %q", sid, u, acct.Username)
		}
		fi, err := os.Stat(filepath.Join(d.state, "workspaces"))
		if err == nil && fi.Mode().Perm()&0o004 != 0 {
			t.Errorf("the workspaces directory is listable by others: %v", fi.Mode())
		}
	}
	if uids[a] == uids[b] {
		t.Errorf("two sessions share host uid %d", uids[a])
	}
}

// Class 2: a run's processes are gone when its end is reported, whatever
// it did: a new session, a rewritten pid file, a fork bomb that exhausts
// the container's pids.
func TestHostileDockerRunsEnd(t *testing.T) {
	d := startData(t, dockerArgs(t), "--exec-timeout-seconds", "4")
	sid := d.upload("", "a.txt", "x")
	m1 := fmt.Sprintf("%d", time.Now().UnixNano()%1000000+100000)
	d.python(sid, "import subprocess\nsubprocess.Popen(['sleep', '300."+m1+"'], start_new_session=True)\nprint('left it')")
	if p := processesWith("300." + m1); len(p) > 0 {
		t.Errorf("a process of a finished run is still running: %v", p)
	}
	m2 := fmt.Sprintf("%d", time.Now().UnixNano()%1000000+100000)
	r := d.python(sid, "import os, glob, subprocess, time\n"+
		"for f in glob.glob('/tmp/.srt-mcp-exec/*'): open(f, 'w').write('1\\n')\n"+
		"subprocess.Popen(['sleep', '300."+m2+"'], start_new_session=True)\ntime.sleep(60)")
	if r["exit_code"].(float64) != -1 {
		t.Fatalf("want a timeout: %v", r)
	}
	if p := processesWith("300." + m2); len(p) > 0 {
		t.Errorf("a timed-out run is still running: %v", p)
	}
	d.python(sid, "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass")
	cid := containerOf(t, sid)
	if n := len(containerProcs(cid)); n > 3 {
		t.Errorf("%d processes are left in the container after a fork bomb timed out", n)
	}
	if r := d.python(sid, "print('after')"); r["stdout"] != "after\n" {
		t.Fatalf("the session does not work after a fork bomb: %v", r)
	}
}

// Class 3: nothing is left behind: a container whose PID 1 died, a close
// racing the first run, a server that died.
func TestHostileDockerNothingLeft(t *testing.T) {
	d := startData(t, dockerArgs(t))
	sid := d.upload("", "a.txt", "x")
	d.python(sid, "print(1)")
	cid := containerOf(t, sid)
	out, _ := exec.Command("docker", "inspect", "--format", "{{.State.Pid}}", cid).Output()
	pid1, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	_ = syscall.Kill(pid1, syscall.SIGKILL)
	if r, isErr := d.call("run_python", map[string]any{"session_id": sid, "code": "print(2)"}); isErr {
		r2 := d.python(sid, "print(2)")
		_ = r2
		_ = r
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if out, _ := exec.Command("docker", "ps", "-aq", "--no-trunc", "--filter", "id="+cid).Output(); strings.TrimSpace(string(out)) == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the container whose PID 1 died was never removed: %s", cid)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// close_session right after a session's first run starts.
	for i := 0; i < 5; i++ {
		s := d.upload("", "b.txt", "x")
		done := make(chan struct{})
		go func() {
			defer close(done)
			d.call("run_python", map[string]any{"session_id": s, "code": "print(1)"})
		}()
		time.Sleep(time.Duration(100+50*i) * time.Millisecond)
		d.call("close_session", map[string]any{"session_id": s})
		<-done
		time.Sleep(500 * time.Millisecond)
		if out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=session_id="+s).Output(); strings.TrimSpace(string(out)) != "" {
			t.Fatalf("try %d: a closed session's container survived: %s", i, out)
		}
	}
}

// Class 3, volumes: an image that declares a VOLUME leaves no anonymous
// volume behind.
func TestHostileDockerNoVolumesLeft(t *testing.T) {
	args := dockerArgs(t)
	tag := "srt-mcp-hostile-volume:latest"
	build := exec.Command("docker", "build", "-q", "-t", tag, "-")
	build.Stdin = strings.NewReader("FROM " + dockerImage + "\nVOLUME /data\n")
	if out, err := build.CombinedOutput(); err != nil {
		t.Skipf("cannot build a derived image here: %v %s", err, out)
	}
	defer exec.Command("docker", "rmi", "-f", tag).Run()
	before := len(volumes())
	d := startData(t, append(args, "--image", tag))
	sid := d.upload("", "a.txt", "x")
	d.python(sid, "print(1)")
	d.call("close_session", map[string]any{"session_id": sid})
	time.Sleep(time.Second)
	if after := len(volumes()); after > before {
		t.Errorf("%d anonymous volumes left behind", after-before)
	}
}

// Class 5: LibreChat execs count against a bound: no container outlives
// its exec.
func TestHostileDockerLibreChatContainers(t *testing.T) {
	args := dockerArgs(t)
	s := startServe(t, append(args, "--state-dir", filepath.Join(reachableTempDir(t), "state"), "--max-sessions", "2", "--librechat-no-auth", "--warm-pool", "0")...)
	base := strings.TrimSuffix(s.url, "/mcp") + "/v1/librechat"
	for i := 0; i < 4; i++ {
		out, err := exec.Command("curl", "-sS", "-X", "POST", "-H", "Content-Type: application/json", "-d", `{"lang":"py","code":"print(1)"}`, base+"/exec").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "stdout") {
			t.Fatalf("exec %d: %v %s", i, err, out)
		}
	}
	time.Sleep(500 * time.Millisecond)
	// (The server's own start-up work, the cache template, may still run.)
	out, _ := exec.Command("docker", "ps", "--filter", "label=app=srt-mcp", "--format", `{{.ID}} {{.Label "session_id"}}`).Output()
	var left []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" && !strings.HasSuffix(line, " cache-template") {
			left = append(left, line)
		}
	}
	if len(left) > 0 {
		t.Errorf("%d containers outlive their LibreChat execs: %v", len(left), left)
	}
}

// Class 6: resource edges: a per-file size limit, a /tmp that cannot
// starve later runs, the native seccomp filter, nosuid and nodev mounts.
func TestHostileDockerResourceEdges(t *testing.T) {
	d := startData(t, dockerArgs(t), "--container-memory", "512M")
	sid := d.upload("", "a.txt", "x")
	r := d.python(sid, `
import os, socket, ctypes, errno
try:
    fd = os.open("/mnt/data/big", os.O_CREAT | os.O_WRONLY, 0o644)
    os.posix_fallocate(fd, 0, 2200 << 20)
    os.lseek(fd, (2100 << 20), 0); os.write(fd, b"x")
    print("BIG", os.fstat(fd).st_size)
except OSError as e:
    print("refused big", e.errno)
libc = ctypes.CDLL(None, use_errno=True)
print("io_uring", libc.syscall(425, 8, ctypes.c_void_p(0)), ctypes.get_errno())
try:
    socket.socket(40, socket.SOCK_STREAM); print("VSOCK")
except OSError as e:
    print("refused vsock", e.errno)
for line in open("/proc/self/mountinfo"):
    f = line.split()
    if f[4] in ("/mnt/data", "/tmp"):
        print("MOUNT", f[4], f[5])
try:
    with open("/tmp/filler", "wb") as f:
        for i in range(300):
            f.write(b"y" * (1 << 20))
    print("filled")
except OSError as e:
    print("tmp full", e.errno)
`)
	out := fmt.Sprint(r["stdout"])
	for _, bad := range []string{"BIG", "VSOCK"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s: %s", bad, out)
		}
	}
	if !strings.Contains(out, "io_uring -1 1\n") && !strings.Contains(out, "io_uring -1 38\n") {
		t.Errorf("io_uring_setup reached the kernel (want EPERM or ENOSYS): %s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "MOUNT /mnt/data") && (!strings.Contains(line, "nosuid") || !strings.Contains(line, "nodev")) {
			t.Errorf("the workspace mount lacks nosuid,nodev: %s", line)
		}
	}
	for i := 0; i < 3; i++ {
		r := d.python(sid, "x = bytearray(300 << 20); x[::4096] = b'z' * len(x[::4096]); print('ok', len(x))")
		if !strings.Contains(fmt.Sprint(r["stdout"]), "ok") {
			t.Fatalf("run %d after /tmp was filled: %v", i, r)
		}
	}
}

// Class 7: another server's containers are not ours to remove, and the
// image must be the one srt-mcp built.
func TestHostileDockerCoTenants(t *testing.T) {
	args := dockerArgs(t)
	other := filepath.Join(t.TempDir(), "another-servers-state")
	out, err := exec.Command("docker", "run", "-d", "--label", "app=srt-mcp", "--label", "srt-mcp.state-dir="+other,
		"--label", "srt-mcp.instance=12345-deadbeef", "--network", "none", dockerImage, "sleep", "300").CombinedOutput()
	if err != nil {
		t.Fatalf("staging a co-tenant: %v %s", err, out)
	}
	tenant := strings.TrimSpace(string(out))
	defer exec.Command("docker", "rm", "-f", tenant).Run()
	startData(t, args)
	if out, _ := exec.Command("docker", "ps", "-q", "--no-trunc", "--filter", "id="+tenant).Output(); strings.TrimSpace(string(out)) == "" {
		t.Error("starting a server removed a container it did not create")
	}
	// An image srt-mcp did not build: refused, with the command that builds one.
	tag := "srt-mcp-hostile-unpinned:latest"
	imp := exec.Command("docker", "import", "-", tag)
	imp.Stdin = bytes.NewReader(emptyTar())
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("docker import: %v %s", err, out)
	}
	defer exec.Command("docker", "rmi", "-f", tag).Run()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nwBin(t), "serve", "--port", strconv.Itoa(freePort(t)), "--state-dir", filepath.Join(reachableTempDir(t), "s"), "--backend", "docker", "--image", tag)
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "srt-mcp image build") {
		t.Errorf("an image srt-mcp did not build was accepted: %v %s", err, out)
	}
}

func emptyTar() []byte { return make([]byte, 1024) }

// The lifecycle: the server is killed with -9 in the middle of a run, a
// close, a fork bomb and a deep-tree removal; the next start is quick and
// leaves no container, volume or workspace behind.
func TestHostileDockerKilledServer(t *testing.T) {
	args := dockerArgs(t)
	volsBefore, _ := exec.Command("docker", "volume", "ls", "-q").Output()
	for _, scenario := range []string{"run", "writer", "close", "forkbomb", "deeptree"} {
		t.Run(scenario, func(t *testing.T) {
			state := filepath.Join(reachableTempDir(t), "state")
			d := startData(t, args, "--state-dir", state)
			sid := d.upload("", "a.txt", "x")
			switch scenario {
			case "run":
				go d.c.CallTool(bgctx(), toolReq("run_python", map[string]any{"session_id": sid, "code": "import time; time.sleep(300)"}))
				time.Sleep(1500 * time.Millisecond)
			case "writer":
				go d.c.CallTool(bgctx(), toolReq("run_python", map[string]any{"session_id": sid, "code": "import os\ni = 0\nwhile True:\n    os.makedirs('w/%d' % (i % 50), exist_ok=True)\n    open('w/%d/f%d' % (i % 50, i), 'w').close()\n    i += 1"}))
				time.Sleep(2 * time.Second)
			case "close":
				d.python(sid, "import os\nfor i in range(3000): os.makedirs('t%d/a/b/c' % i)")
				go d.c.CallTool(bgctx(), toolReq("close_session", map[string]any{"session_id": sid}))
				time.Sleep(50 * time.Millisecond)
			case "forkbomb":
				go d.c.CallTool(bgctx(), toolReq("run_python", map[string]any{"session_id": sid, "code": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"}))
				time.Sleep(2 * time.Second)
			case "deeptree":
				d.python(sid, "import os\nfd = os.open('.', os.O_RDONLY)\nfor i in range(21000):\n    os.mkdir('d', dir_fd=fd)\n    n = os.open('d', os.O_RDONLY, dir_fd=fd)\n    os.close(fd)\n    fd = n")
				go d.c.CallTool(bgctx(), toolReq("close_session", map[string]any{"session_id": sid}))
				time.Sleep(100 * time.Millisecond)
			}
			_ = d.cmd.Process.Signal(syscall.SIGKILL)
			_ = d.wait()
			start := time.Now()
			s2 := startServe(t, append([]string{"--state-dir", state}, args...)...)
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("the next start took %s", took)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				cs, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=srt-mcp.state-dir="+state).Output()
				ws := workspaceDirs(state)
				if len(strings.Fields(string(cs))) == 0 && len(ws) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after the restart: containers %q, workspaces %d (logs: %s)", cs, len(ws), s2.logs.String())
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
	volsAfter, _ := exec.Command("docker", "volume", "ls", "-q").Output()
	if len(strings.Fields(string(volsAfter))) > len(strings.Fields(string(volsBefore))) {
		t.Errorf("volumes were left behind: before %q after %q", volsBefore, volsAfter)
	}
}

// A run's command starts only once it is in every cgroup hierarchy of its
// run (cgroup v1: freezer, then pids): the exec stage went on as soon as
// the first move named its cgroup, so under load a command ran (and could
// fork) before it was in the others, and one that ended at once made the
// server's second move fail: a missing interpreter was reported
// sandbox_failed instead of command_not_found (seen in TestDataMissingPython).
func TestHostileDockerCommandStartsInEveryRunCgroup(t *testing.T) {
	parallel(t)
	d := startData(t, append(dockerArgs(t), "--sandbox-pool", "0")) // every run starts its own stage
	sid := d.upload("", "a.txt", "a")
	for i := 0; i < 15; i++ {
		out := stdoutOf(d.wantErrorless("execute_code", map[string]any{"session_id": sid, "command": "cat /proc/self/cgroup"}))
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			ctl := "," + parts[1] + ","
			inRun := strings.Contains(parts[2], "/srt-run-")
			if (strings.Contains(ctl, ",freezer,") || strings.Contains(ctl, ",pids,") || parts[1] == "" && !strings.Contains(out, "freezer")) && !inRun {
				t.Fatalf("run %d: the command started outside its run's cgroup in a hierarchy:\n%s", i, out)
			}
		}
	}
}
