package integration

// Hostile tests of sandboxes started ahead of their calls (--sandbox-pool):
// a pre-started sandbox waits, verified, for the next call of its shape.
// Whatever reaches it while it waits — a file put in through
// /proc/PID/root or a process joining its namespaces (what a process of
// the sandbox's uid on the host can do), a path the operator's deny rule
// would hide that another run created since, a host directory above one
// of its masks renamed by the user who owns it — must be found at the
// claim: the sandbox is discarded, and the call runs in a sandbox started
// for it, which shows none of it.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
)

// prestartFlags make a server start sandboxes ahead whatever else runs on
// the machine (the suite's other tests make it busy).
var prestartFlags = []string{"--sandbox-pool-cpu", "100"}

// prestartStats reads /healthz's sandbox_pool.
func prestartStats(t *testing.T, s *mcpServer) map[string]any {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(s.url, "/mcp") + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	pool, _ := v["sandbox_pool"].(map[string]any)
	if pool == nil {
		t.Fatalf("/healthz has no sandbox_pool: %v", v)
	}
	return pool
}

func statOf(pool map[string]any, k string) int {
	n, _ := pool[k].(float64)
	return int(n)
}

// waitingStages are the pids of the exec stages waiting in s's
// pre-started sandboxes (found under the server's process tree); it waits
// until there is at least one and the server counts as many ready (a
// stage exists before its runner has recorded the sandbox's state and said
// so; on a loaded machine a call between the two starts cold).
func waitingStages(t *testing.T, s *mcpServer) []int {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if found := stagesUnder(s.cmd.Process.Pid); len(found) > 0 && statOf(prestartStats(t, s), "ready") >= len(found) {
			return found
		}
	}
	t.Fatal("no pre-started sandbox is waiting under the server")
	return nil
}

// hostPIDs lists the pids of every process this test's /proc shows.
func hostPIDs() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// stagesUnder lists the exec stages waiting for a command under the
// process server (a stage running one has exec'd it).
func stagesUnder(server int) []int {
	var found []int
	for _, pid := range hostPIDs() {
		if cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); string(cmd) != "/proc/self/fd/6\x00__srt-exec\x00" {
			continue
		}
		for a := pid; a > 1; a = ppidOf(a) {
			if a == server {
				found = append(found, pid)
				break
			}
		}
	}
	return found
}

func ppidOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// asSandboxUser runs argv as the uid the server's sandboxes run as: the
// sandbox user for a root server, the server's own uid otherwise (what a
// process of that uid on the host can do to a waiting sandbox).
func asSandboxUser(argv ...string) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532, Groups: []uint32{}}}
	}
	return cmd
}

// executeOK is execute_code on c, which must not be an error.
func executeOK(t *testing.T, c *client.Client) func(args map[string]any) map[string]any {
	return func(args map[string]any) map[string]any {
		t.Helper()
		v, isErr := callTool(t, c, "execute_code", args)
		if isErr {
			t.Fatalf("execute_code %v: %v", args, v)
		}
		return v
	}
}

// claimDiscarded runs call and checks that it did not claim a pre-started
// sandbox, and that one was discarded (as changed, or refused as it
// started), returning the call's stdout.
func claimDiscarded(t *testing.T, s *mcpServer, call func() string) string {
	t.Helper()
	before := prestartStats(t, s)
	out := call()
	after := prestartStats(t, s)
	discarded := statOf(after, "changed") + statOf(after, "failed") + statOf(after, "unfit") -
		statOf(before, "changed") - statOf(before, "failed") - statOf(before, "unfit")
	if statOf(after, "claimed") != statOf(before, "claimed") || discarded < 1 {
		t.Fatalf("the call claimed a tampered pre-started sandbox (or none was discarded): before %v, after %v; output %q", before, after, out)
	}
	return out
}

