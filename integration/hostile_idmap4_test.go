//go:build linux

package integration

// Fourth round of attacks on writable paths through idmapped mounts
// (runner/idmap_linux.go, runner/sweep.go, policy/mandatory.go). Each test
// is a finding: it fails until fixed. In each, what the sandbox leaves in
// a root-owned tree is root's on the host, so root's git trusts it
// (before the mapping, a root runner could not write such a tree, and a
// tree the sandbox user owns is refused by root's git: "dubious
// ownership").

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

// Attack (code inside the sandbox, one run): `sudo srt-mcp exec
// --allow-write .` in a root-owned project that is not yet a repository
// (or any directory below one). The sandbox runs `git init` and rewrites
// the new .git/config. The sweep keeps a new .git/config whose keys are
// all in safeGitKeys, judging it with a line parser of its own, and that
// parser does not read git's syntax as git does:
//   - `[advice] [core]` on one line is two section headers to git (the
//     second one wins), one header "advice" and a key "[core]" to the
//     sweep ("advice.*" is safe);
//   - a value ending in a backslash continues on the next line in git, so
//     `eol = lf\` swallows the next line: `[advice]` is part of core.eol's
//     value to git, a new section to the sweep.
//
// In both, the next line `fsmonitor = "<command>"` is core.fsmonitor to
// git and advice.fsmonitor (safe) to the sweep. The config is kept, and
// the operator's next `git status` in the project runs the command as
// root.
//
// What went wrong: unsafeGitConfigKey is a second implementation of git's
// config grammar; wherever it disagrees with git, a key git acts on is
// named differently to the sweep.
//
// Suggested fix: do not parse: ask git (`git config --file F --list
// --null` run with GIT_CONFIG_NOSYSTEM=1, GIT_CONFIG_GLOBAL=/dev/null,
// no includes followed, as the runner on a copy of the bytes) and judge
// the keys it prints; or refuse anything but a strict subset (one
// `[section]` or `[section "sub"]` header alone on its line, `key = value`
// lines whose value has no backslash, quote or bracket), removing the file
// otherwise.
func TestHostileIdmapGitConfigParser(t *testing.T) {
	parallel(t)
	requireRootIdmap(t)
	requireGit(t)
	for _, tc := range []struct{ name, config string }{
		{"two headers on one line", `[core]\n\trepositoryformatversion = 0\n\tbare = false\n[advice] [core]\n\tfsmonitor = "id -u > %s; false"\n`},
		{"a continued value", `[core]\n\trepositoryformatversion = 0\n\tbare = false\n\teol = lf\\\n[advice]\n\tfsmonitor = "id -u > %s; false"\n`},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "-"), func(t *testing.T) {
			repo := rootProject(t)
			marker := filepath.Join(filepath.Dir(repo), "ran-as-root")
			script := fmt.Sprintf("git init -q . && printf '"+tc.config+"' > .git/config && git config --list --file .git/config && echo planted", marker)
			r := sh(t, repo, []string{"--allow-write", repo}, script)
			if r.code != 0 || !strings.Contains(r.stdout, "planted") {
				t.Fatalf("the premise: the run could not write the project: exit %d %q %s", r.code, r.stdout, r.stderr+errorMessage(r))
			}
			if !strings.Contains(r.stdout, "core.fsmonitor=") {
				t.Fatalf("the premise: git does not read core.fsmonitor in the planted config: %q", r.stdout)
			}
			cfg, _ := os.ReadFile(filepath.Join(repo, ".git", "config"))
			out := hostGit(t, repo, "status")
			if b, err := os.ReadFile(marker); err == nil {
				t.Errorf("the sweep kept a .git/config git reads as core.fsmonitor (%q), and root's `git status` ran the sandbox's command as uid %s: %s", cfg, strings.TrimSpace(string(b)), out)
			}
		})
	}
}

