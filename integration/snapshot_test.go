package integration

// Workspace snapshots (issue 26): snapshot_workspace, restore_workspace,
// fork_workspace, list_snapshots, delete_snapshot through a real MCP
// client, on each backend; and what another key, bad names and a busy
// session get.

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestWorkspaceSnapshots(t *testing.T) {
	parallel(t)
	forEachBackend(t, func(t *testing.T, backend []string) {
		// Filesystems of their own as root; directories (tree copies)
		// without root, and with --workspace-fs dir.
		for _, fs := range []string{"auto", "dir"} {
			t.Run(fs, func(t *testing.T) { testWorkspaceSnapshots(t, backend, fs) })
		}
	})
}

func testWorkspaceSnapshots(t *testing.T, backend []string, fs string) {
	{
		d := startData(t, backend, "--workspace-fs", fs)
		if fs == "auto" {
			t.Logf("workspaces: %s", workspaceFS(t, d.url))
		}
		v := d.wantErrorless("create_session", map[string]any{"language": "python"})
		sid := fmt.Sprint(v["session_id"])
		d.wantErrorless("execute_code", map[string]any{"session_id": sid, "language": "python",
			"code": "open('data.csv', 'w').write('a,b\\n1,2\\n')\nimport os; os.makedirs(os.path.expanduser('~/.cache/mine'), exist_ok=True); open(os.path.expanduser('~/.cache/mine/x'), 'w').write('c')\nx = 41"})
		start := time.Now()
		snap := d.wantErrorless("snapshot_workspace", map[string]any{"session_id": sid, "name": "before the change"})
		t.Logf("snapshot of a fresh workspace: %s", time.Since(start))
		id := fmt.Sprint(snap["snapshot_id"])
		if !strings.HasPrefix(id, "snap_") || snap["name"] != "before the change" {
			t.Fatalf("snapshot_workspace: %v", snap)
		}
		// The snapshot held the session only while it was taken: the
		// interpreter keeps its variables.
		if r := d.wantErrorless("execute_code", map[string]any{"session_id": sid, "language": "python", "code": "print(x + 1)\nopen('data.csv', 'w').write('changed')\nopen('new.txt', 'w').write('n')"}); !strings.Contains(fmt.Sprint(r["stdout"]), "42") {
			t.Fatalf("after a snapshot the interpreter lost its state: %v", r)
		}
		res := d.wantErrorless("restore_workspace", map[string]any{"session_id": sid, "snapshot_id": id})
		if fmt.Sprint(res["interpreters_restarted"]) != "[python]" {
			t.Errorf("restore_workspace does not say the interpreter restarted: %v", res)
		}
		r := d.wantErrorless("execute_code", map[string]any{"session_id": sid, "language": "python",
			"code": "import os\nprint(open('data.csv').read().strip(), os.path.exists('new.txt'), open(os.path.expanduser('~/.cache/mine/x')).read())\nprint('x' in globals())"})
		if out := fmt.Sprint(r["stdout"]); !strings.Contains(out, "a,b\n1,2 False c") || !strings.Contains(out, "False") {
			t.Errorf("after the restore: %v", r)
		}
		if !strings.Contains(flat(r), "restored from snapshot "+id) {
			t.Errorf("the first cell after a restore does not say why its variables are gone: %v", flat(r))
		}
		// Fork the snapshot and the live session: new sessions, own files.
		f := d.wantErrorless("fork_workspace", map[string]any{"snapshot_id": id})
		fid := fmt.Sprint(f["session_id"])
		if fid == sid || !strings.HasPrefix(fid, "sess_") {
			t.Fatalf("fork_workspace: %v", f)
		}
		if r := d.wantErrorless("execute_code", map[string]any{"session_id": fid, "language": "python", "code": "print(open('data.csv').read().strip())\nopen('data.csv', 'w').write('fork')"}); !strings.Contains(fmt.Sprint(r["stdout"]), "1,2") {
			t.Errorf("the fork does not hold the snapshot's files: %v", r)
		}
		f2 := d.wantErrorless("fork_workspace", map[string]any{"session_id": fid})
		if r := d.wantErrorless("execute_code", map[string]any{"session_id": fmt.Sprint(f2["session_id"]), "language": "python", "code": "print(open('data.csv').read())"}); !strings.Contains(fmt.Sprint(r["stdout"]), "fork") {
			t.Errorf("a fork of a session does not hold its files as they are: %v", r)
		}
		if r := d.wantErrorless("execute_code", map[string]any{"session_id": sid, "language": "python", "code": "print(open('data.csv').read().strip())"}); !strings.Contains(fmt.Sprint(r["stdout"]), "1,2") {
			t.Errorf("writing in a fork changed the session it came from: %v", r)
		}
		l := d.wantErrorless("list_snapshots", map[string]any{})
		if n := strings.Count(flat(l), "snap_"); n != 1 {
			t.Errorf("list_snapshots (one snapshot kept; a session's fork keeps none): %v", flat(l))
		}
		d.wantErrorless("delete_snapshot", map[string]any{"snapshot_id": id})
		d.wantError("restore_workspace", map[string]any{"session_id": sid, "snapshot_id": id}, "not_found")
	}
}

