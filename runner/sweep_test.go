package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSweep(t *testing.T) {
	w := t.TempDir()
	victim := t.TempDir()
	mk := func(rel, content string) {
		p := filepath.Join(w, rel)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		_ = os.WriteFile(p, []byte(content), 0o644)
	}
	if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Before the run: the user's own files, some deeper than the plan
	// protects.
	mk(".bashrc", "pre-existing")
	mk("keys/old.key", "k")
	mk("a/b/c/d/e/.git/hooks/pre-commit", "user's hook")
	mk("a/b/c/d/e/.vscode/settings.json", "user's")
	mk("a/b/c/d/f/.vscode/settings.json", "user's")
	mk("staged/hooks/post-checkout", "evil, made by an earlier run")
	mk("staged/vscode/tasks.json", "evil, made by an earlier run")
	time.Sleep(100 * time.Millisecond)
	since := time.Now()
	// The run.
	mk(".mcp.json", "{}")
	mk("sub/.zshrc", "evil")
	mk("new/.git/hooks/pre-commit.sample", "sample")
	mk("new/.git/hooks/pre-push", "evil")
	mk("new/.git/config", "[core]\n\trepositoryformatversion = 0\n\tbare = false\n[remote \"origin\"]\n\turl = x\n")
	mk("bad/.git/config", "[core]\n\tfsmonitor = evil\n")
	mk("alias/.git/config", "[alias]\n\tx = !sh\n")
	mk("keys/new.key", "k")
	mk("x/y/z/q/r/s/t/.claude/commands/evil.md", "evil")
	mk("a/b/c/d/e/.git/hooks/post-checkout", "evil")
	mk("a/b/c/d/f/.vscode/settings.json", "tampered")
	// Renamed into place: the directories' files keep their old times.
	_ = os.MkdirAll(filepath.Join(w, "renamed", ".git"), 0o755)
	_ = os.Rename(filepath.Join(w, "staged/hooks"), filepath.Join(w, "renamed/.git/hooks"))
	_ = os.Rename(filepath.Join(w, "staged/vscode"), filepath.Join(w, "renamed/.vscode"))
	_ = os.MkdirAll(filepath.Join(w, "linked", ".git"), 0o755)
	_ = os.Symlink(victim, filepath.Join(w, "linked", ".git", "hooks"))
	_ = os.Symlink(victim, filepath.Join(w, ".idea"))
	_ = os.Symlink(victim, filepath.Join(w, "keysdir"))
	plan := &Plan{
		Writable:       []WritableRoot{{Src: w, Dst: w}},
		Protected:      []string{filepath.Join(w, ".bashrc"), filepath.Join(w, "keys/old.key")},
		ProtectedFound: []string{filepath.Join(w, ".bashrc"), filepath.Join(w, "a/b/c/d/e/.git/hooks"), filepath.Join(w, "a/b/c/d/e/.vscode"), filepath.Join(w, "a/b/c/d/f/.vscode")},
		DenyWriteGlobs: []string{filepath.Join(w, "keys/*.key"), filepath.Join(w, "keysdir/keep")},
	}
	vs := sweep(plan, since)
	gone := []string{".mcp.json", "sub/.zshrc", "new/.git/hooks/pre-push", "bad/.git/config", "keys/new.key",
		"x/y/z/q/r/s/t/.claude/commands", "a/b/c/d/e/.git/hooks/post-checkout", "a/b/c/d/f/.vscode/settings.json",
		"linked/.git/hooks", ".idea", "alias/.git/config", "renamed/.git/hooks/post-checkout", "renamed/.vscode/tasks.json"}
	kept := []string{".bashrc", "new/.git/hooks/pre-commit.sample", "new/.git/config", "keys/old.key", "alias/.git",
		"a/b/c/d/e/.git/hooks/pre-commit", "a/b/c/d/e/.vscode/settings.json", "keysdir"}
	for _, g := range gone {
		if _, err := os.Lstat(filepath.Join(w, g)); err == nil {
			t.Errorf("%s should have been removed", g)
		}
	}
	for _, k := range kept {
		if _, err := os.Lstat(filepath.Join(w, k)); err != nil {
			t.Errorf("%s should have been kept", k)
		}
	}
	if b, err := os.ReadFile(filepath.Join(victim, "keep")); err != nil || string(b) != "precious" {
		t.Fatalf("the sweep followed a link: %q %v", b, err)
	}
	if len(vs) < len(gone) {
		t.Errorf("want a violation per removal, got %d: %+v", len(vs), vs)
	}
	for _, v := range vs {
		if strings.Contains(v.Rule+v.Action, "fsmonitor") || strings.Contains(v.Rule+v.Action, "alias") {
			t.Errorf("a violation quotes the file's content: %+v", v)
		}
	}
}

func TestSweepTooDeep(t *testing.T) {
	w := t.TempDir()
	since := time.Now().Add(-time.Second)
	p := w
	for i := 0; i < maxSweepDepth+5; i++ {
		p = filepath.Join(p, "d")
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Skip("cannot build a tree that deep here:", err)
	}
	vs := sweep(&Plan{Writable: []WritableRoot{{Src: w, Dst: w}}}, since)
	if len(vs) != 1 || !strings.Contains(vs[0].Action, "256") {
		t.Fatalf("want one removal at the nesting limit, got %+v", vs)
	}
	if _, err := os.Stat(filepath.Join(w, "d")); err != nil {
		t.Fatal("the part above the limit should stay")
	}
}

func TestUnsafeGitConfigKey(t *testing.T) {
	for body, want := range map[string]string{
		"[core]\n\tbare = false\n\tfilemode = true\n":  "",
		"[core]\n\tsshCommand = evil\n":                "core.sshcommand",
		"[branch \"main\"]\n\tremote = origin\n":       "",
		"[filter \"lfs\"]\n\tclean = evil\n":           "filter.*.clean",
		"[user]\n\tname = x\n[include]\n\tpath = /e\n": "include.path",
		"# comment\n[init]\n\tdefaultBranch = main\n":  "",
		"[core\n": "?",
		// Read otherwise by git than by a lenient parser: both are core.fsmonitor to git.
		"[advice] [core]\n\tfsmonitor = evil\n":                "?",
		"[core]\n\teol = lf\\\n[advice]\n\tfsmonitor = evil\n": "?",
		"[core] fsmonitor = evil\n":                            "?",
		"[remote \"o\\\"]\n\turl = x\n":                        "?",
	} {
		if got := unsafeGitConfigKey([]byte(body)); got != want {
			t.Errorf("%q: got %q, want %q", body, got, want)
		}
	}
}