// primed makes two calls of args' shape (the first starts its own sandbox,
// the second claims the one its runner started after it) and checks the
// second claimed one.
func primed(t *testing.T, s *mcpServer, run func(args map[string]any) map[string]any, args map[string]any) {
	t.Helper()
	run(args)
	waitingStages(t, s)
	before := statOf(prestartStats(t, s), "claimed")
	run(args)
	if got := statOf(prestartStats(t, s), "claimed"); got != before+1 {
		t.Fatalf("the second call of a shape did not claim the sandbox started for it: %v", prestartStats(t, s))
	}
}

func TestHostilePrestartFilePlantedInWaitingSandbox(t *testing.T) {
	parallel(t)
	s := startServe(t, prestartFlags...)
	c := sessionClient(t, s.url, "", false)
	run := executeOK(t, c)
	primed(t, s, run, map[string]any{"command": "true"})
	for _, pid := range waitingStages(t, s) {
		if out, err := asSandboxUser("/bin/sh", "-c", fmt.Sprintf("echo planted > /proc/%d/root/tmp/planted-by-another", pid)).CombinedOutput(); err != nil {
			t.Fatalf("plant a file in the waiting sandbox %d: %v %s", pid, err, out)
		}
	}
	out := claimDiscarded(t, s, func() string { return stdoutOf(run(map[string]any{"command": "ls -a /tmp"})) })
	if strings.Contains(out, "planted") {
		t.Fatalf("the call saw a file planted in a sandbox before its call: %q", out)
	}
}

func TestHostilePrestartProcessJoinsWaitingSandbox(t *testing.T) {
	parallel(t)
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("nsenter is not installed")
	}
	if os.Geteuid() != 0 {
		// The sandbox's network and pid namespaces belong to the user
		// namespace its uid owns, the parent of the one its processes are
		// in: nsenter, which joins the latter, cannot join them without
		// root; a process of that uid that joins the parent (ioctl
		// NS_GET_PARENT) can (runner's TestPrestartedNamespaceStateIsChecked).
		t.Skip("nsenter joins a sandbox's namespaces as root")
	}
	s := startServe(t, prestartFlags...)
	c := sessionClient(t, s.url, "", false)
	run := executeOK(t, c)
	primed(t, s, run, map[string]any{"command": "true"})
	// A process joins the waiting sandbox's pid and network namespaces and
	// opens a connection to its proxy listener, then waits there for the
	// call.
	for _, pid := range waitingStages(t, s) {
		joiner := exec.Command("nsenter", "--target", strconv.Itoa(pid), "--pid", "--net", "--",
			"python3", "-c", "import socket, time; s = socket.create_connection(('127.0.0.1', 3128)); print('joined', flush=True); time.sleep(60)")
		stdout, _ := joiner.StdoutPipe()
		if err := joiner.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = joiner.Process.Kill(); _ = joiner.Wait() })
		buf := make([]byte, 16)
		if n, _ := stdout.Read(buf); !strings.Contains(string(buf[:n]), "joined") {
			t.Fatalf("nsenter could not join the waiting sandbox %d: %q", pid, buf[:n])
		}
	}
	out := claimDiscarded(t, s, func() string {
		return stdoutOf(run(map[string]any{"command": "ls /proc | grep -c '^[0-9]'; grep -c ' 01 ' /proc/net/tcp || true"}))
	})
	if lines := strings.Fields(out); len(lines) != 2 || lines[1] != "0" {
		t.Fatalf("the call's sandbox has another's process or connection (processes, established connections): %q", out)
	}
}

