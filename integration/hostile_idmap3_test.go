//go:build linux

package integration

// Third round of attacks on writable paths through idmapped mounts
// (runner/idmap_linux.go). Each test is a finding: it fails until fixed.

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// hostGit runs git as root in dir the way an operator would after a run
// (no global or system config, so that only the repository's own counts),
// and returns its combined output.
// requireGit skips a test that needs git on the host.
func requireGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
}

func hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	requireGit(t)
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b")
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// Attack (code inside the sandbox, one run): `sudo srt-mcp exec
// --allow-write .` in a root-owned git checkout. .git/hooks and .git/config
// are protected (read-only binds, swept when new), but git reads its
// configuration from elsewhere too: the sandbox writes .git/commondir
// ("../cfg") and a cfg/ directory holding a copy of HEAD, refs and objects
// and a config with core.fsmonitor = "<command>". Neither name is
// protected, so both stay. The next `git status` the operator (root) runs
// in the checkout reads cfg/config as the repository's own and runs the
// command as root. Before the mapping, a root runner could not write a
// root-owned checkout at all, and a checkout the sandbox user owns is
// refused by root's git ("dubious ownership"); written through the
// mapping, .git/commondir and cfg/ are root's, so git trusts them.
// (.git/config.worktree with extensions.worktreeConfig, a "safe" key the
// sweep lets through, is a second way in.)
//
// What went wrong: the protected names are a list of files git reads
// (hooks, config), not the repository directory; files that redirect
// where git reads its configuration (commondir, config.worktree, and
// whatever git adds next) are writable.
//
// Suggested fix: treat every .git directory in a writable root as
// protected except the object and ref stores (objects/, refs/, logs/,
// index, HEAD, ORIG_HEAD, FETCH_HEAD, packed-refs, COMMIT_EDITMSG), i.e.
// protect commondir, config.worktree, gitdir, info/ and any new top-level
// file; or, where a mapped root holds a .git, bind .git read-only whole.
func TestHostileIdmapGitCommondir(t *testing.T) {
	parallel(t)
	requireRootIdmap(t)
	repo := rootProject(t)
	hostGit(t, repo, "init", "-q", ".")
	hostGit(t, repo, "commit", "-q", "--allow-empty", "-m", "init")
	marker := filepath.Join(filepath.Dir(repo), "ran-as-root")
	script := fmt.Sprintf(`set -e
mkdir cfg
cp -r .git/HEAD .git/refs .git/objects cfg/
printf '[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = "id -u > %s; false"\n' > cfg/config
echo ../cfg > .git/commondir
echo planted`, marker)
	r := sh(t, repo, []string{"--allow-write", repo}, script)
	if r.code != 0 || !strings.Contains(r.stdout, "planted") {
		t.Fatalf("the premise: the run could not write the checkout: exit %d %q %s", r.code, r.stdout, r.stderr+errorMessage(r))
	}
	out := hostGit(t, repo, "status")
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("root's `git status` in the checkout ran the sandbox's command (as uid %s) through .git/commondir: %s", strings.TrimSpace(string(b)), out)
	}
}

