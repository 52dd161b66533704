//go:build linux

package integration

// Named, persistent workspaces (create_session {name, persist: true}):
// their files outlive a crash and a restart of the server, under the same
// handle; the first cell after a resume runs in a new interpreter and says
// so.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestPersistentWorkspaceSurvivesRestarts(t *testing.T) {
	parallel(t)
	forEachBackend(t, func(t *testing.T, backend []string) {
		state := filepath.Join(reachableTempDir(t), "state")
		cleanupVolumes(t, state)
		args := []string{"--state-dir", state, "--workspace-quota", "64M"}
		d := startData(t, backend, args...)
		v := d.wantErrorless("create_session", map[string]any{"language": "python", "name": "proj", "persist": true})
		sid := fmt.Sprint(v["session_id"])
		if v["persist"] != true || v["resumed"] != false || v["name"] != "proj" {
			t.Fatalf("create_session: %v", v)
		}
		r := d.wantErrorless("execute_code", map[string]any{"session_id": sid, "language": "python",
			"code": "x = 41\nopen('keep.txt', 'w').write('kept')\nimport os; os.makedirs('sub', exist_ok=True); open('sub/b.txt', 'w').write('b')\nprint('ok')"})
		if !strings.Contains(fmt.Sprint(r["stdout"]), "ok") {
			t.Fatalf("first cell: %v", flat(r))
		}
		l := d.wantErrorless("list_workspaces", map[string]any{})
		if s := flat(l); !strings.Contains(s, sid) || !strings.Contains(s, "active") {
			t.Errorf("list_workspaces: %s", s)
		}
		// A crash: SIGKILL, nothing suspended.
		_ = d.cmd.Process.Signal(syscall.SIGKILL)
		_ = d.wait()
		d2 := startData(t, backend, args...)
		start := time.Now()
		r = d2.wantErrorless("execute_code", map[string]any{"session_id": sid, "language": "python",
			"code": "print(open('keep.txt').read(), open('sub/b.txt').read(), 'x' in globals())"})
		took := time.Since(start)
		if got := fmt.Sprint(r["stdout"]); !strings.Contains(got, "kept b False") {
			t.Errorf("after a crash, the first cell: %s", flat(r))
		}
		if !strings.Contains(flat(r), "resumed from storage") {
			t.Errorf("the first cell after a resume does not say its interpreter is new: %s", flat(r))
		}
		t.Logf("first cell after a crash and restart: %s", took)
		// A graceful restart: the workspace is suspended, then resumed by
		// name.
		_ = d2.cmd.Process.Signal(syscall.SIGTERM)
		_ = d2.wait()
		for _, m := range mountsUnder(state) {
			if m != filepath.Join(state, "persistent") { // the Docker backend's nosuid bind of it stays
				t.Errorf("a server that shut down left a mount: %s", m)
			}
		}
		d3 := startData(t, backend, args...)
		l = d3.wantErrorless("list_workspaces", map[string]any{})
		if s := flat(l); !strings.Contains(s, sid) || !strings.Contains(s, "suspended") {
			t.Errorf("list_workspaces after a restart: %s", s)
		}
		v = d3.wantErrorless("create_session", map[string]any{"language": "python", "name": "proj", "persist": true})
		if v["session_id"] != sid || v["resumed"] != true {
			t.Errorf("create_session by name after a restart: %v (want %s, resumed)", v, sid)
		}
		r = d3.wantErrorless("execute_code", map[string]any{"session_id": sid, "language": "python", "code": "print(open('keep.txt').read())"})
		if !strings.Contains(fmt.Sprint(r["stdout"]), "kept") {
			t.Errorf("after a graceful restart: %s", flat(r))
		}
		// Destroyed: gone for good, also after another restart.
		d3.wantErrorless("destroy_session", map[string]any{"session_id": sid})
		_ = d3.cmd.Process.Signal(syscall.SIGTERM)
		_ = d3.wait()
		d4 := startData(t, backend, args...)
		if r, isErr := d4.call("execute_code", map[string]any{"session_id": sid, "language": "python", "code": "print(1)"}); !isErr || !strings.HasPrefix(fmt.Sprint(r["error"]), "session_not_found") {
			t.Errorf("a destroyed persistent workspace after a restart: %s", flat(r))
		}
		ents, _ := os.ReadDir(filepath.Join(state, "persistent"))
		for _, e := range ents {
			if e.Name() != ".lock" { // the directory's own
				t.Errorf("a destroyed persistent workspace left %s", e.Name())
			}
		}
	})
}

// A server restarted right after a crash starts while the kernel still
// tears down the dead server's sandboxes, whose mount namespaces hold the
// workspace's filesystem after the start-up's lazy unmount (on a machine
// busy with I/O, for seconds: CI's failure of the test above). Here a
// mount namespace copied while the workspace was mounted holds it for
// seconds past the restart: the first call after it resumes the
// workspace, it does not fail session_busy.
func TestPersistentWorkspaceResumesOnceADeadServersHoldGoes(t *testing.T) {
	parallel(t)
	if os.Geteuid() != 0 {
		t.Skip("workspaces are filesystems of their own (loop devices) only as root")
	}
	backend, ok := dataBackends(t)["native"]
	if !ok {
		t.Skip("native backend not available here")
	}
	state := filepath.Join(reachableTempDir(t), "state")
	cleanupVolumes(t, state)
	args := []string{"--state-dir", state, "--workspace-quota", "64M"}
	d := startData(t, backend, args...)
	sid := fmt.Sprint(d.wantErrorless("create_session", map[string]any{"language": "python", "name": "held", "persist": true})["session_id"])
	d.wantErrorless("execute_code", map[string]any{"session_id": sid, "language": "python", "code": "open('keep.txt', 'w').write('kept')"})
	if len(mountsUnder(filepath.Join(state, "persistent"))) == 0 {
		t.Fatalf("the persistent workspace is not a filesystem of its own: mounts under %s: %v", state, mountsUnder(state))
	}
	holder := exec.Command("unshare", "--mount", "--propagation", "private", "sleep", "8")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	time.Sleep(300 * time.Millisecond) // unshare has copied the mount table
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	_ = d.wait()
	start := time.Now()
	d2 := startData(t, backend, args...)
	t.Logf("the server started in %s", time.Since(start))
	r, isErr := d2.call("execute_code", map[string]any{"session_id": sid, "language": "python", "code": "print(open('keep.txt').read())"})
	if isErr || !strings.Contains(fmt.Sprint(r["stdout"]), "kept") {
		t.Fatalf("the first call after a crash, while a dead server's sandbox still held the workspace: %s", flat(r))
	}
}
