package integration

// Faults, injected: a full disk, a kill -9 during start-up, a cell whose
// value is huge, a client killed in the middle of a cell. Each ends the
// same way: the server is up, the caller got a clear error, nothing stored
// is lost, and nothing is left over.

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// vmHWM is a process's peak resident memory.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// A full disk (a 24 MB tmpfs state directory): an upload that does not fit
// is storage_full without a host path, leaves no session behind however
// often it is tried, the session's stored file is intact, a run that fills
// the disk gets its own ENOSPC, and once space is free the server works.
func TestFaultDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root (the suite runs as root too)")
	}
	mnt := filepath.Join(reachableTempDir(t), "small")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=24m,mode=0755", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("no tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	state := filepath.Join(mnt, "state")
	d := startData(t, []string{"--backend", "native"}, "--state-dir", state, "--max-sessions", "3")
	sid := d.upload("", "kept.txt", "kept")
	// Fill the disk but for a little.
	filler := filepath.Join(mnt, "filler")
	_ = exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=1M", "count=64").Run()
	big := base64.StdEncoding.EncodeToString(make([]byte, 2<<20))
	for i := 0; i < 5; i++ { // more than --max-sessions: none may linger
		v, isErr := d.call("upload_file", map[string]any{"filename": fmt.Sprintf("big%d.bin", i), "content_base64": big})
		msg := fmt.Sprint(v["message"])
		if !isErr || v["error"] != "storage_full" || strings.Contains(msg, mnt) || strings.Contains(msg, state) {
			t.Fatalf("an upload on a full disk: want storage_full without a host path, got %v", v)
		}
	}
	r := d.python(sid, `
import errno
try:
    with open("fill.bin", "wb") as f:
        while True:
            f.write(b"x" * (1 << 20))
except OSError as e:
    print("ENOSPC" if e.errno == errno.ENOSPC else e)
`)
	if !strings.Contains(fmt.Sprint(r["stdout"]), "ENOSPC") {
		t.Errorf("a run that fills the disk: %v", r)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	d.python(sid, `import os; os.remove("fill.bin")`)
	// Space again: the server works, the stored file is intact, and the
	// failed uploads left no session (three new ones fit under the cap).
	if r := d.python(sid, `print(open("kept.txt").read())`); r["stdout"] != "kept\n" {
		t.Fatalf("the stored file after a full disk: %v", r)
	}
	for i := 0; i < 2; i++ {
		d.upload("", fmt.Sprintf("n%d.txt", i), "n")
	}
	if ws := workspaceDirs(state); len(ws) != 3 {
		t.Errorf("workspaces after the full disk: %v (want the 3 live sessions)", ws)
	}
}

// kill -9 while the server starts (building the cache template, filling
// the warm pool): the next server on the same state directory removes
// what it left, and serves.
func TestFaultKillDuringStartup(t *testing.T) {
	requirePythonData(t)
	state := filepath.Join(reachableTempDir(t), "state")
	cmd := exec.Command(nwBin(t), "serve", "--port", strconv.Itoa(freePort(t)), "--state-dir", state, "--warm-pool", "2")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for the start-up work to be under way, then kill.
	building := func() []string {
		a, _ := filepath.Glob(filepath.Join(state, "cache-build-*"))
		b, _ := filepath.Glob(filepath.Join(state, "workspaces", "cache-build-*"))
		return append(a, b...)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(building()) == 0 {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("the server never started its cache template")
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	left := building()
	t.Logf("killed while building %v", left)
	d := startData(t, []string{"--backend", "native"}, "--state-dir", state)
	deadline = time.Now().Add(20 * time.Second)
	for {
		if b := building(); len(b) == 0 || (len(b) == 1 && !contains(left, b[0])) { // (the new server may build its own)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a killed start-up's leftovers are still there: %v", building())
		}
		time.Sleep(100 * time.Millisecond)
	}
	sid := d.upload("", "a.txt", "a")
	if r := d.python(sid, `print(open("a.txt").read())`); r["stdout"] != "a\n" {
		t.Fatalf("the next server: %v", r)
	}
}

// kill -9 while the server probes its runtimes' versions at start-up: the
// probes' scratch directory is a leftover the next server on the same
// state directory removes (it used to stay in the state directory for good).
func TestFaultKillDuringRuntimeProbe(t *testing.T) {
	state := filepath.Join(reachableTempDir(t), "state")
	probes := func() []string {
		a, _ := filepath.Glob(filepath.Join(state, "probe-*"))
		b, _ := filepath.Glob(filepath.Join(state, "workspaces", "probe-*"))
		return append(a, b...)
	}
	var left []string
	for try := 0; try < 20 && len(left) == 0; try++ {
		cmd := exec.Command(nwBin(t), "serve", "--port", strconv.Itoa(freePort(t)), "--state-dir", state, "--warm-pool", "0")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); len(probes()) == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		left = probes()
	}
	if len(left) == 0 {
		t.Skip("never killed a server while it probed (its probes were too quick here)")
	}
	t.Logf("killed while probing: %v", left)
	startServe(t, "--state-dir", state)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		stale := 0
		for _, p := range probes() {
			if contains(left, p) {
				stale++
			}
		}
		if stale == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a killed server's probe directories are still there: %v", probes())
		}
	}
}

