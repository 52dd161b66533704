//go:build linux

package integration

// Second round of attacks on writable paths through idmapped mounts
// (runner/idmap_linux.go). Each test is a finding: it fails until fixed.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Attack: a root-owned writable tree (sudo srt-mcp exec --allow-write
// /opt/app, /usr/local, a build tree with an installed helper...) holds a
// set-uid-root (or set-gid, or file-capability) binary. The sandbox writes
// there as root, so it may open that binary O_RDWR; it cannot chmod in a
// set-uid bit (seccomp) and a write(2) clears the bit (no CAP_FSETID), but
// a store through a shared writable mmap does not go through
// file_remove_privs: the binary keeps its set-uid bit on the host and now
// holds the sandbox's code. The mount is nosuid only inside the sandbox;
// on the host anyone who runs the binary runs the sandbox's code as root.
//
// What went wrong: idmap_linux.go's "a write to an existing one clears its
// bits" holds for write(2), truncate and fallocate, not for mmap stores.
//
// Suggested fix: do not map a tree that holds a set-uid/set-gid file or one
// with security.capability (walk it, without following links, before the
// clone, and refuse with the reason), or strip those bits (root-owned trees
// at least) before mapping; better still, never map owner uid 0 at all
// (refuse a root-owned writable root, as before the feature, and say which
// chown makes it work), since root ownership is what turns this into root.
// copyProgram writes a copy of /bin/true at dst with mode.
func copyProgram(t *testing.T, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

func TestHostileIdmapMmapKeepsSetUID(t *testing.T) {
	parallel(t)
	requireRootIdmap(t)
	dir := rootProject(t)
	bin := filepath.Join(dir, "helper")
	copyProgram(t, bin, 0o755)
	if err := os.Chmod(bin, os.ModeSetuid|0o755); err != nil { // set-uid root, as installed by root
		t.Fatal(err)
	}
	if _, _, mode := lstatOwner(t, bin); mode&os.ModeSetuid == 0 {
		t.Fatalf("the premise: %s is %v, not set-uid", bin, mode)
	}
	script := `python3 - <<'EOF'
import os, mmap
fd = os.open("helper", os.O_RDWR)
m = mmap.mmap(fd, 0)
m[0:8] = b"SANDBOX!"
m.flush(); m.close(); os.close(fd)
print("stored")
EOF`
	r := sh(t, dir, []string{"--allow-write", dir}, script)
	t.Logf("run: exit %d %q %s", r.code, r.stdout, r.stderr+errorMessage(r))
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	_, _, mode := lstatOwner(t, bin)
	t.Logf("after: %v %q", mode, b[:8])
	if strings.HasPrefix(string(b), "SANDBOX!") && mode&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("the sandbox rewrote a set-uid-root binary on the host and it is still %v: root code execution for whoever runs it", mode)
	}
}

// Attack (another API key, another session): a root server's data sessions
// each run as a uid of their own, and the operator allows a shared drop
// directory (--allow-write D, mode 1777, as /tmp is). Session A keeps its
// files private there (D/a-private, 0700, its own uid). Session B names
// D/a-private itself as its allow_write: it is inside the ceiling, B's uid
// cannot write it by its modes, its owner can, so the runner mounts it
// idmapped with B's uid standing for A's, and B reads and rewrites A's
// files. The same works for any directory or file in the ceiling, of any
// owner: another local user's private directory under an allowed /tmp,
// a root-owned subdirectory (B then writes as root). The caller picks whose
// identity its sandbox gets by naming a path.
//
// What went wrong: the mapping is decided on the path the call names (and
// its owner), not on what the operator allowed: modes inside the ceiling,
// which used to keep sessions and users apart, no longer count.
//
// Suggested fix: map only a path the operator named (a ceiling entry, or
// its --allow-write path for exec), to that entry's owner; for a call's
// narrower path, map it only when its owner is the owner of the ceiling
// entry it lies in (and never a data session's uid), otherwise refuse as
// before the feature.
func TestHostileIdmapCallPicksOwner(t *testing.T) {
	parallel(t)
	requireRootIdmap(t)
	shared := reachableProject(t)
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	d := startData(t, []string{"--backend", "native"}, "--allow-write", shared)
	fs := func(p string) map[string]any {
		return map[string]any{"filesystem": map[string]any{"allow_write": []string{p}}}
	}
	a := d.upload("", "in.txt", "x")
	v, isErr := d.call("execute_code", map[string]any{"session_id": a,
		"command":        fmt.Sprintf("umask 077; mkdir %s/a-private && echo a-secret > %s/a-private/secret && id -u", shared, shared),
		"sandbox_config": fs(shared)})
	if isErr || v["status"] != "completed" || fmt.Sprint(v["exit_code"]) != "0" {
		t.Fatalf("session A: %v", v)
	}
	priv := filepath.Join(shared, "a-private")
	if uidA, _, mode := lstatOwner(t, priv); uidA < 2_000_000 || mode.Perm() != 0o700 {
		t.Fatalf("the premise: %s is %v of uid %d, not session A's private directory", priv, mode, uidA)
	}

	b := d.upload("", "in.txt", "y")
	v, _ = d.call("execute_code", map[string]any{"session_id": b,
		"command":        fmt.Sprintf("id -u; cat %s/secret; echo b-was-here > %s/secret", priv, priv),
		"sandbox_config": fs(priv)})
	got, _ := os.ReadFile(filepath.Join(priv, "secret"))
	if strings.Contains(fmt.Sprint(v), "a-secret") || strings.Contains(string(got), "b-was-here") {
		t.Errorf("session B read or rewrote session A's 0700 directory by naming it as its allow_write: %v; the file now holds %q", v, got)
	}
}