// Another key never reaches a snapshot: it does not list it, and naming
// its id to restore, fork or delete is not_found, exactly like an id that
// does not exist. Names that would show as something else, and a restore
// over a running session, are refused.
func TestHostileSnapshots(t *testing.T) {
	parallel(t)
	s := startTenants(t)
	alice, bob := keyClient(t, s.url, aliceToken), keyClient(t, s.url, bobToken)
	v, _ := callTool(t, alice, "execute_code", map[string]any{"code": "open('secret.txt', 'w').write('alice only')", "language": "python"})
	sid := fmt.Sprint(v["session_id"])
	snap, isErr := callTool(t, alice, "snapshot_workspace", map[string]any{"session_id": sid, "name": "mine"})
	if isErr {
		t.Fatalf("snapshot_workspace: %v", snap)
	}
	id := fmt.Sprint(snap["snapshot_id"])
	if l, _ := callTool(t, bob, "list_snapshots", map[string]any{}); strings.Contains(flat(l), id) {
		t.Errorf("bob lists alice's snapshot: %v", flat(l))
	}
	bv, _ := callTool(t, bob, "execute_code", map[string]any{"code": "print(1)", "language": "python"})
	bsid := fmt.Sprint(bv["session_id"])
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"restore_workspace", map[string]any{"session_id": bsid, "snapshot_id": id}},
		{"fork_workspace", map[string]any{"snapshot_id": id}},
		{"delete_snapshot", map[string]any{"snapshot_id": id}},
		{"snapshot_workspace", map[string]any{"session_id": sid, "name": "theirs"}},
		{"fork_workspace", map[string]any{"session_id": sid}},
	} {
		r, isErr := callTool(t, bob, call.tool, call.args)
		if !isErr || (r["error"] != "not_found" && r["error"] != "session_not_found") || strings.Contains(flat(r), "alice") {
			t.Errorf("bob's %s of alice's: %v", call.tool, flat(r))
		}
	}
	for _, name := range []string{"a/b", "../x", "rt\x1b]0;PWNED\x07", "", strings.Repeat("n", 200)} {
		r, isErr := callTool(t, alice, "snapshot_workspace", map[string]any{"session_id": sid, "name": name})
		if !isErr || r["error"] != "invalid_arguments" {
			t.Errorf("a snapshot named %q: %v", name, flat(r))
		}
	}
	// A restore while a run holds the session is session_busy; the run's
	// files are untouched.
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = alice.CallTool(bgctx(), toolReq("execute_code", map[string]any{"session_id": sid, "code": "import time; open('during.txt', 'w').write('x'); time.sleep(3)", "language": "python"}))
	}()
	defer func() { <-done }()
	time.Sleep(800 * time.Millisecond)
	r, isErr := callTool(t, alice, "restore_workspace", map[string]any{"session_id": sid, "snapshot_id": id})
	if !isErr || r["error"] != "session_busy" {
		t.Errorf("a restore over a running session: %v", flat(r))
	}
	// Alice's snapshot is still hers.
	if r, _ := callTool(t, alice, "list_snapshots", map[string]any{}); !strings.Contains(flat(r), id) {
		t.Errorf("alice lost her snapshot: %v", flat(r))
	}
}

// The workspace tools through the unmodified MCP TypeScript SDK client, as
// an agent calls them: a named persistent workspace, listed; a snapshot,
// a change, a restore that says the interpreter restarted, a fork, a
// clear error for an unknown snapshot (integration/mcpclient/client.mjs,
// --workspaces). Both backends.
func TestMCPTypeScriptClientWorkspaces(t *testing.T) {
	parallel(t)
	dir := mcpClients(t)
	forEachBackend(t, func(t *testing.T, backend []string) {
		d := startData(t, backend)
		cmd := exec.Command("node", "client.mjs", "--url", d.url, "--workspaces", "--marker", fmt.Sprintf("ws%d", time.Now().UnixNano()%1e9))
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if n := nodeChecks(t, "client --workspaces", out); err != nil || n < 13 {
			t.Fatalf("client.mjs --workspaces: %v (%d checks)\nstderr: %s", err, n, stderr.String())
		}
	})
}
