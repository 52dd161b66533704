//go:build linux

package integration

// Hostile persistent workspaces, second round: attacks on
// create_session {name, persist: true}, the resume of a suspended
// workspace by its handle or its name, its suspension (idle, shutdown),
// list_workspaces, two servers sharing the persistent directory, and the
// snapshot fixes of 3ed9cd6. Each test is a finding that fails on a906108
// (TestHostilePersist2PersistDirVisibleToSandboxes as nobody only; the
// volume and Docker ones as root).
//
// Attacks that held (no test here): two concurrent create_session of one
// name on one server (callers.mu and Registry.mu serialize them: one
// workspace); destroy_session racing a resume on one server (both under
// Registry.mu); a graceful shutdown racing a resume (Drain comes first:
// server_draining); another key's handle and name on execute_code,
// destroy_session, list_artifacts, snapshot_workspace, create_session
// (not_found, his own workspace); list_workspaces lists only the caller's;
// meta.json, lock and image are outside what a sandbox sees (data/ and
// cache/ are bound, their parent is not) and are opened O_NOFOLLOW; the
// resume's chown walk and the removal never follow a link planted in
// data/; names with '/', '\', controls, bidi or only spaces are refused
// (NFC/NFD or confusable variants are distinct names, of one key only); a
// server killed in createPersistentLocked leaves a directory without a
// record, never offered, swept after a minute (unmounted first); a killed
// server's frozen filesystem is thawed before a resume or a sweep; a
// freeze held by a splice ends once the interpreter is stopped (the
// abandoned FIFREEZE thread returns with it); a published snapshot never
// passes the budget (the copy's own size is checked under snapMu).

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
)

// workspaceState is the state list_workspaces gives c's workspace sid
// ("" when it is not listed).
func workspaceState(t *testing.T, c *client.Client, sid string) string {
	t.Helper()
	v, isErr := callTool(t, c, "list_workspaces", map[string]any{})
	if isErr {
		t.Fatalf("list_workspaces: %s", flat(v))
	}
	ws, _ := v["workspaces"].([]any)
	for _, w := range ws {
		if m, ok := w.(map[string]any); ok && m["session_id"] == sid {
			return fmt.Sprint(m["state"])
		}
	}
	return ""
}

// persistentOfAlice makes alice's persistent workspace "proj" holding
// secret.txt and returns its handle.
func persistentOfAlice(t *testing.T, alice *client.Client) string {
	t.Helper()
	v, isErr := callTool(t, alice, "create_session", map[string]any{"language": "python", "name": "proj", "persist": true})
	if isErr {
		t.Fatalf("create_session: %s", flat(v))
	}
	sid := fmt.Sprint(v["session_id"])
	if v, isErr = callTool(t, alice, "execute_code", map[string]any{"session_id": sid, "language": "python",
		"code": "open('secret.txt', 'w').write('alice-secret')\nprint('ok')"}); isErr {
		t.Fatalf("writing alice's file: %s", flat(v))
	}
	return sid
}