// A run of another policy creates a file at a path the operator's deny
// rule hides from the next call's policy; the sandbox started for that
// call before the file existed does not mask it, and must not be used.
func TestHostilePrestartPathCreatedSince(t *testing.T) {
	parallel(t)
	shared := reachableTempDir(t)
	if os.Geteuid() == 0 {
		if err := os.Chown(shared, 65532, 65532); err != nil {
			t.Fatal(err)
		}
	}
	s := startServe(t, append([]string{"--allow-write", shared}, prestartFlags...)...)
	c := sessionClient(t, s.url, "", false)
	run := executeOK(t, c)
	secret := filepath.Join(shared, "secret.txt")
	guarded := map[string]any{"filesystem": map[string]any{"allow_write": []string{shared}, "deny_read": []string{secret}}}
	primed(t, s, run, map[string]any{"command": "true", "sandbox_config": guarded})
	waitingStages(t, s)
	// Another call, without the deny rule: a runner without a waiting
	// sandbox takes it (the pool keeps two), and the one waiting stays.
	run(map[string]any{"command": "echo s3cret > " + secret, "sandbox_config": map[string]any{"filesystem": map[string]any{"allow_write": []string{shared}}}})
	out := claimDiscarded(t, s, func() string {
		return stdoutOf(run(map[string]any{"command": "cat " + secret + " 2>&1 || true", "sandbox_config": guarded}))
	})
	if strings.Contains(out, "s3cret") {
		t.Fatalf("a call read a file its policy denies, through a sandbox started before the file existed: %q", out)
	}
}

