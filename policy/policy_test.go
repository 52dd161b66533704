package policy

import (
	"testing"
)

func TestExpandPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"~", "/home/u"}, {"~/", "/home/u"}, {"~/.ssh", "/home/u/.ssh"}, {"~/a/../b", "/home/u/b"},
		{"/abs/./x/", "/abs/x"}, {"rel", "/work/rel"}, {".", "/work"}, {"..", "/"}, {"../../..", "/"},
		{"a/**/*.pem", "/work/a/**/*.pem"},
	} {
		if got := ExpandPath(tc.in, "/work", "/home/u"); got != tc.want {
			t.Errorf("ExpandPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		p, root string
		want    bool
	}{
		{"/a", "/a", true}, {"/a/b", "/a", true}, {"/ab", "/a", false}, {"/a", "/a/b", false},
		{"/", "/", true}, {"/x", "/", true}, {"/tmp/x", "/tmp", true}, {"/tmpx", "/tmp", false},
		{"/tmp/../etc", "/tmp", false}, {"/tmp/x/../../etc", "/tmp", false}, {"/tmp/./x", "/tmp", true}, {"tmp/x", "/tmp", false}, {"/etc", "/tmp/..", true},
	} {
		if got := Within(tc.p, tc.root); got != tc.want {
			t.Errorf("Within(%q, %q) = %v", tc.p, tc.root, got)
		}
	}
}

func TestIsGlob(t *testing.T) {
	for s, want := range map[string]bool{
		"a": false, "/a/b.txt": false, "*.pem": true, "a?": true, "[ab]": true, "{a,b}": true, "**": true, "~/x": false,
	} {
		if IsGlob(s) != want {
			t.Errorf("IsGlob(%q) = %v", s, !want)
		}
	}
}

func TestMandatoryDenied(t *testing.T) {
	f := Filesystem{}
	for rel, want := range map[string]bool{
		".bashrc": true, "sub/.bashrc": true, "a/b/c/.zshrc": true, ".git/hooks": true, ".git/hooks/pre-commit": true,
		".git/config": true, "sub/.git/config": true, ".vscode": true, ".vscode/settings.json": true, ".idea/x": true,
		".claude/commands": true, ".claude/commands/x.md": true, ".claude/agents/a.md": true, ".claude/settings.json": false,
		".claude": false, "src/main.go": false, ".git": false, ".git/HEAD": false, ".gitignore": false, ".mcp.json": true,
		".gitmodules": true, ".gitconfig": true, ".profile": true, ".ripgreprc": true, "bashrc": false, ".bashrc.d/x": false,
		"x/.git/hooks/post-checkout": true, "config": false, "hooks": false, ".bashrc/inner": false,
	} {
		if got := f.IsMandatoryDenied(rel, false); got != want {
			t.Errorf("IsMandatoryDenied(%q) = %v, want %v", rel, got, want)
		}
	}
	if (&Filesystem{AllowGitConfig: true}).IsMandatoryDenied(".git/config", false) {
		t.Error("AllowGitConfig did not lift .git/config")
	}
	if !(&Filesystem{AllowGitConfig: true}).IsMandatoryDenied(".git/hooks/pre-commit", false) {
		t.Error("AllowGitConfig must not lift .git/hooks")
	}
	if !f.IsMandatoryDenied(".git", true) || !f.IsMandatoryDenied("sub/.git", true) {
		t.Error("a .git file (worktree) must be protected")
	}
	if f.IsMandatoryDenied(".git/x", true) {
		t.Error("only the .git file itself is protected by gitFile")
	}
	paths := f.MandatoryDenyPaths()
	has := func(ps []string, s string) bool {
		for _, p := range ps {
			if p == s {
				return true
			}
		}
		return false
	}
	if !has(paths, GitConfig) || !has(paths, ".git/hooks") || !has(paths, ".bashrc") {
		t.Errorf("MandatoryDenyPaths() = %v", paths)
	}
	if has((&Filesystem{AllowGitConfig: true}).MandatoryDenyPaths(), GitConfig) {
		t.Error("MandatoryDenyPaths with AllowGitConfig still lists .git/config")
	}
}