// Attack (another key): two servers without --replica-id share a state
// directory (supported: a native and a Docker server on one host), hence
// its persistent directory, and ids without a replica name. Alice makes a
// persistent workspace on server N after server D started (D's index of
// the directory does not know it). Bob, who knows alice's handle (a handle
// is never a credential), names it on D: upload_file and execute_code
// with session_id = alice's handle make him a new session of that id on D
// (seed 000 lets a caller name a new session), with a Python interpreter
// he primes. N shuts down (alice's workspace is suspended); alice then
// asks D for it by name. What went wrong: D resumes it under the same id
// (resumeLocked keeps an id of "its own" replica), overwriting bob's open
// session in the registry (bob's sandbox, kernel and volume are orphaned,
// never swept), and the kernels, keyed by session id, are bob's: alice's
// cells run in bob's primed interpreter, in bob's /mnt/data, and see his
// files instead of hers. Fix: a resume never takes an id that is open
// (mint a new one, or refuse), and Open refuses a caller-named id that a
// record in the persistent directory holds (read the directory, not the
// start-up index); key kernels by the session object (or its
// incarnation), not its id.
func TestHostilePersist2SharedDirIDTakesAnothersKernel(t *testing.T) {
	parallel(t)
	state := filepath.Join(reachableTempDir(t), "state")
	cleanupVolumes(t, state)
	n := startTenantsAt(t, state, "--workspace-quota", "64M")
	d := startTenantsAt(t, state, "--workspace-quota", "64M")
	aliceN := keyClient(t, n.url, aliceToken)
	sid := persistentOfAlice(t, aliceN)
	bobD := keyClient(t, d.url, bobToken)
	v, isErr := callTool(t, bobD, "upload_file", map[string]any{"session_id": sid, "filename": "bob.txt",
		"content_base64": base64.StdEncoding.EncodeToString([]byte("bob's file"))})
	if isErr {
		t.Skipf("bob cannot name a session with alice's handle on the other server (held): %s", flat(v))
	}
	v, isErr = callTool(t, bobD, "execute_code", map[string]any{"session_id": sid, "language": "python",
		"code": "import builtins\nbuiltins.PRIMED = 'bob-primed-kernel'\nprint('primed')"})
	if isErr {
		t.Fatalf("bob's cell: %s", flat(v))
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	_ = n.wait()
	aliceD := keyClient(t, d.url, aliceToken)
	v, isErr = callTool(t, aliceD, "create_session", map[string]any{"language": "python", "name": "proj", "persist": true})
	if isErr {
		t.Fatalf("alice's create_session by name on the other server: %s", flat(v))
	}
	asid := fmt.Sprint(v["session_id"])
	r, _ := callTool(t, aliceD, "execute_code", map[string]any{"session_id": asid, "language": "python",
		"code": "import builtins, os\nprint(getattr(builtins, 'PRIMED', 'fresh'), sorted(os.listdir('.')))"})
	out := flat(r)
	if strings.Contains(out, "bob-primed-kernel") || strings.Contains(out, "bob.txt") {
		t.Errorf("alice's resumed workspace (%s, bob's session had id %s) runs her cell in bob's interpreter and workspace: %.600s", asid, sid, out)
	}
	if !strings.Contains(out, "secret.txt") {
		t.Errorf("alice's resumed workspace does not show her files: %.600s", out)
	}
	// Bob's session of that id is gone from his view (its sandbox and
	// volume orphaned in the server).
	if r, isErr := callTool(t, bobD, "list_artifacts", map[string]any{"session_id": sid}); isErr && asid == sid {
		t.Errorf("bob's open session %s was replaced by alice's resumed workspace: %.300s", sid, flat(r))
	}
}

// Attack (another key): bob knows the handle of alice's suspended
// persistent workspace (after a restart) and calls list_executions
// {session_id: handle}. What went wrong: Service.Executions looks the id
// up with Registry.Get (no principal), and get() resumes a suspended
// persistent workspace of any principal before the principal is compared:
// bob's call mounts alice's workspace, takes its lock, counts it against
// alice's share of open sessions (bob can open her workspaces until she is
// refused max_sessions, past his own share), refreshes its last use (it
// never expires) and, with replicas, pins it to his replica. Only then is
// the answer session_not_found. Fix: Registry.get with mine == nil never
// resumes (only Lookup/Open, whose principal is checked first); Executions
// uses Lookup.
func TestHostilePersist2OtherKeyHandleResumesIt(t *testing.T) {
	parallel(t)
	state := filepath.Join(reachableTempDir(t), "state")
	cleanupVolumes(t, state)
	s := startTenantsAt(t, state, "--workspace-quota", "64M")
	sid := persistentOfAlice(t, keyClient(t, s.url, aliceToken))
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.wait()
	s2 := startTenantsAt(t, state, "--workspace-quota", "64M")
	alice, bob := keyClient(t, s2.url, aliceToken), keyClient(t, s2.url, bobToken)
	if st := workspaceState(t, alice, sid); st != "suspended" {
		t.Fatalf("alice's workspace after a restart: %q", st)
	}
	r, isErr := callTool(t, bob, "list_executions", map[string]any{"session_id": sid})
	if !isErr {
		t.Logf("bob's list_executions on alice's handle: %s", flat(r))
	}
	if st := workspaceState(t, alice, sid); st != "suspended" {
		t.Errorf("bob's list_executions with alice's handle resumed her suspended workspace (now %q)", st)
	}
}

// Attack (a web page, or anyone holding an old link): a download link of
// a persistent workspace, made before the workspace was suspended, is
// fetched (a plain GET) after it was. What went wrong: OpenSigned checks
// the signature, then Registry.Get resumes the suspended workspace (mount,
// lock, last use, a slot of the key's open sessions) before comparing the
// link's incarnation, which a resume always changes: the link serves
// nothing (404), yet the GET changed state (design rule 12) and keeps the
// workspace from ever expiring. Fix: as above (Get never resumes); a
// suspended workspace's links are dead by construction.
func TestHostilePersist2OldLinkGETResumesIt(t *testing.T) {
	parallel(t)
	state := filepath.Join(reachableTempDir(t), "state")
	cleanupVolumes(t, state)
	s := startTenantsAt(t, state, "--workspace-quota", "64M")
	alice := keyClient(t, s.url, aliceToken)
	sid := persistentOfAlice(t, alice)
	v, isErr := callTool(t, alice, "list_artifacts", map[string]any{"session_id": sid})
	arts, _ := v["artifacts"].([]any)
	if isErr || len(arts) == 0 {
		t.Fatalf("list_artifacts: %s", flat(v))
	}
	link := fmt.Sprint(arts[0].(map[string]any)["download_url"])
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.wait()
	s2 := startTenantsAt(t, state, "--workspace-quota", "64M")
	alice = keyClient(t, s2.url, aliceToken)
	if st := workspaceState(t, alice, sid); st != "suspended" {
		t.Fatalf("alice's workspace after a restart: %q", st)
	}
	link = strings.Replace(link, s.base(), s2.base(), 1) // the same path and query, on the server now running
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	t.Logf("GET of the old link: %d", resp.StatusCode)
	if st := workspaceState(t, alice, sid); st != "suspended" {
		t.Errorf("a GET of an old download link resumed the suspended workspace (now %q, the GET answered %d)", st, resp.StatusCode)
	}
}

// Attack (code inside another key's sandbox): the operator keeps
// persistent workspaces apart from the state directory (--persist-dir,
// as replicas sharing it must) inside a directory its ceiling lets
// sandboxes read (--allow-read), as TestDataIsolation does with the state
// directory. What went wrong: the server hides only its state directory
// from sandboxes (service Config.Hide), not the persistent directory: a
// sandbox of bob's sees it, and on a server without root (sandboxes run as
// the server's user) reads alice's persistent files and records (and,
// with --allow-write above it, could rewrite a meta.json's principal to
// take her workspace). A root server's modes (0711 directory, 0600
// records and images, 0700 data of another uid) keep the files, so this
// fails as nobody. Fix: hide --persist-dir like the state directory
// (Hide: {StateDir, PersistDir}), for every sandbox of every backend.
func TestHostilePersist2PersistDirVisibleToSandboxes(t *testing.T) {
	parallel(t)
	visible := reachableTempDir(t)
	state, persist := filepath.Join(visible, "state"), filepath.Join(visible, "persistent")
	cleanupVolumes(t, state)
	cleanupVolumes(t, persist)
	s := startTenantsAt(t, state, "--workspace-quota", "64M", "--persist-dir", persist, "--allow-read", visible)
	persistentOfAlice(t, keyClient(t, s.url, aliceToken))
	bob := keyClient(t, s.url, bobToken)
	probe := fmt.Sprintf(`
import glob, os
found = []
for p in glob.glob(%q + "/*/meta.json") + glob.glob(%q + "/*/data/secret.txt") + glob.glob(%q + "/*/fs/data/secret.txt"):
    try:
        found.append("read " + p + " " + open(p).read()[:80])
    except OSError as e:
        found.append("exists " + p)
print("FOUND", found)`, persist, persist, persist)
	// bob's own session, and a run in it that asks to read the directory
	// the operator allows (the ceiling).
	v, isErr := callTool(t, bob, "upload_file", map[string]any{"filename": "probe.py", "content_base64": base64.StdEncoding.EncodeToString([]byte(probe))})
	if isErr {
		t.Fatal(flat(v))
	}
	v, _ = callTool(t, bob, "execute_code", map[string]any{"session_id": v["session_id"], "command": "python3 /mnt/data/probe.py",
		"sandbox_config": map[string]any{"filesystem": map[string]any{"allow_read": []string{visible}}}})
	out := fmt.Sprint(v["output"], v["stdout"])
	if !strings.Contains(out, "FOUND") {
		t.Fatalf("the probe did not run: %.800s", flat(v))
	}
	t.Logf("probe: %.1500s", out)
	if strings.Contains(out, "alice-secret") || strings.Contains(out, `"principal"`) {
		t.Errorf("bob's sandbox reads alice's persistent workspace: %.1500s", out)
	}
}

// suspendedUnderDownload makes alice's persistent workspace (in persist,
// "" for the default) hold a 64 MiB file, resumes it on a server whose
// sessions idle out after 3 s, starts a download of the file that reads
// 64 KiB and then stops reading (the server's sendfile blocks with the
// file open), and waits until the idle sweep has suspended the workspace
// under it: its filesystem is lazily unmounted but alive, held by the
// download's open file. It returns the server, alice's client and the
// workspace's handle; the download ends with the test.
func suspendedUnderDownload(t *testing.T, state, persist string) (*tenants, *client.Client, string) {
	t.Helper()
	requireVolumes(t)
	args := []string{"--workspace-quota", "256M", "--data-session-ttl-minutes", "0.05"}
	if persist != "" {
		args = append(args, "--persist-dir", persist)
	}
	s := startTenantsAt(t, state, args...)
	alice := keyClient(t, s.url, aliceToken)
	if workspaceFS(t, s.url) != "filesystem" {
		t.Skip("workspaces are directories here")
	}
	v, isErr := callTool(t, alice, "create_session", map[string]any{"language": "python", "name": "proj", "persist": true})
	if isErr {
		t.Fatalf("create_session: %s", flat(v))
	}
	sid := fmt.Sprint(v["session_id"])
	if v, isErr = callTool(t, alice, "execute_code", map[string]any{"session_id": sid, "language": "python",
		"code": "import os\nopen('big.bin', 'wb').write(os.urandom(64 << 20))\nprint('ok')"}); isErr {
		t.Fatalf("writing: %s", flat(v))
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.wait()
	// Resumed by its handle, the workspace gets the server's idle TTL (3 s).
	s = startTenantsAt(t, state, args...)
	alice = keyClient(t, s.url, aliceToken)
	v, isErr = callTool(t, alice, "list_artifacts", map[string]any{"session_id": sid})
	var link string
	arts, _ := v["artifacts"].([]any)
	for _, a := range arts {
		if m := a.(map[string]any); m["filename"] == "big.bin" {
			link = fmt.Sprint(m["download_url"])
		}
	}
	if isErr || link == "" {
		t.Fatalf("list_artifacts: %.500s", flat(v))
	}
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if _, err := io.ReadFull(resp.Body, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for workspaceState(t, alice, sid) != "suspended" {
		if time.Now().After(deadline) {
			t.Fatalf("the workspace was not suspended after idling: %q", workspaceState(t, alice, sid))
		}
		time.Sleep(500 * time.Millisecond)
	}
	return &tenants{mcpServer: s.mcpServer, t: t, state: state}, alice, sid
}

// Attack (one key against every other): alice keeps a download of her
// persistent workspace's file open without reading it (no write timeout:
// the server's handler holds the file), lets the workspace idle until the
// sweep suspends it (its filesystem lazily unmounted, alive under the
// download), then asks for it by its handle from three connections in a
// loop. What went wrong: each resume waits up to 3 s for the old loop
// device to go (mountPersistent's loopBacked loop) while holding the
// registry's lock (Registry.mu, taken by get/Open/CreatePersistent), so
// every other key's call that names a session queues behind her: bob's
// run_python in his own session takes many seconds (the answer to alice
// is session_busy each time, so she may go on for ever). Fix: never wait
// (or do I/O) under Registry.mu: mark the workspace "resuming" under the
// lock, wait and mount outside it, and answer session_busy at once while
// the old filesystem is held; bound how long a download may hold a file
// of a suspended or closed session (a write timeout, or serve from a copy
// / close on suspend).
func TestHostilePersist2ResumeWaitHoldsRegistryLock(t *testing.T) {
	state := filepath.Join(reachableTempDir(t), "state")
	cleanupVolumes(t, state)
	s, alice, sid := suspendedUnderDownload(t, state, "")
	bob := keyClient(t, s.url, bobToken)
	v, isErr := callTool(t, bob, "run_python", map[string]any{"code": "print(1)"})
	if isErr {
		t.Fatalf("bob's first run: %s", flat(v))
	}
	bsid := fmt.Sprint(v["session_id"])
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]int{}
	for i := 0; i < 3; i++ {
		c := alice
		if i > 0 {
			c = keyClient(t, s.url, aliceToken)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, _ := callTool(t, c, "list_artifacts", map[string]any{"session_id": sid})
				mu.Lock()
				answers[strings.SplitN(fmt.Sprint(r["error"]), ":", 2)[0]]++
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Second)
	var worst time.Duration
	for i := 0; i < 3; i++ {
		start := time.Now()
		r, isErr := callTool(t, bob, "run_python", map[string]any{"session_id": bsid, "code": "print(2)"})
		took := time.Since(start)
		if isErr {
			t.Logf("bob's run: %.300s", flat(r))
		}
		worst = max(worst, took)
	}
	close(stop)
	wg.Wait()
	t.Logf("alice's resume answers: %v", answers)
	if worst > 2*time.Second {
		t.Errorf("while alice retries the resume of her held workspace, bob's run_python in his own session took %s", worst)
	}
}

// Attack (none needed: the operator's configuration): --persist-dir is
// reached through a symbolic link (/srv -> /data/srv, a shared volume's
// mount point linked into place); the server accepts it (opfile.CheckDir
// stats the ancestors) and makes workspaces in it. What went wrong: the
// records are read with nofollow.OpenDir (RESOLVE_NO_SYMLINKS on the whole
// path), which refuses the link above them, so no suspended workspace is
// ever found again: its handle is session_not_found after a restart,
// list_workspaces omits it, create_session by name makes an empty one
// beside it, the per-key and total bounds count none of them; and the
// sweeper takes every record it cannot read for a server killed while
// making one: a minute later it removes the suspended workspaces with
// their files (nofollow.RemoveAll opens the parent following links). A
// relative --persist-dir (never made absolute, unlike --state-dir) is
// refused by the same reads (nothing resumes, nothing is removed: the
// disk fills without a bound). Fix: resolve --persist-dir once at start
// (filepath.Abs, EvalSymlinks; or refuse a path with a link) and open it
// with OpenTrusted, reading records relative to that descriptor; never
// remove a directory whose record is unreadable for a reason other than
// its absence. The default --persist-dir below a --state-dir reached
// through a link (made absolute, never resolved) does the same.
func TestHostilePersist2LinkedPersistDirLosesWorkspaces(t *testing.T) {
	parallel(t)
	for _, how := range []string{"persist-dir", "state-dir"} {
		t.Run(how, func(t *testing.T) {
			parallel(t)
			dir := reachableTempDir(t)
			real := filepath.Join(dir, "real")
			if err := os.Mkdir(real, 0o711); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, filepath.Join(dir, "link")); err != nil {
				t.Fatal(err)
			}
			cleanupVolumes(t, real)
			state := filepath.Join(dir, "state")
			args := []string{"--workspace-quota", "64M", "--data-session-ttl-minutes", "0.05", "--max-persistent-per-caller", "1"}
			if how == "persist-dir" {
				args = append(args, "--persist-dir", filepath.Join(dir, "link", "persistent"))
				cleanupVolumes(t, state)
			} else {
				// The default --persist-dir, <state>/persistent, below a
				// --state-dir reached through the link.
				state = filepath.Join(dir, "link", "state")
			}
			s := startTenantsAt(t, state, args...)
			sid := persistentOfAlice(t, keyClient(t, s.url, aliceToken))
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
			_ = s.wait()
			s = startTenantsAt(t, state, args...)
			alice := keyClient(t, s.url, aliceToken)
			r, isErr := callTool(t, alice, "execute_code", map[string]any{"session_id": sid, "language": "python", "code": "print(open('secret.txt').read())"})
			if isErr || !strings.Contains(fmt.Sprint(r["stdout"]), "alice-secret") {
				t.Errorf("after a restart, alice's persistent workspace by its handle: %.300s", flat(r))
			}
			if st := workspaceState(t, alice, sid); st == "" {
				t.Errorf("list_workspaces does not list alice's suspended workspace")
			}
			if r, isErr := callTool(t, alice, "create_session", map[string]any{"language": "python", "name": "other", "persist": true}); !isErr {
				t.Errorf("a second persistent workspace past --max-persistent-per-caller 1: %.300s", flat(r))
			}
			// The sweeper, a minute after the suspension.
			var kept string
			_ = filepath.WalkDir(real, func(p string, e os.DirEntry, err error) error {
				if err == nil && e.Name() == "meta.json" {
					if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), sid) {
						kept = filepath.Dir(p)
					}
				}
				if err == nil && e.IsDir() && (e.Name() == "fs" || e.Name() == "data" || e.Name() == "workspaces") {
					return filepath.SkipDir
				}
				return nil
			})
			if kept == "" {
				t.Fatalf("alice's workspace is not in %s", real)
			}
			start := time.Now()
			for time.Since(start) < 100*time.Second {
				if _, err := os.Lstat(kept); err != nil {
					t.Errorf("the sweeper removed alice's suspended persistent workspace (its record unreadable through the link) %s later", time.Since(start).Round(time.Second))
					break
				}
				time.Sleep(2 * time.Second)
			}
		})
	}
}