// The user owning a directory the operator lets sandboxes read renames the
// directory under a denied subdirectory while a sandbox waits: the mask
// moves with it, and the denied path would show a new directory's files.
func TestHostilePrestartMaskRenamedAway(t *testing.T) {
	parallel(t)
	top := reachableTempDir(t)
	proj := filepath.Join(top, "proj")
	for _, d := range []string{proj, filepath.Join(proj, "private")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	owner := os.Geteuid()
	if owner == 0 {
		// Another local user's project.
		owner = 12345
		for _, d := range []string{proj, filepath.Join(proj, "private")} {
			if err := os.Chown(d, owner, owner); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := startServe(t, append([]string{"--allow-read", proj}, prestartFlags...)...)
	c := sessionClient(t, s.url, "", false)
	run := executeOK(t, c)
	private := filepath.Join(proj, "private")
	guarded := map[string]any{"filesystem": map[string]any{"allow_read": []string{proj}, "deny_read": []string{private}}}
	primed(t, s, run, map[string]any{"command": "true", "sandbox_config": guarded})
	waitingStages(t, s)
	swap := exec.Command("/bin/sh", "-c", fmt.Sprintf("mv %[1]s/private %[1]s/moved && mkdir %[1]s/private && echo s3cret > %[1]s/private/x && chmod -R a+rX %[1]s", proj))
	if os.Geteuid() == 0 {
		swap.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(owner), Gid: uint32(owner), Groups: []uint32{}}}
	}
	if out, err := swap.CombinedOutput(); err != nil {
		t.Fatalf("the owner's rename: %v %s", err, out)
	}
	out := claimDiscarded(t, s, func() string {
		return stdoutOf(run(map[string]any{"command": "cat " + private + "/x 2>&1 || true", "sandbox_config": guarded}))
	})
	if strings.Contains(out, "s3cret") {
		t.Fatalf("a call read under a denied directory through a waiting sandbox whose mask was renamed away: %q", out)
	}
}

// /healthz answers anyone (no key, any Host, cross-site): it must not say
// why a tenant's waiting sandbox was discarded, which names the tenant's
// host paths (a working directory replaced since the sandbox started, a
// mount's source, lines of its mount table).
func TestHostilePrestartDiscardReasonNotPublic(t *testing.T) {
	parallel(t)
	dir := reachableTempDir(t)
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte("alice alice-token-0123456789\nbob bob-token-0123456789abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shared := reachableTempDir(t)
	if os.Geteuid() == 0 {
		if err := os.Chown(shared, 65532, 65532); err != nil {
			t.Fatal(err)
		}
	}
	private := filepath.Join(shared, "acme-merger-7731")
	mkdir := func() {
		if err := os.Mkdir(private, 0o755); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			if err := os.Chown(private, 65532, 65532); err != nil {
				t.Fatal(err)
			}
		}
	}
	mkdir()
	s := startServe(t, append([]string{"--token-file", keys, "--allow-write", shared}, prestartFlags...)...)
	alice := sessionClient(t, s.url, "alice-token-0123456789", false)
	run := func(args map[string]any) map[string]any {
		v, isErr := callTool(t, alice, "execute_code", args)
		if isErr {
			t.Fatalf("execute_code %v: %v", args, v)
		}
		return v
	}
	args := map[string]any{"command": "true", "working_directory": private}
	primed(t, s, run, args)
	waitingStages(t, s)
	// The working directory is replaced while alice's sandbox waits.
	if err := os.Rename(private, private+".old"); err != nil {
		t.Fatal(err)
	}
	mkdir()
	claimDiscarded(t, s, func() string { return stdoutOf(run(args)) })
	resp, err := http.Get(strings.TrimSuffix(s.url, "/mcp") + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(body), "acme-merger-7731") || strings.Contains(string(body), shared) {
		t.Fatalf("/healthz tells anyone a tenant's host paths: %s", body)
	}
	if !strings.Contains(s.logs.String(), "acme-merger-7731") {
		t.Fatalf("the operator's log does not say why the sandbox was discarded: %s", s.logs.String())
	}
}

// earlyJoiner, run as the sandbox's uid on the host, waits for the runner
// (argv[1]) to start a sandbox, and as soon as its exec stage exists —
// before the stage records the sandbox's state — joins the user namespace
// the uid owns and the sandbox's pid namespace, and leaves a process there.
const earlyJoiner = `import ctypes, fcntl, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
runner = sys.argv[1]
def kids(pid):
    out = []
    try:
        for t in os.listdir("/proc/%s/task" % pid):
            with open("/proc/%s/task/%s/children" % (pid, t)) as f:
                out += f.read().split()
    except OSError:
        pass
    return out
old = set(kids(runner))
deadline = time.time() + 20
while time.time() < deadline:
    new = [k for k in kids(runner) if k not in old]
    if not new:
        continue
    while time.time() < deadline:
        pid1 = kids(new[0])
        if pid1 and kids(pid1[0]):
            break
    else:
        sys.exit("no exec stage")
    u = os.open("/proc/%s/ns/user" % pid1[0], os.O_RDONLY)
    pn = os.open("/proc/%s/ns/pid" % pid1[0], os.O_RDONLY)
    try:
        parent = fcntl.ioctl(u, 0xb702)
    except OSError:
        parent = u
    if libc.setns(parent, 0x10000000) != 0 and libc.setns(u, 0x10000000) != 0:
        sys.exit("setns user: " + os.strerror(ctypes.get_errno()))
    if libc.setns(pn, 0x20000000) != 0:
        sys.exit("setns pid: " + os.strerror(ctypes.get_errno()))
    if os.fork() == 0:
        os.setsid()
        os.execv("/bin/sleep", ["sleep", "60"])
    print("joined", flush=True)
    sys.exit(0)
sys.exit("no sandbox started")
`

// A process of the sandbox's uid on the host joins a sandbox its runner
// starts ahead of the next call in the moment between the exec stage's
// start and its record of the sandbox's state: the record had it as part
// of the sandbox, the check found nothing changed, and the next call ran
// beside it (it showed in the call's ps).
func TestHostilePrestartJoinedBeforeRecord(t *testing.T) {
	parallel(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as the sandbox user")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs python3")
	}
	s := startServe(t, prestartFlags...)
	c := sessionClient(t, s.url, "", false)
	run := executeOK(t, c)
	primed(t, s, run, map[string]any{"command": "true"})
	joined := 0
	for attempt := 0; attempt < 4; attempt++ {
		waitingStages(t, s)
		var joiners []*exec.Cmd
		for _, r := range childrenOf(s.cmd.Process.Pid) {
			j := asSandboxUser("/usr/bin/python3", "-c", earlyJoiner, strconv.Itoa(r))
			if err := j.Start(); err != nil {
				t.Fatal(err)
			}
			joiners = append(joiners, j)
		}
		time.Sleep(200 * time.Millisecond) // the joiners watch their runners
		// This call's runner starts the next sandbox after it.
		run(map[string]any{"command": "true"})
		time.Sleep(500 * time.Millisecond)
		for _, j := range joiners {
			_ = j.Process.Kill()
			if j.Wait(); j.ProcessState.ExitCode() == 0 {
				joined++ // it said so and left its process there
			}
		}
		out := stdoutOf(run(map[string]any{"command": "ps -eo comm"}))
		if strings.Contains(out, "sleep") {
			t.Fatalf("the call ran beside a process that joined its sandbox before the sandbox's record: %q", out)
		}
	}
	t.Logf("%d processes joined a sandbox before its record", joined)
	if joined == 0 {
		t.Skip("no process joined a sandbox in the moment before its record (the race was lost each time)")
	}
}

