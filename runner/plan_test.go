package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/srt-mcp/srt-mcp/policy"
)

// fakeHost builds a host tree under a temp dir for BuildPlan's Root.
func fakeHost(t *testing.T, files ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, f := range files {
		p := filepath.Join(root, f)
		if strings.HasSuffix(f, "/") {
			_ = os.MkdirAll(p, 0o755)
			continue
		}
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func plan(t *testing.T, root string, fs policy.Filesystem) *Plan {
	t.Helper()
	p, err := BuildPlan(PlanInput{FS: fs, Cwd: "/home/u/proj", Home: "/home/u", Root: root,
		SystemView: []string{"/usr", "/bin"}, SystemEtc: []string{"passwd"}})
	if err != nil {
		t.Fatal(err)
	}
	checkOrder(t, p)
	return p
}

// checkOrder asserts that no mount lands before a mount of its parent.
func checkOrder(t *testing.T, p *Plan) {
	t.Helper()
	seen := map[string]int{}
	for i, m := range p.Mounts {
		if m.Kind == MountRemountRO {
			continue
		}
		for d := filepath.Dir(m.Dst); d != "/"; d = filepath.Dir(d) {
			if j, ok := seen[d]; ok && j > i {
				t.Fatalf("mount %d (%s) comes before its parent's mount %d (%s)", i, m.Dst, j, d)
			}
		}
		seen[m.Dst] = i
	}
}

func find(p *Plan, kind MountKind, dst string) bool {
	for _, m := range p.Mounts {
		if m.Kind == kind && m.Dst == dst {
			return true
		}
	}
	return false
}

func TestPlanBasics(t *testing.T) {
	root := fakeHost(t, "usr/bin/sh", "etc/passwd", "etc/shadow", "home/u/proj/a.txt", "home/u/proj/vault/key", "home/u/proj/vault/pub/ok",
		"home/u/proj/.env", "home/u/proj/out/", "home/u/.ssh/id_rsa", "data/x")
	_ = os.Symlink("usr/bin", filepath.Join(root, "bin"))
	p := plan(t, root, policy.Filesystem{
		DenyRead:   []string{"vault", ".env"},
		AllowRead:  []string{"vault/pub", "/data"},
		AllowWrite: []string{"out"},
	})
	for _, want := range []struct {
		kind MountKind
		dst  string
	}{
		{MountRO, "/usr"}, {MountSymlink, "/bin"}, {MountRO, "/etc/passwd"},
		{MountRO, "/home/u/proj"}, {MountTmpfs, "/home/u/proj/vault"}, {MountHideFile, "/home/u/proj/.env"},
		{MountRO, "/home/u/proj/vault/pub"}, {MountRW, "/home/u/proj/out"}, {MountRO, "/data"},
		{MountProc, "/proc"}, {MountDev, "/dev"}, {MountTmpfs, "/tmp"}, {MountRemountRO, "/home/u/proj/vault"}, {MountRemountRO, "/"},
	} {
		if !find(p, want.kind, want.dst) {
			t.Errorf("missing %s %s in %+v", want.kind, want.dst, p.Mounts)
		}
	}
	for _, m := range p.Mounts {
		if strings.Contains(m.Dst, "shadow") || strings.Contains(m.Dst, ".ssh") || m.Dst == "/home/u" {
			t.Errorf("unexpected mount %+v", m)
		}
	}
}

func TestPlanMandatoryAndPins(t *testing.T) {
	root := fakeHost(t, "usr/", "home/u/proj/.bashrc", "home/u/proj/.git/hooks/pre-commit.sample", "home/u/proj/.git/config",
		"home/u/proj/a/b/.vscode/settings.json", "home/u/proj/a/b/c/d/.bashrc", "home/u/proj/node_modules/x/.bashrc")
	p := plan(t, root, policy.Filesystem{AllowWrite: []string{"."}})
	for _, want := range []string{"/home/u/proj/.bashrc", "/home/u/proj/.git/hooks", "/home/u/proj/.git/config", "/home/u/proj/a/b/.vscode"} {
		if !find(p, MountRO, want) {
			t.Errorf("%s should be read-only: %+v", want, p.Mounts)
		}
	}
	for _, pin := range []string{"/home/u/proj/.git", "/home/u/proj/a", "/home/u/proj/a/b"} {
		if !find(p, MountRW, pin) {
			t.Errorf("%s should be pinned (self-bind): %+v", pin, p.Mounts)
		}
	}
	if find(p, MountRO, "/home/u/proj/a/b/c/d/.bashrc") || find(p, MountRO, "/home/u/proj/node_modules/x/.bashrc") {
		t.Error("the search went deeper than 3 levels or into node_modules")
	}
	p = plan(t, root, policy.Filesystem{AllowWrite: []string{"."}, AllowGitConfig: true})
	if find(p, MountRO, "/home/u/proj/.git/config") {
		t.Error("AllowGitConfig did not lift .git/config")
	}
}

func TestPlanSymlinksAndErrors(t *testing.T) {
	root := fakeHost(t, "usr/", "home/u/proj/", "srv/real/f")
	_ = os.Symlink("/srv/real", filepath.Join(root, "home/u/proj/link"))
	_ = os.Symlink("/nowhere", filepath.Join(root, "home/u/proj/dangling"))
	_ = os.Symlink("loop2", filepath.Join(root, "home/u/proj/loop1"))
	_ = os.Symlink("loop1", filepath.Join(root, "home/u/proj/loop2"))
	p := plan(t, root, policy.Filesystem{AllowWrite: []string{"link"}, DenyRead: []string{"dangling"}})
	if !find(p, MountRW, "/srv/real") {
		t.Errorf("a writable link should bind where it points: %+v", p.Mounts)
	}
	for _, tc := range []struct {
		fs    policy.Filesystem
		field string
	}{
		{policy.Filesystem{AllowWrite: []string{"missing"}}, "filesystem.allow_write[0]"},
		{policy.Filesystem{AllowRead: []string{"/proc/1"}}, "filesystem.allow_read[0]"},
		{policy.Filesystem{AllowRead: []string{"loop1"}}, "filesystem.allow_read[0]"},
	} {
		_, err := BuildPlan(PlanInput{FS: tc.fs, Cwd: "/home/u/proj", Home: "/home/u", Root: root, SystemView: []string{"/usr"}, SystemEtc: []string{}})
		var pe *policy.Error
		if !errors.As(err, &pe) || pe.Field != tc.field {
			t.Errorf("%+v: want an error naming %s, got %v", tc.fs, tc.field, err)
		}
	}
}

func TestPlanPrivateTmp(t *testing.T) {
	root := fakeHost(t, "usr/", "home/u/proj/", "tmp/hostfile")
	p := plan(t, root, policy.Filesystem{AllowWrite: []string{"/tmp"}, DenyRead: []string{"/tmp/hostfile"}})
	for _, m := range p.Mounts {
		if (m.Kind == MountRW || m.Kind == MountRO) && strings.HasPrefix(m.Src, "/tmp") {
			t.Errorf("the host's /tmp must never be bound: %+v", m)
		}
	}
	pp, err := BuildPlan(PlanInput{Cwd: "/tmp/work", PrivateCwd: true, Root: root, SystemView: []string{"/usr"}, SystemEtc: []string{}})
	if err != nil || pp.Cwd != "/tmp/work" || !find(pp, MountDir, "/tmp/work") {
		t.Fatalf("private cwd: %v %+v", err, pp)
	}
}