// A cell whose value is 60 MB of text: cut in the interpreter, answered in
// seconds, and the server's memory barely moves.
func TestFaultHugeTrailingValue(t *testing.T) {
	d := startData(t, []string{"--backend", "native"})
	if v, _ := d.call("execute_code", map[string]any{"code": "1", "language": "python"}); v["stdout"] != "1\n" {
		t.Fatalf("warm-up: %v", v)
	}
	before := vmHWM(t, d.cmd.Process.Pid)
	start := time.Now()
	v, isErr := d.call("execute_code", map[string]any{"code": "'x' * 60_000_000", "language": "python"})
	took := time.Since(start)
	grew := vmHWM(t, d.cmd.Process.Pid) - before
	out := fmt.Sprint(v["stdout"])
	t.Logf("a 60 MB value: %v, %d bytes shown, server peak memory +%d MB", took, len(out), grew>>20)
	if isErr || !strings.Contains(out, "truncated, 60000002 bytes") || len(out) > 200<<10 || took > 10*time.Second || grew > 64<<20 {
		t.Fatalf("a huge value: %v in %v, +%d MB: %.200s", isErr, took, grew>>20, out)
	}
	if v, _ := d.call("execute_code", map[string]any{"code": "len(_)", "language": "python"}); v["stdout"] != "60000000\n" {
		t.Fatalf("after a huge value the interpreter keeps it: %v", v)
	}
}

// A client killed (kill -9) in the middle of a cell: the cell is
// interrupted, not its interpreter: the session's variables survive and
// the next call works.
func TestFaultClientKilledMidCell(t *testing.T) {
	d := startData(t, []string{"--backend", "native"})
	sid := d.wantErrorless("create_session", map[string]any{"language": "python"})["session_id"].(string)
	d.wantErrorless("execute_code", map[string]any{"code": "keep = 42", "language": "python", "session_id": sid})
	// The client: curl, a process of its own, speaking Streamable HTTP.
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	resp, err := http.Post(d.url, "application/json", strings.NewReader(init))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	msid := resp.Header.Get("Mcp-Session-Id")
	marker := fmt.Sprintf("64.%d", time.Now().UnixNano()%1_000_000)
	call := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_code","arguments":{"language":"python","session_id":%q,"code":"import subprocess\nsubprocess.run(['sleep', '%s'])"}}}`, sid, marker)
	curl := exec.Command("curl", "-sS", "-X", "POST", d.url, "-H", "Content-Type: application/json", "-H", "Accept: application/json, text/event-stream",
		"-H", "Mcp-Session-Id: "+msid, "-H", "MCP-Protocol-Version: 2025-11-25", "--data-binary", "@-")
	curl.Stdin = strings.NewReader(call) // not in its argv: only the sandboxed sleep carries the marker
	if err := curl.Start(); err != nil {
		t.Fatal(err)
	}
	waitProcesses(t, marker, 20*time.Second)
	_ = curl.Process.Signal(syscall.SIGKILL)
	_ = curl.Wait()
	waitNoProcesses(t, marker, 15*time.Second)
	deadline := time.Now().Add(15 * time.Second)
	for {
		v, isErr := d.call("execute_code", map[string]any{"code": "print(keep)", "language": "python", "session_id": sid})
		if !isErr && v["stdout"] == "42\n" {
			break
		}
		if !strings.Contains(fmt.Sprint(v), "session_busy") || time.Now().After(deadline) {
			t.Fatalf("after its client was killed mid-cell the session must keep its variables: %v", v)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
