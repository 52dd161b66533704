//go:build linux

package integration

// Hostile volumes: attacks on the workspaces that are ext4 filesystems of
// their own (a root server: an image per session in the state directory,
// on a loop device). From inside a sandbox (the loop device's sysfs, a
// full or read-only filesystem, inode exhaustion, a kernel still writing
// when its session closes), from another key (the state filesystem's room
// for volumes), and from another server sharing the state directory. The
// first tests are findings (each failed on the code it was written
// against); the ones after "Attacks that held" pin refusals that worked.

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requireVolumes skips a test unless the server is root (only a root
// server gives workspaces filesystems of their own).
func requireVolumes(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("workspaces are filesystems of their own only on a root server")
	}
}

// loopBackings is every loop device's backing file as sysfs names it.
func loopBackings() map[string]string {
	out := map[string]string{}
	m, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, p := range m {
		if b, err := os.ReadFile(p); err == nil {
			out[p] = strings.TrimSpace(string(b))
		}
	}
	return out
}

// loopsUnder is the loop devices whose backing file lies under dir.
func loopsUnder(dir string) []string {
	var out []string
	for p, f := range loopBackings() {
		if strings.HasPrefix(f, dir+"/") {
			out = append(out, p+" -> "+f)
		}
	}
	return out
}

// mountsUnder is the mount points below dir in this process's mount table.
func mountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// cleanupVolumes unmounts what is left under state once the test's
// servers are gone (registered before they start: cleanups run last
// first).
func cleanupVolumes(t *testing.T, state string) {
	t.Cleanup(func() { unmountUnder(state) })
}

// A Docker sandbox reads sysfs (read-only, but not namespaced): each loop
// device's loop/backing_file names its image's host path. Attack: list
// /sys/block/loop*/loop/backing_file from run_python. What went wrong: the
// reply carried the state directory's host path, this server's instance,
// the name of the ready volume the next session takes, and the state
// directories of every other server on the host (the "no host path in the
// mount table" promise of TestHostileDiskMountTableNamesNoHostPath undone
// one directory over).
func TestHostileVolumeSysfsNamesNoHostPath(t *testing.T) {
	parallel(t)
	requireVolumes(t)
	forEachBackend(t, func(t *testing.T, backend []string) {
		d := startData(t, backend, "--workspace-quota", "64M")
		workspaceFS(t, d.url)
		v, _ := d.call("run_python", map[string]any{"code": `
import glob
for p in glob.glob("/sys/block/*/loop/backing_file") + glob.glob("/sys/devices/virtual/block/*/loop/backing_file") + glob.glob("/sys/class/block/*/loop/backing_file"):
    try:
        print(p, open(p).read().strip())
    except OSError as e:
        print(p, e)
print("done")`})
		out, _ := v["stdout"].(string)
		if !strings.Contains(out, "done") {
			t.Fatalf("the probe did not run: %.2000s", flat(v))
		}
		for _, leak := range []string{d.state, "/workspaces/", "/image"} {
			if strings.Contains(out, leak) {
				t.Errorf("the sandbox reads its image's host path (%q) from sysfs:\n%.3000s", leak, out)
				break
			}
		}
	})
}

