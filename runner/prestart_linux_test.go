package runner

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// prestartPool is a pool whose runners start the next run's sandbox ahead
// of it, with its one runner waiting.
func prestartPool(t *testing.T) *Pool {
	t.Helper()
	requireBwrap(t)
	p := NewPool("", "", 1)
	p.Prestart(1)
	p.busyLimit = 2 // whatever else runs on the machine meanwhile
	t.Cleanup(p.Close)
	return p
}

// runIn runs spec with argv on p and returns its stdout; the run must
// exit 0.
func runIn(t *testing.T, p *Pool, spec Spec, argv ...string) string {
	t.Helper()
	spec.Argv = argv
	var c collector
	h, err := p.Start(spec, c.sink)
	if err != nil {
		t.Fatal(err)
	}
	h.Wait()
	out, errOut, end := c.check(t)
	if end.Type != EventExit || end.ExitCode != 0 {
		t.Fatalf("%q: %q %q %+v", argv, out, errOut, end)
	}
	for _, e := range c.events {
		if e.Prestart != nil {
			t.Fatalf("the pool passed a runner's prestart outcome on to the caller: %+v", e)
		}
	}
	return out
}

// waitReady waits until p's idle runner holds a sandbox started for the
// next run (its start is on its way once the runner is back).
func waitReady(t *testing.T, p *Pool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats().Ready < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no runner holds a pre-started sandbox: %+v", p.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// probeScript prints what code inside a sandbox can tell about it, but for
// what differs between any two sandboxes (mount ids, device numbers of
// fresh tmpfs mounts, inode numbers of pipes, times): its identity,
// environment, limits, working directory, mounts, the files of its own
// directories, its processes, its descriptors and its network.
const probeScript = `id; umask; pwd; hostname; env | sort; ulimit -a
grep -E '^(Cap|NoNewPrivs|Seccomp|Uid|Gid|Groups|Umask)' /proc/self/status
awk '{print $18, $19, $41}' /proc/self/stat
awk '{sub(/ - /, " | "); print $4, $5, $6, $0}' /proc/self/mountinfo | sed 's/[0-9]* [0-9]* [0-9]*:[0-9]* //; s/ shared:[0-9]*//; s/ master:[0-9]*//'
find /tmp /dev -xdev -printf '%p %M %u %g %s %n\n' | sort
set -- /proc/[0-9]*; echo "processes: $#"
for f in /proc/self/fd/*; do echo "fd ${f##*/}"; done
cat /proc/1/cmdline | tr '\0' ' '; echo
cat /proc/net/dev | cut -d: -f1; cat /proc/net/tcp /proc/net/unix
cat /proc/self/cgroup | sed 's/srt-mcp-[^/]*/srt-mcp-RUN/'
cat /proc/self/oom_score_adj; cat /proc/sys/kernel/pid_max >/dev/null && echo proc-ok`

// TestPrestartedSandboxIsLikeCold: a run that claims a sandbox started
// ahead of it sees what a run in a sandbox started for it sees (identity,
// environment, limits, mounts, a fresh /tmp, no process or file of another
// run, the same descriptors and network), and the current time.
func TestPrestartedSandboxIsLikeCold(t *testing.T) {
	for _, init := range []string{"", InitSRT} {
		t.Run("init="+init, func(t *testing.T) {
			p := prestartPool(t)
			spec := testSpec(t)
			spec.Init = init
			spec.Policy.Limits.MaxOpenFiles = 512
			before := p.Stats()
			cold := runIn(t, p, spec, "/bin/sh", "-c", probeScript+"; echo cold-run > /tmp/left-behind; sleep 1 & echo")
			if got := p.Stats(); got.Cold != before.Cold+1 || got.Claimed != before.Claimed {
				t.Fatalf("the first run should start its own sandbox: %+v", got)
			}
			for i := 0; i < 2; i++ {
				waitReady(t, p)
				time.Sleep(300 * time.Millisecond) // the sandbox waits a while
				host := time.Now().Unix()
				claimed := runIn(t, p, spec, "/bin/sh", "-c", probeScript+"; echo cold-run > /tmp/left-behind; sleep 1 & echo; date +%s")
				out := strings.TrimSuffix(claimed, "\n")
				last := strings.LastIndexByte(out, '\n')
				now := out[last+1:]
				claimed = out[:last+1]
				if got := p.Stats(); got.Claimed != before.Claimed+uint64(i)+1 {
					t.Fatalf("run %d did not claim the pre-started sandbox: %+v", i+2, got)
				}
				if cold != claimed {
					t.Fatalf("a claimed sandbox differs from a cold one: %s", stateChange(cold, claimed, nil))
				}
				if s, err := strconv.ParseInt(now, 10, 64); err != nil || s < host || s > time.Now().Unix() {
					t.Fatalf("the claimed sandbox's clock says %q, the host's %d", now, host)
				}
			}
			if os.Getenv("SRT_MCP_SHOW_PROBE") != "" {
				t.Log(cold)
			}
			if strings.Contains(cold, "left-behind") {
				t.Fatal("the probe saw its own file before writing it")
			}
		})
	}
}

// TestPrestartedRunsNothingBeforeClaim: a sandbox started for the next run
// runs no command before that run claims it, not even the one of the run
// it was shaped after.
func TestPrestartedRunsNothingBeforeClaim(t *testing.T) {
	p := prestartPool(t)
	dir := reachableDir(t)
	if os.Geteuid() == 0 {
		_ = os.Chown(dir, DefaultSandboxUser.UID, DefaultSandboxUser.GID)
	}
	spec := testSpec(t)
	spec.Policy.Filesystem.AllowWrite = []string{dir}
	marks := func() int {
		ents, _ := os.ReadDir(dir)
		return len(ents)
	}
	runIn(t, p, spec, "/bin/sh", "-c", "mktemp -p "+dir)
	waitReady(t, p)
	time.Sleep(200 * time.Millisecond)
	if n := marks(); n != 1 {
		t.Fatalf("the sandbox started for the next run ran the last run's command: %d marks", n)
	}
	runIn(t, p, spec, "/bin/true")
	if n := marks(); n != 1 {
		t.Fatalf("%d marks after a run of true", n)
	}
	if st := p.Stats(); st.Claimed != 1 {
		t.Fatalf("the second run did not claim the pre-started sandbox: %+v", st)
	}
}

// TestPrestartedOtherShapeStartsCold: a run of another policy, working
// directory, tenant or with a terminal does not get the sandbox started
// for another; the one waiting is discarded, and the pool keeps the shape
// it last served.
func TestPrestartedOtherShapeStartsCold(t *testing.T) {
	p := prestartPool(t)
	spec := testSpec(t)
	runIn(t, p, spec, "/bin/true")
	other := []func(s *Spec){
		func(s *Spec) { s.Policy.Filesystem.DenyRead = []string{"/usr/share/doc"} },
		func(s *Spec) { s.Cwd = reachableDir(t) },
		func(s *Spec) { s.Tenant = "key:other" },
		func(s *Spec) { s.Policy.Limits.MaxProcesses = 64 },
	}
	for i, change := range other {
		waitReady(t, p)
		s := spec
		change(&s)
		before := p.Stats()
		// The runner holding a sandbox of another shape is the only one.
		runIn(t, p, s, "/bin/true")
		got := p.Stats()
		if got.Claimed != before.Claimed || got.Unfit+got.Cold != before.Unfit+before.Cold+1 {
			t.Fatalf("change %d: a run of another shape claimed a sandbox: %+v -> %+v", i, before, got)
		}
		// Back to the first shape: the sandbox now waiting is of the
		// changed one.
		waitReady(t, p)
		runIn(t, p, spec, "/bin/true")
	}
	// A terminal: never pre-started, and not claimed.
	waitReady(t, p)
	before := p.Stats()
	s := spec
	s.Stdin = StdinPTY
	runIn(t, p, s, "/bin/true")
	if got := p.Stats(); got.Claimed != before.Claimed {
		t.Fatalf("an interactive run claimed a pre-started sandbox: %+v", got)
	}
}

// TestPrestartedDrained: after Drain (a settings reload) no sandbox started
// before it serves a run.
func TestPrestartedDrained(t *testing.T) {
	p := prestartPool(t)
	spec := testSpec(t)
	runIn(t, p, spec, "/bin/true")
	waitReady(t, p)
	p.Drain()
	before := p.Stats()
	runIn(t, p, spec, "/bin/true")
	if got := p.Stats(); got.Claimed != before.Claimed {
		t.Fatalf("a sandbox started before the drain was claimed: %+v", got)
	}
	waitReady(t, p)
	runIn(t, p, spec, "/bin/true")
	if got := p.Stats(); got.Claimed != before.Claimed+1 {
		t.Fatalf("no sandbox was started after the drain: %+v", got)
	}
}

// TestPrestartedTamperedIsDiscarded: a file put into a waiting sandbox's
// /tmp through /proc/PID/root (what its uid, or root, can do on the host)
// is found at the claim: the sandbox is discarded, and the run starts in
// one of its own that does not have the file.
func TestPrestartedTamperedIsDiscarded(t *testing.T) {
	p := prestartPool(t)
	var mu sync.Mutex
	var reasons []string
	p.OnDiscard(func(_, reason string) {
		mu.Lock()
		reasons = append(reasons, reason)
		mu.Unlock()
	})
	spec := testSpec(t)
	runIn(t, p, spec, "/bin/true")
	waitReady(t, p)
	stage := waitingStage(t, p)
	// As the sandbox's own uid (root's is not mapped in its namespace).
	plant := exec.Command("/bin/sh", "-c", "echo x > "+filepath.Join("/proc", strconv.Itoa(stage), "root/tmp/planted"))
	if os.Geteuid() == 0 {
		plant.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(DefaultSandboxUser.UID), Gid: uint32(DefaultSandboxUser.GID)}}
	}
	if out, err := plant.CombinedOutput(); err != nil {
		t.Fatalf("plant a file in the waiting sandbox: %v %s", err, out)
	}
	before := p.Stats()
	out := runIn(t, p, spec, "/bin/ls", "-a", "/tmp")
	got := p.Stats()
	if strings.Contains(out, "planted") {
		t.Fatalf("the run saw the file planted in the sandbox before its claim: %q", out)
	}
	// Planted before the stage's record (the stage refuses a sandbox with
	// a file it did not make) or after it (the claim finds the change).
	mu.Lock()
	last := strings.Join(reasons, "; ")
	mu.Unlock()
	if got.Changed+got.Failed != before.Changed+before.Failed+1 || got.Claimed != before.Claimed ||
		!strings.Contains(last, "changed while it waited") && !strings.Contains(last, "a fresh sandbox does not have") {
		t.Fatalf("the tampered sandbox was not discarded: %+v (%s)", got, last)
	}
}

