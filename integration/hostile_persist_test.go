//go:build linux

package integration

// Attacks on persistent workspaces (create_session {name, persist: true},
// list_workspaces), as another key, as a local user, and with bad names.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Another key: alice's persistent workspace is not bob's by its handle
// (before or after a restart, when it is suspended and would be mounted
// on first use), nor by its name (bob gets his own), nor in his listing;
// bob cannot destroy it.
func TestHostilePersistentOtherKey(t *testing.T) {
	parallel(t)
	state := filepath.Join(reachableTempDir(t), "state")
	cleanupVolumes(t, state)
	s := startTenantsAt(t, state, "--workspace-quota", "64M")
	alice, bob := keyClient(t, s.url, aliceToken), keyClient(t, s.url, bobToken)
	v, isErr := callTool(t, alice, "create_session", map[string]any{"language": "python", "name": "proj", "persist": true})
	if isErr {
		t.Fatal(flat(v))
	}
	sid := fmt.Sprint(v["session_id"])
	if v, isErr = callTool(t, alice, "execute_code", map[string]any{"session_id": sid, "language": "python", "code": "open('secret.txt', 'w').write('alice-secret')\nprint('ok')"}); isErr {
		t.Fatal(flat(v))
	}
	try := func(when string) {
		for _, tool := range []string{"execute_code", "destroy_session", "list_artifacts", "snapshot_workspace", "get_workspace_info"} {
			args := map[string]any{"session_id": sid}
			switch tool {
			case "execute_code":
				args = map[string]any{"session_id": sid, "language": "python", "code": "print(open('secret.txt').read())"}
			case "snapshot_workspace":
				args["name"] = "x"
			}
			r, isErr := callTool(t, bob, tool, args)
			code := strings.SplitN(fmt.Sprint(r["error"]), ":", 2)[0]
			if !isErr || strings.Contains(flat(r), "alice-secret") || (code != "session_not_found" && code != "not_found") {
				t.Errorf("%s: bob's %s on alice's persistent workspace: %s", when, tool, flat(r))
			}
		}
		r, isErr := callTool(t, bob, "create_session", map[string]any{"language": "python", "name": "proj", "persist": true})
		if isErr || r["session_id"] == sid {
			t.Fatalf("%s: bob's create_session by alice's name: %s", when, flat(r))
		}
		bsid := fmt.Sprint(r["session_id"])
		r, _ = callTool(t, bob, "execute_code", map[string]any{"session_id": bsid, "language": "python", "code": "import os; print(sorted(os.listdir('.')))"})
		if strings.Contains(flat(r), "secret.txt") {
			t.Errorf("%s: bob's workspace of the same name holds alice's files: %s", when, flat(r))
		}
		l, _ := callTool(t, bob, "list_workspaces", map[string]any{})
		if strings.Contains(flat(l), sid) {
			t.Errorf("%s: bob lists alice's workspace: %s", when, flat(l))
		}
	}
	try("open")
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.wait()
	s2 := startTenantsAt(t, state, "--workspace-quota", "64M")
	alice, bob = keyClient(t, s2.url, aliceToken), keyClient(t, s2.url, bobToken)
	try("suspended")
	r, isErr := callTool(t, alice, "execute_code", map[string]any{"session_id": sid, "language": "python", "code": "print(open('secret.txt').read())"})
	if isErr || !strings.Contains(fmt.Sprint(r["stdout"]), "alice-secret") {
		t.Errorf("after bob's tries alice's workspace: %s", flat(r))
	}
}

// Bad input: names with '/', control or direction-changing characters,
// persist without a name, a name without persist; past the per-key bound.
func TestHostilePersistentNamesAndBounds(t *testing.T) {
	parallel(t)
	s := startTenants(t, "--max-persistent-per-caller", "2")
	alice := keyClient(t, s.url, aliceToken)
	for _, args := range []map[string]any{
		{"language": "python", "name": "../../etc", "persist": true},
		{"language": "python", "name": "a\x1b[31mb", "persist": true},
		{"language": "python", "name": "evil\u202egnp.exe", "persist": true},
		{"language": "python", "name": "   ", "persist": true},
		{"language": "python", "name": strings.Repeat("n", 129), "persist": true},
		{"language": "python", "persist": true},
		{"language": "python", "name": "proj"},
	} {
		r, isErr := callTool(t, alice, "create_session", args)
		if !isErr || r["error"] != "invalid_arguments" {
			t.Errorf("create_session %q: %s", fmt.Sprint(args), flat(r))
		}
	}
	for _, n := range []string{"one", "two"} {
		if r, isErr := callTool(t, alice, "create_session", map[string]any{"language": "python", "name": n, "persist": true}); isErr {
			t.Fatal(flat(r))
		}
	}
	r, isErr := callTool(t, alice, "create_session", map[string]any{"language": "python", "name": "three", "persist": true})
	if !isErr || r["error"] != "max_sessions" || !strings.Contains(flat(r), "max-persistent-per-caller") {
		t.Errorf("a third persistent workspace past --max-persistent-per-caller 2: %s", flat(r))
	}
	// The same name again is the same workspace, not a new one.
	if r, isErr := callTool(t, alice, "create_session", map[string]any{"language": "python", "name": "one", "persist": true}); isErr || r["resumed"] != false {
		t.Errorf("the same name again: %s", flat(r))
	}
}

// Another local user: the persistent directory and each workspace's
// record are the server's alone (nobody lists it, reads a record or its
// image).
func TestHostilePersistentLocalUser(t *testing.T) {
	parallel(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	state := filepath.Join(reachableTempDir(t), "state")
	cleanupVolumes(t, state)
	s := startTenantsAt(t, state, "--workspace-quota", "64M")
	alice := keyClient(t, s.url, aliceToken)
	if r, isErr := callTool(t, alice, "create_session", map[string]any{"language": "python", "name": "proj", "persist": true}); isErr {
		t.Fatal(flat(r))
	}
	dirs, _ := filepath.Glob(filepath.Join(state, "persistent", "[0-9a-f]*"))
	if len(dirs) != 1 {
		t.Fatalf("persistent directory: %v", dirs)
	}
	for _, cmd := range []string{
		"ls " + filepath.Join(state, "persistent"),
		"cat " + filepath.Join(dirs[0], "meta.json"),
		"head -c 1 " + filepath.Join(dirs[0], "image"),
		"ls " + dirs[0],
		"touch " + filepath.Join(state, "persistent", "planted"),
	} {
		out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", cmd).CombinedOutput()
		if err == nil {
			t.Errorf("uid 65534 could %q: %s", cmd, out)
		}
	}
}