// Two servers share a state directory (supported: a Docker one and a
// native one, say). Attack: start the Docker server while the native one
// has a session. The Docker backend binds the workspaces directory over
// itself (nosuid) without its submounts, which hides the native server's
// mounted volumes: what went wrong is that the native session's files
// were gone from its own server's view (read_artifact not_found, run_python
// cannot see them), and close_session then removed the directory under a
// volume still mounted (hidden), leaving it and its loop device attached.
func TestHostileVolumeDockerServerHidesNativeVolumes(t *testing.T) {
	parallel(t)
	requireVolumes(t)
	if _, ok := dataBackends(t)["docker"]; !ok {
		t.Skip("no Docker backend here")
	}
	state := filepath.Join(reachableTempDir(t), "state")
	cleanupVolumes(t, state)
	n := startData(t, []string{"--backend", "native"}, "--state-dir", state, "--workspace-quota", "64M")
	workspaceFS(t, n.url)
	sid := n.upload("", "keep.txt", "the native session's file")
	startData(t, dataBackends(t)["docker"], "--state-dir", state, "--workspace-quota", "64M")
	v, _ := n.call("read_artifact", map[string]any{"session_id": sid, "path": "keep.txt"})
	if !strings.Contains(flat(v), "the native session") && !strings.Contains(flat(v), base64.StdEncoding.EncodeToString([]byte("the native session's file"))) {
		t.Errorf("after a Docker server started on the same state directory, the native session's file is gone from its server's view: %.800s", flat(v))
	}
	v, _ = n.call("run_python", map[string]any{"session_id": sid, "code": `print(open("keep.txt").read())`})
	if s, _ := v["stdout"].(string); !strings.Contains(s, "the native session's file") {
		t.Errorf("after a Docker server started on the same state directory, the native session's run does not see its file: %.800s", flat(v))
	}
	if strings.Contains(flat(v), state) {
		t.Errorf("the reply names the state directory's host path: %.800s", flat(v))
	}
	n.call("close_session", map[string]any{"session_id": sid})
	time.Sleep(time.Second)
	// Every volume left attached is the two live servers' (their ready
	// ones, their open sessions: none): count against the directories.
	live := map[string]bool{}
	ents, _ := os.ReadDir(filepath.Join(state, "workspaces"))
	for _, e := range ents {
		live[filepath.Join(state, "workspaces", e.Name(), "image")] = true
	}
	for _, l := range loopsUnder(state) {
		if img := l[strings.Index(l, " -> ")+4:]; !live[img] {
			t.Errorf("a closed session's volume is still attached, its directory removed: %s", l)
		}
	}
}