// waitingStage is the pid of the exec stage waiting in p's pre-started
// sandbox (a descendant of its idle runner).
func waitingStage(t *testing.T, p *Pool) int {
	t.Helper()
	p.mu.Lock()
	runner := p.idle[len(p.idle)-1].cmd.Process.Pid
	p.mu.Unlock()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if pid := stageUnder(runner); pid > 0 {
			return pid
		}
	}
	t.Fatalf("no waiting exec stage under runner %d", runner)
	return 0
}

// stageUnder is the pid of an exec stage below process runner, 0 if none.
func stageUnder(runner int) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if string(cmd) != sandboxSelf+"\x00"+ModeExec+"\x00" {
			continue
		}
		for a := pid; a > 1; a = parentOf(a) {
			if a == runner {
				return pid
			}
		}
	}
	return 0
}

func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := statFields(b)
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// TestMissingMountPoint: a mask whose directory was renamed away during
// start-up is no longer a mount point at its path (mountinfo names it
// where it moved), escaped names included.
func TestMissingMountPoint(t *testing.T) {
	mi := []byte("22 1 0:20 / / ro,relatime - tmpfs tmpfs rw\n" +
		"40 22 0:44 / /srv/proj/p2 ro,relatime - tmpfs tmpfs rw\n" +
		"41 22 0:45 / /srv/my\\040dir/secret ro,relatime - tmpfs tmpfs rw\n")
	if err := missingMountPoint(mi, []string{"/", "/srv/my dir/secret"}); err != nil {
		t.Fatalf("escaped mount point not found: %v", err)
	}
	err := missingMountPoint(mi, []string{"/", "/srv/proj/private"})
	if err == nil || !strings.Contains(err.Error(), "/srv/proj/private is not the mount point") {
		t.Fatalf("a moved mask was not found: %v", err)
	}
}

