package runner

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSweep(t *testing.T) {
	w := t.TempDir()
	mk := func(rel, content string) {
		p := filepath.Join(w, rel)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		_ = os.WriteFile(p, []byte(content), 0o644)
	}
	mk(".bashrc", "pre-existing")
	mk(".mcp.json", "{}")
	mk("sub/.zshrc", "evil")
	mk("new/.git/hooks/pre-commit.sample", "sample")
	mk("new/.git/hooks/pre-push", "evil")
	mk("new/.git/config", "[core]\n\trepositoryformatversion = 0\n\tbare = false\n[remote \"origin\"]\n\turl = x\n")
	mk("bad/.git/config", "[core]\n\tfsmonitor = evil\n")
	mk("alias/.git/config", "[alias]\n\tx = !sh\n")
	mk("keys/new.key", "k")
	mk("keys/old.key", "k")
	plan := &Plan{
		Writable:       []WritableRoot{{Src: w, Dst: w}},
		Protected:      []string{filepath.Join(w, ".bashrc"), filepath.Join(w, "keys/old.key")},
		DenyWriteGlobs: []string{filepath.Join(w, "keys/*.key")},
	}
	vs := sweep(plan)
	gone := []string{".mcp.json", "sub/.zshrc", "new/.git/hooks/pre-push", "bad/.git/config", "keys/new.key"}
	kept := []string{".bashrc", "new/.git/hooks/pre-commit.sample", "new/.git/config", "keys/old.key", "alias/.git"}
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
	if _, err := os.Lstat(filepath.Join(w, "alias/.git/config")); err == nil {
		t.Error("a config with a shell alias should have been removed")
	}
	if len(vs) < len(gone) {
		t.Errorf("want a violation per removal, got %d: %+v", len(vs), vs)
	}
}

func TestUnsafeGitConfigKey(t *testing.T) {
	dir := t.TempDir()
	for body, want := range map[string]string{
		"[core]\n\tbare = false\n\tfilemode = true\n":  "",
		"[core]\n\tsshCommand = evil\n":                "core.sshcommand",
		"[branch \"main\"]\n\tremote = origin\n":       "",
		"[filter \"lfs\"]\n\tclean = evil\n":           "filter.*.clean",
		"[user]\n\tname = x\n[include]\n\tpath = /e\n": "include.path",
		"# comment\n[init]\n\tdefaultBranch = main\n":  "",
	} {
		p := filepath.Join(dir, "c")
		_ = os.WriteFile(p, []byte(body), 0o644)
		if got := unsafeGitConfigKey(p); got != want {
			t.Errorf("%q: got %q, want %q", body, got, want)
		}
	}
}