// Attack (code inside the sandbox, two runs): the sweep removes a
// protected name the run created or changed, and "changed" is the file's
// ctime, not older than the run's start. A rename changes the ctime of the
// renamed inode only, not of what is below it. Run 1 (a root-owned
// project without .git) makes a directory g/ holding a repository's
// HEAD, objects, refs and a config with core.fsmonitor = <command>:
// nothing there is a protected name, so the sweep keeps it all. Run 2
// (later than the sweep's slack) does `mv g .git`. Its sweep finds
// .git/config, a protected name, but its ctime is run 1's: "unchanged",
// kept. The operator's `git status` in the project (or in any directory
// of it where the sandbox put a .git this way: a subdirectory of a
// repository the operator allowed) runs the command as root. The same
// moves a prepared .vscode/tasks.json, .git/hooks/* or .claude/commands/*
// into place.
//
// What went wrong: ctime says when the inode changed, not when it came to
// be at that name; a protected name can appear by renaming any directory
// above it, and that directory's ctime is the only one that moves.
//
// Suggested fix: the plan records which protected names exist (it already
// does: plan.Protected); the sweep judges every protected name that was
// not there at the start as new, whatever its ctime (removed, or for
// .git/config judged by content); or, more cheaply, treat a protected
// name as changed when the ctime of any directory between it and the
// writable root moved during the run.
func TestHostileIdmapRenamedIntoGit(t *testing.T) {
	parallel(t)
	requireRootIdmap(t)
	requireGit(t)
	repo := rootProject(t)
	marker := filepath.Join(filepath.Dir(repo), "ran-as-root")
	r := sh(t, repo, []string{"--allow-write", repo}, fmt.Sprintf(`set -e
git init -q --bare g
printf '[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = "id -u > %s; false"\n' > g/config
echo prepared`, marker))
	if r.code != 0 || !strings.Contains(r.stdout, "prepared") {
		t.Fatalf("run 1: exit %d %q %s", r.code, r.stdout, r.stderr+errorMessage(r))
	}
	time.Sleep(2500 * time.Millisecond) // past the sweep's slack on any filesystem
	r = sh(t, repo, []string{"--allow-write", repo}, `mv g .git && echo moved`)
	if r.code != 0 || !strings.Contains(r.stdout, "moved") {
		t.Fatalf("run 2: exit %d %q %s", r.code, r.stdout, r.stderr+errorMessage(r))
	}
	cfg, _ := os.ReadFile(filepath.Join(repo, ".git", "config"))
	out := hostGit(t, repo, "status")
	if b, err := os.ReadFile(marker); err == nil || strings.Contains(string(cfg), "fsmonitor") {
		t.Errorf("a .git/config moved into place under a renamed directory was kept (%q), and root's `git status` ran %q: %s", cfg, b, out)
	}
}