// Attack (none needed: one replica's ordinary restart): two Docker-backend
// replicas on one host, each with its own state directory (as
// TestReplicasPersistentFailover runs them), share --persist-dir. The
// first to start binds the persistent directory over itself (nosuid,
// nodev); the second finds that bind ("ours": selfBound) and takes it
// over; the persistent workspaces either opens are mounted below that
// bind. The first replica then stops (SIGTERM). What went wrong: its
// dockerbox Close asks otherServers() whether another server still uses
// the bind, and otherServers looks only in its own state directory: it
// finds none and detaches the bind (MNT_DETACH), and with it every mount
// below it: the other replica's open workspace loses its filesystem from
// the host's view (list_artifacts and read_artifact find nothing, uploads
// fail, a new container gets an empty or missing /mnt/data), the
// detached ext4 lingers held by old containers, and the replica's later
// suspend cannot unmount it. Fix: record the users of the persistent
// directory's bind in the persistent directory itself (a lock or an
// instance file per server there, checked like InstanceAlive), or bind it
// recursively (MS_REC) and never detach it while another server's lock is
// held on any workspace below it.
func TestHostilePersist2DockerReplicaStopUnbindsOthers(t *testing.T) {
	parallel(t)
	requireVolumes(t)
	docker := dockerArgs(t)
	shared := filepath.Join(reachableTempDir(t), "persistent")
	cleanupVolumes(t, shared)
	var servers []*dataServer
	for i := 0; i < 2; i++ {
		state := filepath.Join(reachableTempDir(t), "state")
		cleanupVolumes(t, state)
		servers = append(servers, startData(t, docker, "--state-dir", state, "--persist-dir", shared,
			"--replica-id", fmt.Sprintf("srt-mcp-%d", i), "--workspace-quota", "64M"))
	}
	first, second := servers[0], servers[1]
	v := second.wantErrorless("create_session", map[string]any{"language": "python", "name": "proj", "persist": true})
	sid := fmt.Sprint(v["session_id"])
	r := second.wantErrorless("execute_code", map[string]any{"session_id": sid, "language": "python",
		"code": "open('keep.txt', 'w').write('kept')\nprint('ok')"})
	if !strings.Contains(fmt.Sprint(r["stdout"]), "ok") {
		t.Fatalf("writing: %s", flat(r))
	}
	before := mountsUnder(shared)
	_ = first.cmd.Process.Signal(syscall.SIGTERM)
	_ = first.wait()
	after := mountsUnder(shared)
	l, _ := second.call("list_artifacts", map[string]any{"session_id": sid})
	if names := artifactNames(l); fmt.Sprint(names) != "[keep.txt]" {
		t.Errorf("after the other replica stopped, list_artifacts of the open workspace on this one: %.400s", flat(l))
	}
	if len(after) < len(before) {
		t.Errorf("the other replica's stop unmounted what lies below the shared persistent directory: mounts before %v, after %v", before, after)
	}
	v, isErr := second.call("upload_file", map[string]any{"session_id": sid, "filename": "new.txt", "content_base64": base64.StdEncoding.EncodeToString([]byte("new"))})
	if isErr {
		t.Errorf("after the other replica stopped, an upload into the open workspace: %.400s", flat(v))
	}
}