// Another key takes the whole disk promise: the state filesystem holds 3
// volumes and alice, within her share of the sessions (5 of 10), opens
// them all. What went wrong: bob's first session is storage_full while
// alice holds fewer sessions than her share, so one key locks the other
// out of the server (the disk a key may hold has no per-key bound).
func TestHostileVolumeOneKeyTakesTheDisk(t *testing.T) {
	requireVolumes(t)
	dir := reachableTempDir(t)
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("srt-vol-test", state, "tmpfs", 0, "size=240m,mode=0700"); err != nil {
		t.Skipf("no tmpfs here: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(state, 2) })
	cleanupVolumes(t, state)
	s := startTenantsAt(t, state, "--workspace-quota", "64M", "--max-sessions", "10")
	alice := keyClient(t, s.url, aliceToken)
	bob := keyClient(t, s.url, bobToken)
	n := 0
	for ; n < 5; n++ {
		v, isErr, text := toolText(t, alice, "run_python", map[string]any{"code": "print(1)"})
		if isErr {
			t.Logf("alice's session %d: %v %.300s", n+1, v["error"], text)
			break
		}
		time.Sleep(time.Second)
	}
	v, isErr, text := toolText(t, bob, "run_python", map[string]any{"code": "print(1)"})
	if isErr {
		t.Errorf("alice holds %d sessions (her share is 5) and bob cannot open one: %v %.400s", n, v["error"], text)
	}
}

// startTenantsAt is startTenants on a given state directory.
func startTenantsAt(t *testing.T, state string, extra ...string) *tenants {
	t.Helper()
	requirePythonData(t)
	keys := filepath.Join(reachableTempDir(t), "keys")
	if err := os.WriteFile(keys, []byte("alice "+aliceToken+"\nbob "+bobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--backend", "native", "--token-file", keys, "--state-dir", state, "--file-secret", testFileSecret}, extra...)
	return &tenants{mcpServer: startServe(t, args...), t: t, state: state}
}

// Inode exhaustion: the run fills its volume's inode table with empty
// files (blocks stay free), then the caller uploads a 2-byte file. What
// went wrong: the reply is storage_full, "the server's storage is full ...
// free space on the server": the session's own quota (its inodes) is full,
// not the server's disk, and the caller (and an operator reading the
// audit) is sent to the wrong remedy. Uploads that do not fit a volume are
// quota_exceeded (fullErr) only when the write fails, not the create.
func TestHostileVolumeInodeExhaustion(t *testing.T) {
	parallel(t)
	requireVolumes(t)
	d := startData(t, []string{"--backend", "native"}, "--workspace-quota", "64M", "--exec-timeout-seconds", "120")
	workspaceFS(t, d.url)
	v, _ := d.call("run_python", map[string]any{"code": `
import errno, os
os.mkdir("i")
n = 0
try:
    while True:
        os.close(os.open("i/%d" % n, os.O_CREAT | os.O_WRONLY)); n += 1
except OSError as e:
    print("stopped", n, errno.errorcode.get(e.errno))
st = os.statvfs(".")
print("ffree", st.f_ffree, "bfree", st.f_bfree)`})
	sid, _ := v["session_id"].(string)
	out, _ := v["stdout"].(string)
	if !strings.Contains(out, "ENOSPC") {
		t.Fatalf("the run did not meet ENOSPC on inodes: %.800s", flat(v))
	}
	args := map[string]any{"session_id": sid, "filename": "up.txt", "content_base64": base64.StdEncoding.EncodeToString([]byte("up"))}
	v, isErr, text := toolText(t, d.c, "upload_file", args)
	if !isErr || strings.Contains(text, d.state) || strings.Contains(flat(v), d.state) {
		t.Errorf("an upload into a volume without free inodes: want an error without host path, got %v %.600s", isErr, text)
	}
	if v["error"] != "quota_exceeded" {
		t.Errorf("an upload into a session whose filesystem has no free inodes: want quota_exceeded (its quota is full), got %v", flat(v))
	}
	v, _ = d.call("run_python", map[string]any{"code": `open("o.txt", "w").write("o"); print("ok")`})
	if s, _ := v["stdout"].(string); !strings.Contains(s, "ok") {
		t.Errorf("another session cannot write: %.600s", flat(v))
	}
	d.call("close_session", map[string]any{"session_id": sid})
}

// ---- Attacks that held ----

// A kernel still writing when its session closes: the run leaves a thread
// in the session's interpreter appending to a file (and a file unlinked
// but open) forever; close_session. Held: the session's volume is
// unmounted, its loop device detached (no image of it, deleted or not,
// stays attached) and its directory gone within seconds.
func TestHostileVolumeKernelWritingAfterClose(t *testing.T) {
	parallel(t)
	requireVolumes(t)
	forEachBackend(t, func(t *testing.T, backend []string) {
		d := startData(t, backend, "--workspace-quota", "64M")
		workspaceFS(t, d.url)
		v, _ := d.call("run_python", map[string]any{"code": `
import os, threading, time
ghost = open("ghost.bin", "wb"); os.remove("ghost.bin")
def w():
    f = open("late.bin", "ab")
    while True:
        for g in (f, ghost):
            try:
                g.write(b"l" * 65536); g.flush(); os.fsync(g.fileno())
            except OSError:
                pass
        time.sleep(0.01)
threading.Thread(target=w, daemon=True).start()
print("writing")`})
		sid, _ := v["session_id"].(string)
		if s, _ := v["stdout"].(string); !strings.Contains(s, "writing") {
			t.Fatalf("the writer did not start: %.600s", flat(v))
		}
		before := map[string]bool{}
		for _, l := range loopsUnder(d.state) {
			before[l] = true
		}
		d.call("close_session", map[string]any{"session_id": sid})
		var left []string
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			left = nil
			for _, l := range loopsUnder(d.state) {
				if strings.HasSuffix(l, "(deleted)") || !strings.Contains(l, "/ready-") {
					left = append(left, l)
				}
			}
			if len(left) == 0 {
				break
			}
		}
		if len(left) > 0 {
			t.Errorf("15 s after close_session, the closed session's volume is still attached: %v", left)
		}
		for _, w := range workspaceDirs(d.state) {
			if strings.HasPrefix(w, "ready-") || strings.HasPrefix(w, "probe-") {
				continue
			}
			t.Errorf("the closed session's directory is still there: %s", w)
		}
	})
}

// A server killed (-9) at each moment of its first volume's making (mkfs,
// mount, the directories in it) or with a session open: the next server
// on the state directory unmounts and removes what it left. Held: nothing
// of the dead servers stays mounted or attached.
func TestHostileVolumeKilledServerLeavesNothing(t *testing.T) {
	requireVolumes(t)
	state := filepath.Join(reachableTempDir(t), "state")
	cleanupVolumes(t, state)
	for _, delay := range []time.Duration{30 * time.Millisecond, 80 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond, 700 * time.Millisecond} {
		cmd := exec.Command(nwBin(t), "serve", "--port", strconv.Itoa(freePort(t)), "--state-dir", state, "--warm-pool", "0", "--workspace-quota", "64M", "--backend", "native")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// From the moment its ready directory appears.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if m, _ := filepath.Glob(filepath.Join(state, "workspaces", "ready-*")); len(m) > 0 {
				break
			}
		}
		time.Sleep(delay)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	}
	// One more with a session open.
	d := startData(t, []string{"--backend", "native"}, "--state-dir", state, "--workspace-quota", "64M")
	d.upload("", "x.txt", "x")
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	_ = d.wait()
	t.Logf("left by the killed servers: mounts %v, loops %v", mountsUnder(state), loopsUnder(state))
	n := startData(t, []string{"--backend", "native"}, "--state-dir", state, "--workspace-quota", "64M")
	workspaceFS(t, n.url)
	var bad []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		ents, _ := os.ReadDir(filepath.Join(state, "workspaces"))
		bad = nil
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), ".cache-template") && !strings.HasPrefix(e.Name(), "probe-") {
				bad = append(bad, e.Name())
			}
		}
		// What stays is the live server's one ready volume.
		if len(loopsUnder(state)) <= 1 && len(mountsUnder(state)) <= 1 && len(bad) <= 1 {
			break
		}
	}
	if l, m := loopsUnder(state), mountsUnder(state); len(l) > 1 || len(m) > 1 || len(bad) > 1 {
		t.Errorf("after the next start, the killed servers' volumes remain: loops %v mounts %v dirs %v", l, m, bad)
	}
}