// TestPrestartedNotOnABusyMachine: on a machine busier than the budget
// no sandbox is started ahead of a run (a waiting one is still used).
func TestPrestartedNotOnABusyMachine(t *testing.T) {
	p := prestartPool(t)
	spec := testSpec(t)
	runIn(t, p, spec, "/bin/true")
	waitReady(t, p)
	p.mu.Lock()
	p.busyLimit = -1 // every machine is busier than that
	p.mu.Unlock()
	before := p.Stats()
	runIn(t, p, spec, "/bin/true")
	if got := p.Stats(); got.Claimed != before.Claimed+1 {
		t.Fatalf("the waiting sandbox was not used: %+v", got)
	}
	time.Sleep(300 * time.Millisecond)
	if got := p.Stats(); got.Ready != 0 || stageUnderPool(p) != 0 {
		t.Fatalf("a sandbox was started ahead on a busy machine: %+v", got)
	}
	runIn(t, p, spec, "/bin/true")
	if got := p.Stats(); got.Claimed != before.Claimed+1 || got.Cold != before.Cold+1 {
		t.Fatalf("the run after should start its own: %+v", got)
	}
}

// stageUnderPool is the pid of an exec stage under any of p's idle
// runners, 0 if none.
func stageUnderPool(p *Pool) int {
	p.mu.Lock()
	var runners []int
	for _, r := range p.idle {
		runners = append(runners, r.cmd.Process.Pid)
	}
	p.mu.Unlock()
	for _, r := range runners {
		if pid := stageUnder(r); pid > 0 {
			return pid
		}
	}
	return 0
}

