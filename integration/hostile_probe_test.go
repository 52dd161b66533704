package integration

// Hostile probes of the runtime probes' scratch directory
// (workspaces/probe-<instance>-<random>, sessions.Registry.MkdirTemp) and
// of what a server killed while probing leaves: another local user, a
// second server sharing the state directory, and a kill -9 during
// start-up.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// killDuringProbe starts servers on state and kills each (-9) as soon as
// until says so, until one leaves a probe directory; it returns what until
// returned for the server that did ("" and a skip when none did).
func killDuringProbe(t *testing.T, state string, until func(pid int) string) (string, []string) {
	t.Helper()
	probes := func() []string {
		p, _ := filepath.Glob(filepath.Join(state, "workspaces", "probe-*"))
		return p
	}
	for try := 0; try < 40; try++ {
		cmd := exec.Command(nwBin(t), "serve", "--port", strconv.Itoa(freePort(t)), "--state-dir", state, "--warm-pool", "0")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		got := ""
		for deadline := time.Now().Add(10 * time.Second); got == "" && time.Now().Before(deadline); {
			got = until(cmd.Process.Pid)
			if got == "" {
				time.Sleep(time.Millisecond)
			}
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if left := probes(); got != "" && len(left) > 0 {
			return got, left
		}
	}
	t.Skip("never killed a server while it probed (its probes were too quick here)")
	return "", nil
}

// processesIn lists the processes (pid: argv) whose working directory is
// under dir.
func processesIn(dir string) []string {
	var out []string
	for _, pid := range hostPIDs() {
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if err != nil || !strings.HasPrefix(cwd, dir+"/") {
			continue
		}
		argv, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, strconv.Itoa(pid)+": "+strings.Join(strings.Split(strings.TrimRight(string(argv), "\x00"), "\x00"), " "))
	}
	return out
}

// A kill -9 during start-up, while a version probe runs: the probe (a
// root process on the host when the server is root: `node tsc --version`,
// `javac -version`, `Rscript -e ...`) must die with its server, as the
// runner's processes do (Pdeathsig). It does not: versionOf starts it with
// exec.CommandContext and no Pdeathsig, so it is reparented to init, runs
// on in the dead server's probe directory, and has no timeout any more
// (the 10 s context died with the server): a hung probe stays for good.
func TestHostileProbeKilledServerLeavesNoProbeProcess(t *testing.T) {
	state := filepath.Join(reachableTempDir(t), "state")
	ws := filepath.Join(state, "workspaces")
	caught := 0
	for try := 0; try < 40 && caught < 5; try++ {
		cmd := exec.Command(nwBin(t), "serve", "--port", strconv.Itoa(freePort(t)), "--state-dir", state, "--warm-pool", "0")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill it while a slow probe runs (one seen for 30 ms: tsc, javac,
		// Rscript; python3 --version is over in 4 ms).
		var seen []string
		first := map[string]time.Time{}
		for deadline := time.Now().Add(10 * time.Second); len(seen) == 0 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			for _, p := range processesIn(ws) {
				if _, ok := first[p]; !ok {
					first[p] = time.Now()
				} else if time.Since(first[p]) > 30*time.Millisecond {
					seen = append(seen, p)
				}
			}
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if len(seen) == 0 {
			continue
		}
		caught++
		t.Logf("killed while %v ran", seen)
		// The runner's Pdeathsig acts at once; give the kernel a moment.
		time.Sleep(20 * time.Millisecond)
		for _, p := range seen {
			pid, _ := strconv.Atoi(strings.SplitN(p, ":", 2)[0])
			if alive(pid) {
				t.Fatalf("a probe outlived its server (killed -9 while probing): %s, still running 20 ms later (parent %s)", p, parentOf(pid))
			}
		}
	}
	if caught == 0 {
		t.Skip("never killed a server while a probe ran")
	}
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func parentOf(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) > 1 {
		return f[1]
	}
	return "?"
}

// An upgrade after a kill -9 during start-up: servers before ea9cb87 ran
// their probes in <state>/probe-<random> and one killed while probing left
// it "for good"; the next server (of this version) removes the leftovers
// of workspaces/ and the old cache-build-*/cache-template* of the state
// directory, but never the old probe-* there: it stays forever.
func TestHostileProbeLegacyLeftoverRemoved(t *testing.T) {
	parallel(t)
	state := filepath.Join(reachableTempDir(t), "state")
	if err := os.MkdirAll(state, 0o711); err != nil {
		t.Fatal(err)
	}
	// What a pre-ea9cb87 server killed while probing left (os.MkdirTemp
	// under the state directory, the inner scratch of DiscoverRuntimes).
	old := filepath.Join(state, "probe-1234567890")
	write(t, filepath.Join(old, "probe-987654321", "x"), "left by a killed server")
	if err := os.Chtimes(old, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	startServe(t, "--state-dir", state)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Lstat(old); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("an earlier server's probe directory %s is still there after the next start", old)
		}
	}
}

