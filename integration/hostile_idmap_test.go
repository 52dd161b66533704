//go:build linux

package integration

// Writable host paths on a root srt-mcp, through idmapped mounts (issue 26,
// item 4). A root srt-mcp runs sandboxes as an unprivileged uid; a
// directory it may write that this uid cannot write by its modes is mounted
// through an idmapped clone, where the sandbox's uid stands for the
// directory's owner — root, for a root-owned project. These tests check
// that it works (the command still runs as the sandbox user, the host sees
// the owner's files) and that root ownership gives the sandbox nothing
// more: no set-id file on the host, no way out through a link it planted,
// no mount of what a raced path became. As nobody, nothing is mapped: the
// positive test checks that exec behaves as before.

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

// rootProject is a fresh root-owned 0755 directory under a 0700 one (the
// sandbox user can neither write nor reach it by its modes), as root; as
// anyone else, a directory of the tests' own user.
func rootProject(t *testing.T) string {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(base, "project")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// reachableProject is a rootProject whose parents the sandbox user may
// search: a run can also read it by its path (its working directory), so
// that a link followed by mistake would lead somewhere.
func reachableProject(t *testing.T) string {
	t.Helper()
	d := rootProject(t)
	for _, p := range []string{filepath.Dir(d), filepath.Dir(filepath.Dir(d))} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func requireRootIdmap(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("as root only: srt-mcp maps writable paths only for a root runner's sandbox user")
	}
}

func lstatOwner(t *testing.T, p string) (uid, gid int, mode os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid), fi.Mode()
}

// errorMessage is the message of a run's error event, "" if none.
func errorMessage(r nwResult) string {
	for _, e := range r.events {
		if e["type"] == "error" {
			return fmt.Sprint(e["message"])
		}
	}
	return ""
}

// hostIdmapMounts counts idmapped mounts in the host's mount table: srt-mcp
// attaches its clones only in a namespace of bwrap's own.
func hostIdmapMounts(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "idmapped")
}

// `sudo srt-mcp exec --allow-write . -- touch x` in a root-owned project:
// the command runs as the sandbox user (65532), writes where root may, and
// the file is root's on the host. As nobody: the same command in its own
// directory, as before (its own uid, its own file).
func TestIdmapExecRootOwnedProject(t *testing.T) {
	parallel(t)
	dir := rootProject(t)
	me := os.Geteuid()
	wantUID := me
	if me == 0 {
		wantUID = defaultSandboxUID
	}
	before := hostIdmapMounts(t)

	// Plain exec, "." being the physical working directory.
	cmd := exec.Command(nwBin(t), "exec", "--allow-write", ".", "--", "/bin/sh", "-c", "id -u; touch x")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if os.Getenv("XDG_CACHE_HOME") == "" && os.Getenv("HOME") != "" {
		cmd.Env = append(cmd.Env, "XDG_CACHE_HOME="+filepath.Join(os.Getenv("HOME"), ".cache"))
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("exec --allow-write . in a project of uid %d: %v: %s", me, err, out)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.Itoa(wantUID) {
		t.Errorf("the command ran as uid %q, want %d", got, wantUID)
	}
	if uid, gid, _ := lstatOwner(t, filepath.Join(dir, "x")); uid != me || gid != os.Getegid() {
		t.Errorf("x belongs to %d:%d on the host, want the directory's owner %d:%d", uid, gid, me, os.Getegid())
	}

	// What the sandbox sees: the directory and its files as its own, the
	// mount nosuid and idmapped, and nothing of srt-mcp's cache in its
	// mount table.
	r := sh(t, dir, []string{"--allow-write", "."}, `mkdir -p sub && echo hi > sub/y && stat -c '%u %g' . sub/y; grep -c /idmap/ /proc/self/mountinfo; awk -v d="`+dir+`" '$5 == d {print $6}' /proc/self/mountinfo`)
	if r.code != 0 {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr+errorMessage(r))
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	want := fmt.Sprintf("%d %d", wantUID, wantUID)
	if len(lines) != 4 || lines[0] != want || lines[1] != want || lines[2] != "0" {
		t.Errorf("inside: %q (want the owner seen as %s, no mount point of srt-mcp's in the mount table)", r.stdout, want)
	} else if opts := lines[3]; !strings.Contains(opts, "nosuid") || (me == 0) != strings.Contains(opts, "idmapped") {
		t.Errorf("mount options of %s: %s", dir, opts)
	}
	if uid, _, _ := lstatOwner(t, filepath.Join(dir, "sub", "y")); uid != me {
		t.Errorf("sub/y belongs to uid %d on the host, want %d", uid, me)
	}
	if _, _, mode := lstatOwner(t, dir); mode.Perm() != 0o755 {
		t.Errorf("the project's mode changed: %v", mode)
	}
	if after := hostIdmapMounts(t); after != before {
		t.Errorf("the host's mount table has %d idmapped mounts after the runs, %d before", after, before)
	}
}

// A sandbox writing as root (a root-owned writable path) still cannot leave
// a set-uid or set-gid file on the host, change an owner, or hold a
// capability.
func TestHostileIdmapNoSetIDFile(t *testing.T) {
	parallel(t)
	requireRootIdmap(t)
	dir := rootProject(t)
	if err := os.WriteFile(filepath.Join(dir, "existing"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := `
try() { if "$@" 2>/dev/null; then echo "ALLOWED: $*"; else echo "refused: $*"; fi; }
touch f
try chmod 4755 f
try chmod u+s f
try chmod g+s f
try chmod 6755 existing
try chmod u+s existing
try install -m 4755 /bin/true inst
try mkdir -m 2755 sgid-dir
try python3 -c "import os; os.close(os.open('made', os.O_CREAT|os.O_WRONLY, 0o4755))"
try python3 -c "import os; os.chmod('f', 0o4755)"
try python3 -c "import os; fd = os.open('f', os.O_RDONLY); os.fchmod(fd, 0o2755)"
try python3 -c "import os; os.mknod('node', 0o4755)"
try chown 0:0 f
try chown 1:1 f
grep CapEff /proc/self/status
`
	r := sh(t, dir, []string{"--allow-write", dir}, script)
	if r.code != 0 {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr+errorMessage(r))
	}
	if strings.Contains(r.stdout, "ALLOWED") {
		t.Errorf("a set-id or ownership change went through:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "CapEff:\t0000000000000000") {
		t.Errorf("the sandbox holds capabilities:\n%s", r.stdout)
	}
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s is %v on the host", p, fi.Mode())
		}
		return nil
	})
	if uid, _, _ := lstatOwner(t, filepath.Join(dir, "f")); uid != 0 {
		t.Errorf("the premise: f belongs to uid %d, not root", uid)
	}
}