// childrenOf lists the pids of pid's children.
func childrenOf(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// Another key's call of the very same command and policy never gets the
// sandbox a runner started after alice's call: bob's call runs in a
// sandbox started for it (its PID 1 is younger than the second alice's
// waited), and alice's stays hers. (Seen failing with the tenant left out
// of the spec.)
func TestHostilePrestartOtherTenantNeverClaims(t *testing.T) {
	parallel(t)
	dir := reachableTempDir(t)
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte("alice alice-token-0123456789\nbob bob-token-0123456789abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, append([]string{"--token-file", keys}, prestartFlags...)...)
	client := func(token string) func(args map[string]any) map[string]any {
		c := sessionClient(t, s.url, token, false)
		return func(args map[string]any) map[string]any {
			v, isErr := callTool(t, c, "execute_code", args)
			if isErr {
				t.Fatalf("execute_code %v: %v", args, v)
			}
			return v
		}
	}
	alice, bob := client("alice-token-0123456789"), client("bob-token-0123456789abc")
	// The age of the sandbox's PID 1 when the command ran, in seconds.
	probe := map[string]any{"command": `awk -v up="$(cut -d' ' -f1 /proc/uptime)" '{printf "%.2f\n", up - $22/100}' /proc/1/stat`}
	primed(t, s, alice, probe)
	waitingStages(t, s)
	time.Sleep(time.Second) // alice's sandbox waits
	before := prestartStats(t, s)
	out := stdoutOf(bob(probe))
	after := prestartStats(t, s)
	if statOf(after, "claimed") != statOf(before, "claimed") {
		t.Fatalf("bob's first call claimed a sandbox (only alice's was waiting): %v -> %v", before, after)
	}
	if age, err := strconv.ParseFloat(strings.TrimSpace(out), 64); err != nil || age > 0.9 {
		t.Fatalf("bob's call ran in a sandbox started %q s before it: not one started for it", out)
	}
	// Alice's sandbox is still hers: her next call claims it.
	before = prestartStats(t, s)
	if out := stdoutOf(alice(probe)); statOf(prestartStats(t, s), "claimed") != statOf(before, "claimed")+1 {
		t.Fatalf("alice's call did not claim the sandbox started for her (%q): %v", out, prestartStats(t, s))
	}
}

// A settings reload drains the sandboxes started ahead under the old
// ceiling (rule 13), even one whose shape the new ceiling leaves alone (a
// call without network gets the same sandbox whatever domains the
// operator allows): none serves a call after the reload.
func TestHostilePrestartDrainedBySettingsReload(t *testing.T) {
	parallel(t)
	dir := reachableTempDir(t)
	path := filepath.Join(dir, "srt-mcp.json")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"allow-domain": ["a.example.com"]}`)
	s := startServe(t, append([]string{"--config", path}, prestartFlags...)...)
	c := sessionClient(t, s.url, "", false)
	run := executeOK(t, c)
	primed(t, s, run, map[string]any{"command": "true"})
	waitingStages(t, s)
	write(`{"allow-domain": ["b.example.com"]}`)
	for deadline := time.Now().Add(15 * time.Second); statOf(prestartStats(t, s), "ready") > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the reload did not drain the waiting sandboxes: %v", prestartStats(t, s))
		}
	}
	before := statOf(prestartStats(t, s), "claimed")
	run(map[string]any{"command": "true"})
	if got := statOf(prestartStats(t, s), "claimed"); got != before {
		t.Fatalf("a call after the reload claimed a sandbox started before it: %v", prestartStats(t, s))
	}
}