// Attack (code inside the sandbox, over three runs): the mark
// (trusted.srt-mcp.sandbox-written) is on the mapped directory, and a link
// is distrusted only while it sits below a marked directory. A root-owned
// link does not have to stay there. Run 1 writes D/r (root-owned, mapped)
// as root: it makes D/r/sub with mode 0777 and a link D/r/sub/link ->
// <a root-owned directory outside every policy>; the link is root's. Run 2
// may write D (which the sandbox user may write by its modes: not mapped,
// not marked; D/r is part of the same mount there) and moves the link to
// D/link: the rename needs only write on the two directories, and it
// keeps the link's owner, root. Run 3 names D/link (the working
// directory, --allow-read, --allow-write: an operator who trusts a
// root-owned link there, as srt-mcp says it does): the link is root's and
// no directory above it is marked, so it is followed; the target is
// root-owned and not writable by the sandbox user, so it is mapped, and
// the sandbox writes outside its policy as root.
//
// What went wrong: "no link below a marked directory is followed" is a
// property of where the link is now, not of who made it; a link made as
// root by a sandbox can be moved anywhere on the same filesystem that a
// later sandbox may write without a mapping.
//
// Suggested fix: trust a root-owned link where access is granted only if
// its directory may be written by root alone (root-owned, not group- or
// other-writable, sticky or not) and no directory above it is marked; or
// stop mapping owner uid 0 (root-owned links then stay proof that no
// sandbox made them).
func TestHostileIdmapMovedLink(t *testing.T) {
	parallel(t)
	requireRootIdmap(t)
	base := reachableProject(t)
	d := filepath.Join(base, "d")
	r := filepath.Join(d, "r")
	if err := os.Mkdir(d, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o777); err != nil { // writable by the sandbox user by its modes: never mapped
		t.Fatal(err)
	}
	if err := os.Mkdir(r, 0o755); err != nil { // root's: mapped when allowed
		t.Fatal(err)
	}
	outside := reachableProject(t)
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("outside-secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// A directory others may write, in root's tree: chmod to such a mode
	// is refused now, and what a umask of 0 makes loses those bits at the
	// run's end; if that stops the chain here, the link stays where only
	// a mapped (marked) run could move it.
	res := sh(t, base, []string{"--allow-write", r}, fmt.Sprintf(`cd %s && umask 0 && mkdir sub && ln -s %s sub/link`, r, outside))
	if res.code != 0 {
		t.Fatalf("run 1: exit %d: %s %s", res.code, res.stdout, res.stderr+errorMessage(res))
	}
	res = sh(t, base, []string{"--allow-write", d}, fmt.Sprintf(`mv %s/sub/link %s/link`, r, d))
	if res.code != 0 {
		if strings.Contains(res.stderr, "Permission denied") {
			t.Logf("run 2 could not move the link out of root's tree: %s", res.stderr)
			return
		}
		t.Fatalf("run 2: exit %d: %s %s", res.code, res.stdout, res.stderr+errorMessage(res))
	}
	link := filepath.Join(d, "link")
	if uid, _, mode := lstatOwner(t, link); uid != 0 || mode&os.ModeSymlink == 0 {
		t.Fatalf("the premise: %s is %v of uid %d, not a root-owned link", link, mode, uid)
	}

	for _, flags := range [][]string{
		{"--allow-write", link},
		{"--allow-read", link},
	} {
		res := sh(t, base, flags, fmt.Sprintf(`cat %s/secret; echo pwned > %s/evil && echo WROTE`, link, link))
		if strings.Contains(res.stdout, "outside-secret") || strings.Contains(res.stdout, "WROTE") {
			t.Errorf("%v: a root-owned link a sandbox made, moved out of the marked tree, was followed: %q", flags, res.stdout)
		}
	}
	if _, err := os.Lstat(filepath.Join(outside, "evil")); err == nil {
		uid, _, _ := lstatOwner(t, filepath.Join(outside, "evil"))
		t.Errorf("the sandbox wrote %s (as uid %d on the host) through the moved link", filepath.Join(outside, "evil"), uid)
	}
}