// Another local user (nobody) against a root server's probe directory, a
// killed server's kept one: it cannot list the workspaces, read the
// instance file, plant a file in the probe directory or a link among the
// workspaces; the next server removes the directory. (Refused today: a
// regression test.)
func TestHostileProbeDirClosedToOtherUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (the attacker is another user)")
	}
	state := filepath.Join(reachableTempDir(t), "state")
	_, left := killDuringProbe(t, state, func(int) string {
		if p, _ := filepath.Glob(filepath.Join(state, "workspaces", "probe-*", "instance")); len(p) > 0 {
			return p[0]
		}
		return ""
	})
	ws := filepath.Join(state, "workspaces")
	victim := filepath.Join(t.TempDir(), "victim")
	write(t, filepath.Join(victim, "keep.txt"), "precious")
	for _, p := range left {
		for _, script := range []string{
			"ls " + ws,
			"ls " + p,
			"cat " + filepath.Join(p, "instance"),
			"touch " + filepath.Join(p, "planted"),
			"ln -s " + victim + " " + filepath.Join(ws, "probe-ffffffffffffffff-1"),
			"ln -s " + victim + " " + filepath.Join(p, "link"),
		} {
			if out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script).CombinedOutput(); err == nil {
				t.Errorf("nobody could %q: %s", script, out)
			}
		}
	}
	startServe(t, "--state-dir", state)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		stale := 0
		for _, p := range left {
			if _, err := os.Lstat(p); err == nil {
				stale++
			}
		}
		if stale == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a killed server's probe directories are still there: %v", left)
		}
	}
	if b, err := os.ReadFile(filepath.Join(victim, "keep.txt")); err != nil || string(b) != "precious" {
		t.Fatalf("a file outside the state directory changed: %q %v", b, err)
	}
}

// A second server sharing the state directory: its RemoveLeftovers must
// keep a live server's MkdirTemp directories (one whose instance file is
// not written yet names its owner only in its name) and remove a dead
// one's. (Refused today: a regression test.)
func TestHostileProbeSecondServerKeepsLiveProbeDir(t *testing.T) {
	parallel(t)
	state := filepath.Join(reachableTempDir(t), "state")
	startServe(t, "--state-dir", state)
	ents, err := os.ReadDir(filepath.Join(state, "sessions"))
	if err != nil || len(ents) != 1 {
		t.Fatalf("the first server's instance: %v %v", ents, err)
	}
	live := ents[0].Name()
	ws := filepath.Join(state, "workspaces")
	old := time.Now().Add(-time.Hour)
	mk := func(name string) string {
		p := filepath.Join(ws, name)
		if err := os.Mkdir(p, 0o711); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(p, "probe-1", "x"), "x")
		_ = os.Chtimes(p, old, old)
		return p
	}
	keep := []string{mk("probe-" + live + "-111"), mk("cache-build-" + live + "-222")}
	gone := []string{mk("probe-0123456789abcdef-333"), mk("cache-build-fedcba9876543210-444")}
	startServe(t, "--state-dir", state)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		stale := 0
		for _, p := range gone {
			if _, err := os.Lstat(p); err == nil {
				stale++
			}
		}
		if stale == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a dead server's directories are still there: %v", gone)
		}
	}
	for _, p := range keep {
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("the second server removed the live server's %s: %v", p, err)
		}
	}
}