// Attack (code inside the sandbox, one run): `sudo srt-mcp exec
// --allow-write .` in a root-owned checkout with a submodule (its gitdir
// is .git/modules/<name>, the usual layout since git 1.7.8; lib/.git is a
// file pointing there). .git/config, .git/hooks, commondir,
// config.worktree and worktrees are protected, but a submodule's gitdir
// is a whole repository of its own below .git/modules, and none of its
// names is: the sandbox appends core.fsmonitor = <command> to
// .git/modules/lib/config and writes .git/modules/lib/hooks/post-checkout.
// The operator's next `git status` in the superproject checks the
// submodule (git status runs in it) and runs the fsmonitor command as
// root; `git submodule update` runs the hook as root.
//
// What went wrong: IsMandatoryDenied matches ".git/config" and
// ".git/hooks" as the last components under a ".git" directory; the
// config and hooks of the repositories git keeps inside .git (modules/*,
// and modules/*/modules/* for nested ones) are not at those names.
//
// Suggested fix: protect .git/modules whole (a read-only bind where it
// exists, swept when new), or apply the gitdir rules to every directory
// below .git/modules (config, hooks, commondir, config.worktree,
// worktrees, at any depth); the earlier suggestion (every .git directory
// read-only except objects/, refs/, logs/, index, HEAD and the like)
// covers this too.
func TestHostileIdmapSubmoduleGitdir(t *testing.T) {
	parallel(t)
	requireRootIdmap(t)
	requireGit(t)
	upstream := rootProject(t)
	hostGit(t, upstream, "init", "-q", ".")
	if err := os.WriteFile(filepath.Join(upstream, "f"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostGit(t, upstream, "add", "f")
	hostGit(t, upstream, "commit", "-q", "-m", "init")
	repo := rootProject(t)
	hostGit(t, repo, "init", "-q", ".")
	// file:// so that the objects are copied, not hard-linked (a tree with
	// hard links outside it is refused, rightly).
	out := hostGit(t, repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", "file://"+upstream, "lib")
	hostGit(t, repo, "commit", "-q", "-m", "submodule")
	if _, err := os.Stat(filepath.Join(repo, ".git", "modules", "lib", "config")); err != nil {
		t.Fatalf("the premise: no submodule gitdir: %v: %s", err, out)
	}
	marker := filepath.Join(filepath.Dir(repo), "ran-as-root")
	hookMarker := filepath.Join(filepath.Dir(repo), "hook-ran-as-root")
	r := sh(t, repo, []string{"--allow-write", repo}, fmt.Sprintf(`set -e
printf '[core]\n\tfsmonitor = "id -u > %s; false"\n' >> .git/modules/lib/config
printf '#!/bin/sh\nid -u > %s\n' > .git/modules/lib/hooks/post-checkout
chmod 755 .git/modules/lib/hooks/post-checkout
echo planted`, marker, hookMarker))
	if r.code != 0 || !strings.Contains(r.stdout, "planted") {
		if strings.Contains(r.stderr, "Read-only file system") {
			t.Logf("the fix: the submodule's git directory is protected: %s", r.stderr)
			return
		}
		t.Fatalf("the premise: the run could not write the checkout: exit %d %q %s", r.code, r.stdout, r.stderr+errorMessage(r))
	}
	status := hostGit(t, repo, "status")
	update := hostGit(t, repo, "-c", "protocol.file.allow=always", "submodule", "update", "--force", "--checkout")
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("root's `git status` in the superproject ran the sandbox's core.fsmonitor from .git/modules/lib/config (as uid %s): %s", strings.TrimSpace(string(b)), status)
	}
	if b, err := os.ReadFile(hookMarker); err == nil {
		t.Errorf("root's `git submodule update` ran the sandbox's hook .git/modules/lib/hooks/post-checkout (as uid %s): %s", strings.TrimSpace(string(b)), update)
	}
}

// Attack (code inside the sandbox, then another local user): `sudo srt-mcp
// exec --allow-write .` in a root-owned checkout. .git/config and
// .git/hooks are read-only binds for the run, and .git is pinned (bound
// over itself) so that it cannot be renamed away; but the pin is
// writable, and the sandbox is .git's owner on the mapped mount: `chmod
// 777 .git` (no set-id bit: seccomp lets it through; an ACL through
// system.posix_acl_access or _default works as well) goes through and
// stays on the host. After the run any local user may rename root's
// .git/config away and put their own in its place (a directory writable by
// all, not sticky), and root's next `git status` runs their
// core.fsmonitor as root: the repository, its .git and the worktree are
// still root's, so git trusts it. The sweep judges names, never the modes
// of the directories that hold them.
//
// What went wrong: the protection of a protected name is the bind during
// the run; after it, what protects the name on the host is its
// directory's modes, and the sandbox (as owner) may change them.
//
// Suggested fix: record the mode, owner and ACLs of every directory
// between a writable root and a protected name (the pinned ones, the root
// itself, and each .git/.claude/.vscode directory) at plan time and, after
// the run, restore any that the run loosened (group/other write, a new
// ACL, a default ACL) and report it; or bind those directories so that
// their attributes cannot change (not possible with a bind: hence the
// restore); at the least refuse a mapped tree whose protected names'
// directories others may write.
func TestHostileIdmapLoosenedProtectedDir(t *testing.T) {
	parallel(t)
	requireRootIdmap(t)
	requireGit(t)
	repo := reachableProject(t)
	hostGit(t, repo, "init", "-q", ".")
	hostGit(t, repo, "commit", "-q", "--allow-empty", "-m", "init")
	// chmod to a mode others may write (refused), and a umask of 0 (the
	// sweep takes the bits off what the run made so).
	r := sh(t, repo, []string{"--allow-write", repo}, `chmod 777 .git; umask 0; mkdir open-dir && echo made`)
	t.Logf("the run: exit %d %q %s", r.code, r.stdout, r.stderr+errorMessage(r))
	if !strings.Contains(r.stdout, "made") {
		t.Fatalf("the premise: the run could not write the checkout: exit %d %q %s", r.code, r.stdout, r.stderr+errorMessage(r))
	}
	if _, _, m := lstatOwner(t, filepath.Join(repo, "open-dir")); m.Perm()&0o022 != 0 {
		t.Errorf("a directory the run made with umask 0 stays %v in root's tree: other local users may write it", m)
	}
	_, _, mode := lstatOwner(t, filepath.Join(repo, ".git"))
	t.Logf("after the run, root's .git is %v", mode)
	if mode.Perm()&0o002 == 0 {
		return // the fix: the run's loosening did not last
	}
	// Another local user (uid 1000) replaces root's .git/config.
	marker := filepath.Join(filepath.Dir(repo), "ran-as-root")
	local := exec.Command("/bin/sh", "-c", fmt.Sprintf(`cd %s && mv .git/config .git/config.old && printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "id -u > %s; false"\n' > .git/config && echo replaced`, repo, marker))
	local.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000, Groups: []uint32{}}}
	lout, err := local.CombinedOutput()
	if err != nil || !strings.Contains(string(lout), "replaced") {
		t.Fatalf("the local user could not reach the checkout (its parents must be searchable): %v %s", err, lout)
	}
	out := hostGit(t, repo, "status")
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("the sandbox made root's .git writable by all (%v); uid 1000 then replaced .git/config and root's `git status` ran its command as uid %s: %s", mode, strings.TrimSpace(string(b)), out)
	} else {
		t.Errorf("the sandbox made root's .git writable by all (%v), and uid 1000 replaced .git/config there (git: %s)", mode, out)
	}
}