// A link a sandbox plants in a root-owned writable path is root's on the
// host. It leads nowhere from inside, and srt-mcp does not follow it where
// it grants access later (a root-owned link is otherwise trusted: no
// sandbox used to run as root), whether the next run names it as a
// writable path, a readable one, or its working directory.
func TestHostileIdmapPlantedLink(t *testing.T) {
	parallel(t)
	requireRootIdmap(t)
	dir := reachableProject(t)
	outside := reachableProject(t) // root's, 0755: writable as root if it were ever mapped
	r := sh(t, dir, []string{"--allow-write", dir}, fmt.Sprintf(`ln -s /etc etc && ln -s %s out && ln -s / root`, outside))
	if r.code != 0 {
		t.Fatalf("planting: exit %d: %s %s", r.code, r.stdout, r.stderr+errorMessage(r))
	}
	for _, l := range []string{"etc", "out", "root"} {
		if uid, _, mode := lstatOwner(t, filepath.Join(dir, l)); uid != 0 || mode&os.ModeSymlink == 0 {
			t.Fatalf("the premise: %s is %v of uid %d, not root's link", l, mode, uid)
		}
	}
	r = sh(t, dir, []string{"--allow-write", dir}, `for p in etc/evil out/evil root/etc/evil; do echo x > "$p" 2>/dev/null && echo "WROTE $p"; done; true`)
	if strings.Contains(r.stdout, "WROTE") {
		t.Errorf("writes through the planted links went somewhere: %s", r.stdout)
	}
	for _, flags := range [][]string{
		{"--allow-write", filepath.Join(dir, "out")},
		{"--allow-write", filepath.Join(dir, "etc")},
		{"--allow-write", filepath.Join(dir, "root", "etc")},
		{"--allow-read", filepath.Join(dir, "root")},
	} {
		r := sh(t, dir, flags, fmt.Sprintf(`echo x > %s/evil; echo x > /etc/evil; echo ran`, outside))
		if r.code == 0 || strings.Contains(r.stdout, "ran") || !strings.Contains(errorMessage(r)+r.stderr, "symbolic link") {
			t.Errorf("%v: a planted root-owned link was followed: exit %d %q %s", flags, r.code, r.stdout, errorMessage(r)+r.stderr)
		}
	}
	r = sh(t, filepath.Join(dir, "out"), []string{"--allow-write", "."}, `echo x > evil; echo ran`)
	if r.code == 0 || strings.Contains(r.stdout, "ran") {
		t.Errorf("--cwd through the planted link: exit %d %q", r.code, r.stdout)
	}
	for _, p := range []string{filepath.Join(outside, "evil"), "/etc/evil"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written through a planted link", p)
			_ = os.Remove(p)
		}
	}
}