// Attack (one key, two replicas): alice asks two replicas sharing
// --persist-dir for the same new name at once (a client retrying through
// the proxy, two agents of one key). What went wrong: CreatePersistent
// looks for the name and creates the workspace under the registry's lock
// of one server only; nothing across servers (the directory) serializes
// the two, so both make one: two persistent workspaces of one key with one
// name (files written to either are missing from the other; create_session
// by name then returns whichever the directory lists first), and the
// per-key and total bounds are passed the same way. Fix: claim the name
// in the directory before making the workspace (an O_EXCL file named by a
// hash of principal and name, or an flock on a per-principal lock file in
// the persistent directory held across the scan and the creation).
func TestHostilePersist2SameNameTwoReplicas(t *testing.T) {
	parallel(t)
	shared := filepath.Join(reachableTempDir(t), "persistent")
	cleanupVolumes(t, shared)
	var clients []*client.Client
	for i := 0; i < 2; i++ {
		state := filepath.Join(reachableTempDir(t), "state")
		cleanupVolumes(t, state)
		s := startTenantsAt(t, state, "--workspace-quota", "64M", "--persist-dir", shared, "--replica-id", fmt.Sprintf("srt-mcp-%d", i))
		clients = append(clients, keyClient(t, s.url, aliceToken))
	}
	dups := map[string]int{}
	for try := 0; try < 3; try++ {
		name := fmt.Sprintf("proj-%d", try)
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				callTool(t, c, "create_session", map[string]any{"language": "python", "name": name, "persist": true})
			}()
		}
		wg.Wait()
		n := 0
		ents, _ := os.ReadDir(shared)
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(shared, e.Name(), "meta.json"))
			if err == nil && strings.Contains(string(b), fmt.Sprintf("%q", name)) {
				n++
			}
		}
		if n > 1 {
			dups[name] = n
		}
	}
	if len(dups) > 0 {
		l, _ := callTool(t, clients[0], "list_workspaces", map[string]any{})
		t.Errorf("one key's concurrent create_session of one name on two replicas made several workspaces of that name: %v; list_workspaces: %.600s", dups, flat(l))
	}
}