// Attack (code inside the sandbox, two runs): a .git/config the run
// creates is kept when its keys are safe (the sweep judges it by content),
// and an existing one is bound read-only in later runs and skipped by the
// sweep ("read-only for the whole run: unchanged"). Run 1 (a root-owned
// project without .git) runs `git init` and hard-links .git/config to
// notes.txt: both names are the same inode, the config is safe, and the
// sweep keeps it. Run 2: .git/config exists, so it is a read-only bind;
// notes.txt is not protected, and a write to it is a write to the config:
// core.fsmonitor = <command>. The sweep skips .git/config (protected, so
// "unchanged"), and root's next `git status` there runs the command as
// root (the repository is root's, so git trusts it).
//
// What went wrong: the read-only bind protects a name, not the file; a
// second link to the inode in the writable tree reaches it. The same works
// for any protected file a run may leave behind (hooks/*.sample), and,
// without the mapping, for a regular user's srt-mcp (their own git).
//
// Suggested fix: a protected regular file with more than one link is not
// protected by a bind: refuse the run (or break the link by copying, as
// root, before the run), and have the sweep judge a protected file whose
// ctime moved during the run instead of skipping it; and a run should not
// leave a protected name with nlink > 1 behind (the sweep removes it).
func TestHostileIdmapHardLinkedGitConfig(t *testing.T) {
	parallel(t)
	requireRootIdmap(t)
	requireGit(t)
	repo := rootProject(t)
	marker := filepath.Join(filepath.Dir(repo), "ran-as-root")
	r := sh(t, repo, []string{"--allow-write", repo}, `git init -q . && ln .git/config notes.txt && echo linked`)
	if r.code != 0 || !strings.Contains(r.stdout, "linked") {
		t.Fatalf("run 1: exit %d %q %s", r.code, r.stdout, r.stderr+errorMessage(r))
	}
	if _, err := os.Lstat(filepath.Join(repo, ".git", "config")); err != nil {
		// The fix: a protected file the run made with a second name is
		// removed by the sweep, however safe its content.
		t.Logf("run 1's hard-linked .git/config was removed by the sweep: %v", err)
		return
	}
	r = sh(t, repo, []string{"--allow-write", repo}, fmt.Sprintf(`printf '[core]\n\tfsmonitor = "id -u > %s; false"\n' >> notes.txt && echo appended`, marker))
	if r.code != 0 || !strings.Contains(r.stdout, "appended") {
		t.Fatalf("run 2: exit %d %q %s", r.code, r.stdout, r.stderr+errorMessage(r))
	}
	cfg, _ := os.ReadFile(filepath.Join(repo, ".git", "config"))
	out := hostGit(t, repo, "status")
	if b, err := os.ReadFile(marker); err == nil || strings.Contains(string(cfg), "fsmonitor") {
		t.Errorf("the protected .git/config was rewritten through a hard link the sandbox made (git as root ran it: %q): %q; git: %s", b, cfg, out)
	}
}

// Attack (code inside the sandbox): a root-owned writable tree holds a file
// of root's with file capabilities but no execute bit (a copied or staged
// binary, a package being built: setcap before chmod +x, or a mode kept
// from an archive). refusePrivilegedFiles looks for capabilities only on
// files with an execute bit, but the sandbox, as the owner, may chmod the
// file: it stores its own code through a shared mmap (which, unlike
// write(2) and truncate, does not drop security.capability), then chmod
// 0755 (no set-id bit: seccomp lets it through, and a chmod keeps the
// capabilities). On the host the file is now an executable of root's with
// the capability set and the sandbox's code: whoever runs it gets the
// capability (cap_net_raw here; cap_setuid or cap_dac_override likewise).
//
// What went wrong: "a file of the owner's with security.capability" is
// checked only when st.Mode&0o111 != 0; the owner can add the execute bit.
//
// Suggested fix: refuse any file of the owner's (and, to be safe, of the
// group's) that carries security.capability, whatever its mode.
func TestHostileIdmapCapabilityWithoutExecBit(t *testing.T) {
	parallel(t)
	requireRootIdmap(t)
	dir := rootProject(t)
	bin := filepath.Join(dir, "staged")
	copyProgram(t, bin, 0o644)
	// struct vfs_cap_data, revision 2, effective, permitted = CAP_NET_RAW (13).
	caps := make([]byte, 20)
	binary.LittleEndian.PutUint32(caps[0:], 0x02000000|0x1)
	binary.LittleEndian.PutUint32(caps[4:], 1<<13)
	if err := unix.Setxattr(bin, "security.capability", caps, 0); err != nil {
		t.Skipf("cannot set file capabilities here: %v", err)
	}
	script := `python3 - <<'EOF'
import os, mmap
fd = os.open("staged", os.O_RDWR)
m = mmap.mmap(fd, 0)
m[0:8] = b"SANDBOX!"
m.flush(); m.close(); os.close(fd)
os.chmod("staged", 0o755)
print("stored")
EOF`
	r := sh(t, dir, []string{"--allow-write", dir}, script)
	t.Logf("run: exit %d %q %s", r.code, r.stdout, r.stderr+errorMessage(r))
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	_, _, mode := lstatOwner(t, bin)
	_, xerr := unix.Getxattr(bin, "security.capability", nil)
	if strings.HasPrefix(string(b), "SANDBOX!") && mode&0o111 != 0 && xerr == nil {
		t.Errorf("the sandbox turned a root-owned file with file capabilities into an executable of its own code that keeps them (%v): whoever runs it on the host gets the capability", mode)
	}
}