// What is mapped is what was checked. A sandbox writing a root-owned tree
// as root swaps an allowed subdirectory for a link to another root-owned
// directory, over and over, while runs that may write only that
// subdirectory start: the link is root's, so only the mark stops its being
// followed at the check, and only the descriptor (open_tree of the object
// opened without following links) stops a swap between check and mount.
func TestHostileIdmapMountRace(t *testing.T) {
	parallel(t)
	requireRootIdmap(t)
	w := reachableProject(t) // the racers' working directory, read by its path
	outside := reachableProject(t)
	if err := os.Mkdir(filepath.Join(w, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	stop := filepath.Join(w, "stop")
	swapper := exec.Command(nwBin(t), "exec", "--cwd", w, "--allow-write", w, "--timeout", "60s", "--", "/bin/bash", "-c", `
		while [ ! -e `+stop+` ]; do
			mv sub sub.real 2>/dev/null; ln -s `+outside+` sub 2>/dev/null
			sleep 0.00$((RANDOM % 5))
			rm -f sub 2>/dev/null; mv sub.real sub 2>/dev/null
			sleep 0.0$((RANDOM % 3))
		done`)
	if err := swapper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = os.WriteFile(stop, nil, 0o644)
		_ = swapper.Wait()
	}()
	// The swapper must be running (as root on that tree) for the race to
	// mean anything. It keeps the real directory in place most of the
	// time, so that runs do start, and any of them may meet the link.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Lstat(filepath.Join(w, "sub")); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			break
		}
		if _, err := os.Lstat(filepath.Join(w, "sub.real")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the swapper never ran")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ran := 0
	deadline = time.Now().Add(8 * time.Second)
	for i := 0; i < 60 && time.Now().Before(deadline); i++ {
		cmd := exec.Command(nwBin(t), "exec", "--cwd", w, "--allow-write", filepath.Join(w, "sub"), "--", "/bin/sh", "-c",
			fmt.Sprintf(`echo pwned > %s/sub/owned-%d 2>/dev/null && echo wrote`, w, i))
		if out, _ := cmd.Output(); strings.Contains(string(out), "wrote") {
			ran++
		}
		if ents, _ := os.ReadDir(outside); len(ents) > 0 {
			t.Fatalf("try %d: a run mapped the directory outside its policy and wrote %s", i, ents[0].Name())
		}
	}
	if ran == 0 {
		t.Error("no run wrote into the real subdirectory: the race was not exercised")
	}
	t.Logf("%d runs wrote into the real subdirectory", ran)
}

// A root server: each data session runs as a uid of its own (2,000,000 and
// up), and a directory the operator allows (--allow-write), owned by uid
// 1000 with mode 0755, used to be usable by none of them. Now every
// session writes there as uid 1000, while still running as its own uid.
func TestIdmapServeSessionsWriteAsOwner(t *testing.T) {
	parallel(t)
	requireRootIdmap(t)
	dir := reachableProject(t)
	if err := os.Chown(dir, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	d := startData(t, []string{"--backend", "native"}, "--allow-write", dir)
	uids := map[string]bool{}
	for i := 0; i < 2; i++ {
		sid := d.upload("", "in.txt", "x")
		name := fmt.Sprintf("from-session-%d", i)
		v, isErr := d.call("execute_code", map[string]any{"session_id": sid,
			"command":        fmt.Sprintf("id -u > %s/%s", dir, name),
			"sandbox_config": map[string]any{"filesystem": map[string]any{"allow_write": []string{dir}}}})
		if isErr || v["status"] != "completed" || fmt.Sprint(v["exit_code"]) != "0" {
			t.Fatalf("session %d: %v", i, v)
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		ran := strings.TrimSpace(string(b))
		if uid, err := strconv.Atoi(ran); err != nil || uid < 2_000_000 {
			t.Errorf("session %d ran as uid %q, not a session's own", i, ran)
		}
		uids[ran] = true
		if uid, gid, _ := lstatOwner(t, filepath.Join(dir, name)); uid != 1000 || gid != 1000 {
			t.Errorf("%s belongs to %d:%d on the host, want 1000:1000", name, uid, gid)
		}
	}
	if len(uids) != 2 {
		t.Errorf("the two sessions ran as the same uid: %v", uids)
	}
}