// Attack (none needed: a replica dies, the failover README promises):
// two Docker-backend replicas on one host, each with its own state
// directory, share --persist-dir. The replica holding a persistent
// workspace (its interpreter's container running) is killed (SIGKILL, an
// OOM kill); the user asks the other replica for the workspace by name.
// What went wrong: the dead replica's container lives on (only a server on
// the dead one's state directory ever removes it: Cleanup reads its own
// records), still holding the workspace's filesystem, so the live replica
// finds the image loop-backed and answers session_busy every time, for as
// long as that container runs (for ever, when no server starts again on
// that state directory), while the orphaned container keeps running the
// user's code unsupervised. Fix: record a persistent workspace's
// containers where every server sharing the directory finds them (beside
// its record in the persistent directory) and let the resuming server
// remove those of a dead instance before it waits for the loop device;
// or give containers a lifetime tied to their server (a watchdog in the
// exec stage that exits when the server's instance lock is free).
func TestHostilePersist2DockerKilledReplicaStrandsWorkspace(t *testing.T) {
	parallel(t)
	requireVolumes(t)
	docker := dockerArgs(t)
	shared := filepath.Join(reachableTempDir(t), "persistent")
	cleanupVolumes(t, shared)
	var servers []*dataServer
	for i := 0; i < 2; i++ {
		state := filepath.Join(reachableTempDir(t), "state")
		cleanupVolumes(t, state)
		servers = append(servers, startData(t, docker, "--state-dir", state, "--persist-dir", shared,
			"--replica-id", fmt.Sprintf("srt-mcp-%d", i), "--workspace-quota", "64M"))
	}
	dead, live := servers[0], servers[1]
	v := dead.wantErrorless("create_session", map[string]any{"language": "python", "name": "proj", "persist": true})
	sid := fmt.Sprint(v["session_id"])
	dead.wantErrorless("execute_code", map[string]any{"session_id": sid, "language": "python",
		"code": "open('keep.txt', 'w').write('kept')\nprint('ok')"})
	ctr := containerOf(t, sid)
	if ctr == "" {
		t.Fatalf("no container for %s", sid)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", ctr).Run() })
	_ = dead.cmd.Process.Signal(syscall.SIGKILL)
	_ = dead.wait()
	var last map[string]any
	ok := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		r, isErr := live.call("create_session", map[string]any{"language": "python", "name": "proj", "persist": true})
		last = r
		if !isErr {
			ok = true
			break
		}
	}
	if !ok {
		running, _ := exec.Command("docker", "inspect", "-f", "{{.State.Running}}", ctr).Output()
		t.Errorf("30 s after the replica holding it was killed, the live replica still cannot resume the workspace: %.300s (the dead replica's container running: %s)", flat(last), strings.TrimSpace(string(running)))
	}
}