// TestPrestartedCgroupOutlivesTheSweep: a sandbox waiting for its run
// longer than a minute has empty cgroups (its stage joins them at the
// claim); the sweep of stale cgroups must leave a live runner's alone, and
// a waiting sandbox whose cgroups went anyway is discarded, not run
// without its limits. (Found by the bench: after a minute every claim
// failed with limit_unenforceable.)
func TestPrestartedCgroupOutlivesTheSweep(t *testing.T) {
	if CgroupMode() == "" {
		t.Skip("needs root and a writable cgroup hierarchy")
	}
	p := prestartPool(t)
	spec := testSpec(t)
	runIn(t, p, spec, "/bin/true")
	waitReady(t, p)
	waitingStage(t, p)
	waiting := func() []string {
		var out []string
		for _, parent := range cgroupParents() {
			m, _ := filepath.Glob(filepath.Join(parent, "srt-mcp-prestart-*"))
			out = append(out, m...)
		}
		return out
	}
	dirs := waiting()
	if len(dirs) == 0 {
		t.Fatal("the waiting sandbox has no cgroup")
	}
	old := time.Now().Add(-2 * time.Minute)
	for _, d := range dirs {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	for _, parent := range cgroupParents() {
		sweepStale(parent)
	}
	before := p.Stats()
	runIn(t, p, spec, "/bin/true")
	if got := p.Stats(); got.Claimed != before.Claimed+1 {
		t.Fatalf("the sweep took the waiting sandbox's cgroups: %+v", got)
	}
	// Gone anyway (by hand): the claim finds it and the run starts its own.
	waitReady(t, p)
	waitingStage(t, p)
	for _, d := range waiting() {
		if err := os.Remove(d); err != nil {
			t.Fatal(err)
		}
	}
	before = p.Stats()
	runIn(t, p, spec, "/bin/true")
	if got := p.Stats(); got.Claimed != before.Claimed || got.Changed != before.Changed+1 {
		t.Fatalf("a waiting sandbox without its cgroups was not discarded: %+v", got)
	}
}

// TestSweepKeepsLiveRunnersCgroups: the sweep removes the empty cgroups of
// runners that are gone, and only those.
func TestSweepKeepsLiveRunnersCgroups(t *testing.T) {
	parent := t.TempDir()
	dead := exec.Command("/bin/true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(parent, fmt.Sprintf("srt-mcp-run-1-%d-3", dead.Process.Pid))
	live := filepath.Join(parent, fmt.Sprintf("srt-mcp-prestart-ab12-%d-4", os.Getpid()))
	old := time.Now().Add(-2 * time.Minute)
	for _, d := range []string{gone, live} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	sweepStale(parent)
	if _, err := os.Stat(gone); err == nil {
		t.Fatal("the cgroup of a runner that is gone was kept")
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("the cgroup of a live runner was swept: %v", err)
	}
}

// TestPrestartedAccessRevoked: as root, a sandbox's sources are opened by
// the runner and mounted by descriptor, and the runner refuses a source its
// sandbox user cannot reach by path (checkAccessAs). A directory's owner who
// takes search permission off a directory above it after a sandbox was
// started ahead of the next run has revoked that access: the run must not
// read through the sandbox mounted before, but fail as a sandbox started
// for it does.
func TestPrestartedAccessRevoked(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxes change user only when the runner is root")
	}
	p := prestartPool(t)
	parent := filepath.Join(reachableDir(t), "alice")
	proj := filepath.Join(parent, "proj")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "f"), []byte("alice's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := testSpec(t)
	spec.Policy.Filesystem.AllowRead = []string{proj}
	runIn(t, p, spec, "/bin/true")
	waitReady(t, p)
	if err := os.Chmod(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	var c collector
	spec.Argv = []string{"/bin/cat", filepath.Join(proj, "f")}
	h, err := p.Start(spec, c.sink)
	if err != nil {
		t.Fatal(err)
	}
	h.Wait()
	out, _, end := c.check(t)
	if strings.Contains(out, "alice's") || end.Type != EventError || !strings.Contains(end.Message, "cannot be reached by the sandbox user") {
		t.Fatalf("a run read a directory its sandbox user can no longer reach, through a sandbox started before: %q %+v (%+v)", out, end, p.Stats())
	}
}

// joinScript, run as the sandbox's uid on the host, joins the user
// namespace bwrap made (the parent of the one its processes are in, which
// that uid owns: it has every capability there) and from it the waiting
// sandbox's uts, ipc, net and mount namespaces, and runs a shell command
// there. Nothing of it joins the sandbox's pid namespace, and it is gone
// before the claim.
const joinScript = `import ctypes, fcntl, os, sys
libc = ctypes.CDLL(None, use_errno=True)
pid = sys.argv[1]
ns = {n: os.open("/proc/%s/ns/%s" % (pid, n), os.O_RDONLY) for n in ("user", "uts", "ipc", "net", "mnt")}
for fd, kind in ((fcntl.ioctl(ns["user"], 0xb702), 0x10000000), (ns["uts"], 0x04000000), (ns["ipc"], 0x08000000), (ns["net"], 0x40000000), (ns["mnt"], 0x00020000)):
    if libc.setns(fd, kind) != 0:
        sys.exit("setns: " + os.strerror(ctypes.get_errno()))
os.chdir("/")
sys.exit(os.waitstatus_to_exitcode(os.system(sys.argv[2])))
`

// TestPrestartedNamespaceStateIsChecked: what a process of the sandbox's
// uid on the host can change in a waiting sandbox without a file in its own
// directories, a mount-table line, a process or a socket to show for it —
// its host name, SysV IPC objects, a file in its read-only root (remounted
// and back), its loopback's addresses and state, the exec stage's
// rlimits, OOM score, nice value and CPUs, a terminal of its devpts — is
// found at the claim: the
// sandbox is discarded and the run sees what a fresh one shows.
func TestPrestartedNamespaceStateIsChecked(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (to act as the sandbox user on the host)")
	}
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("needs python3 to join the sandbox's namespaces")
	}
	asSandboxUser := func(argv ...string) error {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(DefaultSandboxUser.UID), Gid: uint32(DefaultSandboxUser.GID), Groups: []uint32{}}}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%q: %v %s", argv, err, out)
		}
		return nil
	}
	inside := func(sh string) func(*testing.T, int) error {
		return func(_ *testing.T, stage int) error {
			return asSandboxUser(python, "-c", joinScript, strconv.Itoa(stage), sh)
		}
	}
	outside := func(sh string) func(*testing.T, int) error {
		return func(_ *testing.T, stage int) error {
			return asSandboxUser("/bin/sh", "-c", strings.ReplaceAll(sh, "STAGE", strconv.Itoa(stage)))
		}
	}
	// A terminal of the sandbox's own devpts, opened from outside and held:
	// the run would find /dev/pts/0, a line to a process on the host.
	terminal := func(t *testing.T, stage int) error {
		hold := exec.Command(python, "-c", "import os, sys, time; os.open('/proc/%s/root/dev/ptmx' % sys.argv[1], os.O_RDWR | os.O_NOCTTY); print('held', flush=True); time.sleep(60)", strconv.Itoa(stage))
		hold.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(DefaultSandboxUser.UID), Gid: uint32(DefaultSandboxUser.GID), Groups: []uint32{}}}
		out, _ := hold.StdoutPipe()
		hold.Stderr = os.Stderr
		if err := hold.Start(); err != nil {
			return err
		}
		t.Cleanup(func() { _ = hold.Process.Kill(); _ = hold.Wait() })
		buf := make([]byte, 4)
		if _, err := io.ReadFull(out, buf); err != nil || string(buf) != "held" {
			return fmt.Errorf("could not open the sandbox's ptmx: %q %v", buf, err)
		}
		return nil
	}
	cases := []struct {
		name   string
		tamper func(t *testing.T, stage int) error
		probe  string
	}{
		{"hostname", inside("hostname planted"), "hostname"},
		{"sysv-ipc", inside("ipcmk -M 4096 && ipcmk -Q && ipcmk -S 1"), "cat /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem"},
		{"root-file", inside("mount -o remount,bind,rw,nosuid,nodev / && touch /planted && mount -o remount,bind,ro,nosuid,nodev /"), "ls -a /"},
		{"loopback-address", inside("ip addr add 10.9.9.9/32 dev lo"), "ip -o addr; cat /proc/net/route"},
		{"loopback-down", inside("ip link set lo down"), "ip -o link"},
		{"rlimit", outside("prlimit --pid STAGE --nofile=64:64 --cpu=1:1"), "ulimit -n; ulimit -t"},
		{"oom-score", outside("echo 1000 > /proc/STAGE/oom_score_adj"), "cat /proc/self/oom_score_adj"},
		{"nice", outside("renice -n 19 -p STAGE >/dev/null"), "awk '{print $19}' /proc/self/stat"},
		{"cpus", outside("taskset -p 1 STAGE >/dev/null"), "grep Cpus_allowed_list /proc/self/status"},
		{"terminal", terminal, "ls /dev/pts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "cpus" && runtime.NumCPU() < 2 {
				t.Skip("one CPU: nothing to take away")
			}
			p := prestartPool(t)
			spec := testSpec(t)
			spec.Policy.Limits.MaxOpenFiles = 512
			want := runIn(t, p, spec, "/bin/sh", "-c", c.probe)
			waitReady(t, p)
			if err := c.tamper(t, waitingStage(t, p)); err != nil {
				t.Fatal(err)
			}
			before := p.Stats()
			got := runIn(t, p, spec, "/bin/sh", "-c", c.probe)
			after := p.Stats()
			if got != want {
				t.Errorf("the run saw the waiting sandbox changed: %q, a fresh one shows %q", got, want)
			}
			// A root runner gives a waiting sandbox nice 0 back at its
			// claim (it started it at 19): renicing it meanwhile changes
			// nothing the run sees (checked above).
			if c.name == "nice" && os.Geteuid() == 0 {
				return
			}
			if after.Claimed != before.Claimed || after.Changed+after.Failed != before.Changed+before.Failed+1 {
				t.Errorf("a sandbox changed while it waited was claimed: %+v -> %+v", before, after)
			}
		})
	}
}