// Another local user (nobody) against a Docker server's volumes: the
// images, the ready and session directories, the loop devices and the
// exec stage's tmpfs at state/bin. Held: nothing is read, listed or
// written.
func TestHostileVolumeLocalUserReachesNothing(t *testing.T) {
	parallel(t)
	requireVolumes(t)
	docker, ok := dataBackends(t)["docker"]
	if !ok {
		t.Skip("no Docker backend here")
	}
	d := startData(t, docker, "--workspace-quota", "64M")
	workspaceFS(t, d.url)
	d.upload("", "secret.txt", "tenant secret")
	ws := filepath.Join(d.state, "workspaces")
	var targets []string
	for _, w := range []string{"ready-*", "[0-9a-f]*"} {
		m, _ := filepath.Glob(filepath.Join(ws, w))
		targets = append(targets, m...)
	}
	if len(targets) < 2 {
		t.Fatalf("want a ready and a session directory under %s, got %v", ws, targets)
	}
	var loops []string
	for p := range loopBackings() {
		loops = append(loops, "/dev/"+strings.Split(p, "/")[3])
	}
	script := `set -u; bad=0
try() { if "$@" >/dev/null 2>&1; then echo "ALLOWED: $*"; bad=1; fi; }
try ls ` + ws + `
try ls ` + filepath.Join(d.state, "bin") + `
try touch ` + filepath.Join(d.state, "bin", "planted") + `
`
	for _, dir := range targets {
		script += "try ls " + dir + "\ntry cat " + dir + "/image\ntry ls " + dir + "/fs\ntry ls " + dir + "/fs/data\ntry cat " + dir + "/fs/data/secret.txt\ntry ls " + dir + "/fs/lost+found\ntry touch " + dir + "/planted\n"
	}
	for _, l := range loops {
		script += "try dd if=" + l + " of=/dev/null count=1\n"
	}
	script += "try dd if=/dev/loop-control of=/dev/null count=1\necho done\n"
	out, _ := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script).CombinedOutput()
	if !strings.Contains(string(out), "done") || strings.Contains(string(out), "ALLOWED") {
		t.Errorf("another local user reaches a volume:\n%s", out)
	}
}