// Attack (one key against every other, through the disk): copyRoom
// refuses a snapshot or fork copy that would leave less than the disk's
// last 5% free, so that running workspaces' sparse images can still grow.
// It compares the disk's free space with this copy alone: alice starts
// three snapshot_workspace calls at once (three sessions of hers, 150 MB
// each, well within her budget of 4 x quota), each sees the same free
// space and passes, and together they copy three times what one was
// checked for. What went wrong: the state filesystem's free space drops
// to nothing while they copy (the copies themselves fail storage_full, too
// late): any other tenant's workspace growing meanwhile gets ENOSPC/EIO
// from its loop device (ext4 errors=remount-ro: its filesystem turns
// read-only). Fix: count the bytes of copies in flight (a registry-wide
// reservation taken with the promise, under snapMu, and given back at
// publish or failure) and subtract them from the free space copyRoom
// compares.
func TestHostilePersist2SnapshotCopiesPassTheReserve(t *testing.T) {
	requireVolumes(t)
	dir := reachableTempDir(t)
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("srt-snap-test", state, "tmpfs", 0, "size=700m,mode=0700"); err != nil {
		t.Skipf("no tmpfs here: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(state, 2) })
	cleanupVolumes(t, state)
	s := startTenantsAt(t, state, "--workspace-quota", "192M", "--max-sessions", "10")
	if workspaceFS(t, s.url) != "filesystem" {
		t.Skip("workspaces are directories here")
	}
	var sids []string
	var clients []*client.Client
	for i := 0; i < 3; i++ {
		c := keyClient(t, s.url, aliceToken)
		v, isErr := callTool(t, c, "run_python", map[string]any{"code": "import os\nopen('big.bin', 'wb').write(os.urandom(150 << 20))\nprint('ok')"})
		if isErr {
			t.Fatalf("alice's session %d: %s", i, flat(v))
		}
		sids, clients = append(sids, fmt.Sprint(v["session_id"])), append(clients, c)
	}
	var st syscall.Statfs_t
	_ = syscall.Statfs(state, &st)
	total, free := int64(st.Blocks)*st.Bsize, int64(st.Bavail)*st.Bsize
	keep := min(total/20, 1<<30)
	t.Logf("state filesystem: %d MiB, %d MiB free, copyRoom keeps %d MiB", total>>20, free>>20, keep>>20)
	stop := make(chan struct{})
	minFree := free
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var st syscall.Statfs_t
			if syscall.Statfs(state, &st) == nil {
				minFree = min(minFree, int64(st.Bavail)*st.Bsize)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	// bob's workspace grows meanwhile (its image is sparse: its writes need
	// the state filesystem's free space).
	bob := keyClient(t, s.url, bobToken)
	var bobOut string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		v, _ := callTool(t, bob, "run_python", map[string]any{"code": `
import os, time
errs = []
end = time.time() + 4
i = 0
while time.time() < end:
    try:
        with open("f%d" % (i % 4), "wb") as f:
            f.write(os.urandom(8 << 20)); f.flush(); os.fsync(f.fileno())
    except OSError as e:
        errs.append(str(e)); break
    i += 1
print("BOB", i, errs)`})
		bobOut = fmt.Sprint(v["stdout"], v["stderr"])
	}()
	time.Sleep(1500 * time.Millisecond)
	answers := make([]string, 3)
	for i := range sids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, isErr := callTool(t, clients[i], "snapshot_workspace", map[string]any{"session_id": sids[i], "name": fmt.Sprint("s", i)})
			answers[i] = fmt.Sprint(isErr, " ", v["error"], " ", v["snapshot_id"])
		}()
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	t.Logf("snapshots: %q; least free space seen: %d MiB", answers, minFree>>20)
	t.Logf("bob's writes meanwhile: %.400s", bobOut)
	if strings.Contains(bobOut, "Errno") {
		t.Errorf("bob's workspace failed a write while alice's snapshots copied: %.400s", bobOut)
	}
	if minFree < keep/2 {
		t.Errorf("three concurrent snapshots of one key took the disk's reserve: %d MiB free at worst, copyRoom keeps %d MiB", minFree>>20, keep>>20)
	}
}

// Attack (none needed: a replica dies): two replicas on one machine share
// the persistent directory, each reaching it by its own path (here the
// first by its path, the second through a bind mount of it: containers,
// or an NFS export mounted twice). The first is killed holding a
// workspace (its filesystem stays mounted); the user asks the second for
// it by name. mountPersistent refuses to mount an image that is still
// mounted (Mounted on its own path) or loop-backed (loopBacked compares
// the image's path as this server spells it with the backing_file the
// kernel names, as the first server opened it). What went wrong: neither
// sees the dead server's mount through the other path, so the second
// server mounts the image again while the first ext4 instance of it is
// still mounted: one image, two loop devices, two superblocks and
// journals (corruption on the first one's final unmount, or at once if
// anything still writes through it). Fix: identify the image by device and
// inode (stat the image; LOOP_GET_STATUS64 gives each loop device's
// lo_device/lo_inode) and refuse while any loop device holds that inode;
// record in meta.json the mount's path and boot id so another path is
// recognised.
func TestHostilePersist2AliasedPathMountsImageTwice(t *testing.T) {
	parallel(t)
	requireVolumes(t)
	dir := reachableTempDir(t)
	real, alias := filepath.Join(dir, "real"), filepath.Join(dir, "alias")
	for _, d := range []string{real, alias} {
		if err := os.Mkdir(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mount(real, alias, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	if err := syscall.Mount("", alias, "", syscall.MS_PRIVATE, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(alias, 2) })
	cleanupVolumes(t, real)
	cleanupVolumes(t, alias)
	var servers []*tenants
	for i, p := range []string{real, alias} {
		state := filepath.Join(reachableTempDir(t), "state")
		cleanupVolumes(t, state)
		servers = append(servers, startTenantsAt(t, state, "--workspace-quota", "64M", "--persist-dir", filepath.Join(p, "persistent"),
			"--replica-id", fmt.Sprintf("srt-mcp-%d", i)))
	}
	alice := keyClient(t, servers[0].url, aliceToken)
	persistentOfAlice(t, alice)
	_ = servers[0].cmd.Process.Signal(syscall.SIGKILL)
	_ = servers[0].wait()
	alice = keyClient(t, servers[1].url, aliceToken)
	v, isErr := callTool(t, alice, "create_session", map[string]any{"language": "python", "name": "proj", "persist": true})
	t.Logf("the live replica's resume: %.300s", flat(v))
	if !isErr {
		callTool(t, alice, "execute_code", map[string]any{"session_id": v["session_id"], "language": "python", "code": "open('after.txt', 'w').write('x')\nprint('ok')"})
	}
	byImage := map[string][]string{}
	for dev, f := range loopBackings() {
		f = strings.TrimSuffix(f, " (deleted)")
		if strings.HasPrefix(f, real+"/") || strings.HasPrefix(f, alias+"/") {
			byImage[f] = append(byImage[f], dev)
		}
	}
	t.Logf("loop devices: %v; mounts: %v %v", byImage, mountsUnder(real), mountsUnder(alias))
	if len(mountsUnder(real)) > 0 && len(mountsUnder(alias)) > 0 {
		t.Errorf("the image of alice's workspace is mounted twice, by the dead replica (%v) and by the live one (%v)", mountsUnder(real), mountsUnder(alias))
	}
}