// Attack (code inside the sandbox): a root-owned writable tree holds hard
// links to root's files outside it — common where root ran `pnpm install`
// (node_modules hard-links the global store), `uv sync` (hard links from
// ~/.cache/uv on Linux), `git clone --local` (objects), `cp -al` or
// rsnapshot. The sandbox, writing as root, opens the tree's name of such a
// file and rewrites it (chmod first if it is read-only: it is the owner):
// the file outside its policy changes too (every project using that
// package, the source repository's objects). Without the mapping the
// sandbox user could write none of these; with it, "nowhere else" in the
// design comment does not hold for the other names of an inode.
//
// What went wrong: refusePrivilegedFiles walks the tree but does not look
// at link counts; the idmapped mount gives the owner's rights to every
// inode that has a name in the tree, wherever its other names are.
//
// Suggested fix: in the same walk, count each regular file of the owner's
// by (dev, ino); a file whose st_nlink is larger than the names found in
// the tree has a name outside it: refuse the tree with that path and the
// fix (copy it, e.g. pnpm --package-import-method=copy, uv
// --link-mode=copy).
func TestHostileIdmapHardLinkOutside(t *testing.T) {
	parallel(t)
	requireRootIdmap(t)
	dir := rootProject(t)
	outside := filepath.Join(filepath.Dir(dir), "store") // root's, outside every policy
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(outside, "index.js")
	if err := os.WriteFile(shared, []byte("module.exports = 1\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(shared, filepath.Join(dir, "index.js")); err != nil {
		t.Fatal(err)
	}
	r := sh(t, dir, []string{"--allow-write", dir}, `chmod 644 index.js; echo 'require("child_process").exec("evil")' > index.js; chmod 666 index.js; echo done`)
	t.Logf("run: exit %d %q %s", r.code, r.stdout, r.stderr+errorMessage(r))
	b, _ := os.ReadFile(shared)
	_, _, mode := lstatOwner(t, shared)
	if strings.Contains(string(b), "evil") || mode.Perm() != 0o444 {
		t.Errorf("the sandbox changed %s, outside its policy, through a hard link in the tree: now %v %q", shared, mode, b)
	}
}

// Attack (another API key, a session): the operator allows a shared drop
// directory D owned by root with mode 1777 (as /tmp is), where sessions
// write as their own uids (no mapping: they may write it by its modes).
// Root keeps private things there too (the operator's own files, a root
// service's private directory: /tmp/systemd-private-*, /tmp/tmux-0, a
// script's mktemp). A session names D/root-private (0700, root's) or
// D/root-secret (0600, root's) as its allow_write: it is in the ceiling,
// the session's uid cannot write it, and its owner and group are those of
// D (root:root), so ownerAllowed lets it be mapped: the session reads and
// rewrites root's private files as root.
//
// What went wrong: ownerAllowed compares the owner with the ceiling
// root's, but a ceiling root the sandbox user can write by its modes is
// never mapped itself: the operator allowed it for each sandbox's own uid,
// not for root's identity. Its owner stands for nobody the operator meant
// to lend.
//
// Suggested fix: map a call's narrower path only when the ceiling root it
// lies in would itself be mapped (the sandbox user may not write it by its
// modes, in particular it is not group/other-writable or sticky); else
// refuse as before the feature.
func TestHostileIdmapSharedDirRootPrivate(t *testing.T) {
	parallel(t)
	requireRootIdmap(t)
	shared := reachableProject(t)
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	priv := filepath.Join(shared, "root-private")
	if err := os.Mkdir(priv, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(priv, "secret"), []byte("root-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(shared, "root-file")
	if err := os.WriteFile(file, []byte("root-file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startData(t, []string{"--backend", "native"}, "--allow-write", shared)
	fs := func(p string) map[string]any {
		return map[string]any{"filesystem": map[string]any{"allow_write": []string{p}}}
	}
	sid := d.upload("", "in.txt", "x")
	v, _ := d.call("execute_code", map[string]any{"session_id": sid,
		"command":        fmt.Sprintf("cat %s/secret; echo session-was-here >> %s/secret", priv, priv),
		"sandbox_config": fs(priv)})
	got, _ := os.ReadFile(filepath.Join(priv, "secret"))
	if strings.Contains(fmt.Sprint(v), "root-secret") || strings.Contains(string(got), "session-was-here") {
		t.Errorf("a session read or rewrote root's 0700 directory in a 1777 allowed directory by naming it: %v; the file now holds %q", v, got)
	}
	v, _ = d.call("execute_code", map[string]any{"session_id": sid,
		"command":        fmt.Sprintf("cat %s", file),
		"sandbox_config": fs(file)})
	if strings.Contains(fmt.Sprint(v), "root-file-secret") {
		t.Errorf("a session read root's 0600 file in a 1777 allowed directory by naming it: %v", v)
	}
}