// TestPrestartedPoolNeverWaitsForAnotherBuild: a caller can make its own
// sandbox slow to plan (a deny_read glob over a large tree: seconds) and
// fill the pool's idle runners with shapes of its own; the pool then gave
// another caller's run, which had no sandbox waiting, the most recent idle
// runner, whose runner first finished starting the slow sandbox (and then
// discarded it): the other caller waited for the attacker's plan.
func TestPrestartedPoolNeverWaitsForAnotherBuild(t *testing.T) {
	p := prestartPool(t)
	base := testSpec(t)
	for i := 0; i < maxIdleRunners-1; i++ {
		s := base
		s.Policy.Filesystem.DenyRead = []string{fmt.Sprintf("/srt-no-such-path-%d", i)}
		runIn(t, p, s, "/bin/true")
	}
	s := base
	for i := 0; i < 8; i++ {
		s.Policy.Filesystem.DenyRead = append(s.Policy.Filesystem.DenyRead, fmt.Sprintf("/usr/**/srt-no-such-name-%d*", i))
	}
	began := time.Now()
	runIn(t, p, s, "/bin/true")
	if d := time.Since(began); d < 2*time.Second {
		t.Skipf("planning globs over /usr takes %v here: too fast to tell a wait", d)
	}
	// Its runner now plans the next sandbox of that shape, for seconds.
	victim := base
	victim.Tenant = "key:victim"
	began = time.Now()
	runIn(t, p, victim, "/bin/true")
	if d := time.Since(began); d > time.Second {
		t.Fatalf("a run of another caller waited %v for a sandbox another caller's runner was starting", d)
	}
}

// TestStrangers: a waiting sandbox whose state records a process besides
// its PID 1 and exec stage, or a socket besides its proxy listeners, is
// refused however early they joined it (before the stage's record too:
// the user namespace bwrap makes is its uid's to enter from the host).
func TestStrangers(t *testing.T) {
	fresh := map[string]int{"TCP": 2, "UDP": 0, "UDPLITE": 0, "RAW": 0, "FRAG": 3, "TCP6": 0, "UDP6": 0}
	if err := strangers([]string{"1", "2"}, 2, fresh, true); err != nil {
		t.Fatal(err)
	}
	if err := strangers([]string{"1", "7"}, 7, map[string]int{"TCP": 0}, false); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		pids  []string
		inuse map[string]int
		proxy bool
	}{
		{[]string{"1", "2", "3"}, fresh, true},
		{[]string{"1", "3"}, fresh, true},
		{[]string{"1", "2"}, map[string]int{"TCP": 3}, true},
		{[]string{"1", "2"}, map[string]int{"TCP": 2}, false},
		{[]string{"1", "2"}, map[string]int{"TCP": 2, "UDP": 1}, true},
		{[]string{"1", "2"}, map[string]int{"TCP": 2, "RAW6": 1}, true},
	} {
		if err := strangers(c.pids, 2, c.inuse, c.proxy); err == nil {
			t.Errorf("%v %v (proxy %v) passed for a fresh sandbox", c.pids, c.inuse, c.proxy)
		}
	}
}

// TestPrestartedDrainedInFlight: a Drain (a settings reload) while a run
// is in flight reaches the sandbox its runner starts after it: no later
// run claims a sandbox started for a run handed out before the drain.
func TestPrestartedDrainedInFlight(t *testing.T) {
	p := prestartPool(t)
	spec := testSpec(t)
	runIn(t, p, spec, "/bin/true")
	waitReady(t, p)
	var c collector
	spec.Argv = []string{"/bin/sleep", "0.3"}
	h, err := p.Start(spec, c.sink)
	if err != nil {
		t.Fatal(err)
	}
	p.Drain()
	h.Wait()
	time.Sleep(200 * time.Millisecond) // its runner would have its next sandbox by now
	before := p.Stats()
	runIn(t, p, spec, "/bin/true")
	if got := p.Stats(); got.Claimed != before.Claimed {
		t.Fatalf("a sandbox started after a run handed out before the drain was claimed: %+v -> %+v", before, got)
	}
}

// TestPrestartedStoppedStageDoesNotStall: a waiting sandbox's exec stage
// stopped (SIGSTOP from a process of its uid on the host) does not answer
// the claim's check; the run must not wait the 30 s start-up bound for it
// but start its own sandbox at once.
func TestPrestartedStoppedStageDoesNotStall(t *testing.T) {
	p := prestartPool(t)
	spec := testSpec(t)
	runIn(t, p, spec, "/bin/true")
	waitReady(t, p)
	stage := waitingStage(t, p)
	stop := exec.Command("/bin/kill", "-STOP", strconv.Itoa(stage))
	if os.Geteuid() == 0 {
		stop.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(DefaultSandboxUser.UID), Gid: uint32(DefaultSandboxUser.GID), Groups: []uint32{}}}
	}
	if out, err := stop.CombinedOutput(); err != nil {
		t.Fatalf("stop the waiting stage: %v %s", err, out)
	}
	began := time.Now()
	before := p.Stats()
	runIn(t, p, spec, "/bin/true")
	if d := time.Since(began); d > 3*time.Second {
		t.Fatalf("the run waited %v for a stopped sandbox", d)
	}
	if got := p.Stats(); got.Claimed != before.Claimed || got.Changed != before.Changed+1 {
		t.Fatalf("the stopped sandbox was not discarded: %+v -> %+v", before, got)
	}
}
