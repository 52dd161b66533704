package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/srt-mcp/srt-mcp/policy"
)

// fakeHost builds a host tree under a temp dir for BuildPlan's Root. Each
// entry is "dir/", "file", or "link -> target" (target as written; prefer
// relative targets for links that a later path walks through, since the
// test's os calls resolve absolute targets against the real root).
func fakeHost(t *testing.T, entries ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, e := range entries {
		if name, target, ok := strings.Cut(e, " -> "); ok {
			p := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		p := filepath.Join(root, e)
		if strings.HasSuffix(e, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// baseHost is a small host: a system view, part of /etc, a home with a
// project, and other users' data that must never show.
var baseHost = []string{
	"usr/bin/sh", "usr/lib/libc.so", "bin -> usr/bin", "lib -> usr/lib", "sbin/",
	"etc/passwd", "etc/shadow", "etc/ssl/certs/ca.pem", "etc/hosts", "etc/localtime -> ../usr/share/zoneinfo/UTC",
	"usr/share/zoneinfo/UTC", "home/u/proj/README", "home/u/.ssh/id_rsa", "home/other/secret", "tmp/hostfile",
	"var/lib/x", "root/.bashrc",
}

// procMask reports whether dst is one of Docker's read-only or masked
// /proc paths.
func procMask(dst string) bool {
	for _, l := range [][]string{procReadOnly, procMaskedFiles, procMaskedDirs} {
		for _, n := range l {
			if dst == "/proc/"+n {
				return true
			}
		}
	}
	return false
}

func planInput(root string, fs policy.Filesystem) PlanInput {
	return PlanInput{
		FS: fs, Cwd: "/home/u/proj", Home: "/home/u", Root: root, ProcDir: filepath.Join(root, "proc"),
		LinkOwners: []int{os.Getuid()}, // the fake host's links stand for root's
		SystemView: []string{"/usr", "/bin", "/lib", "/lib64", "/sbin"},
		SystemEtc:  []string{"passwd", "hosts", "ssl", "localtime", "missing"},
	}
}

func mustPlan(t *testing.T, in PlanInput) *Plan {
	t.Helper()
	p, err := BuildPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, p)
	return p
}

func buildPlan(t *testing.T, root string, fs policy.Filesystem) *Plan {
	t.Helper()
	return mustPlan(t, planInput(root, fs))
}

// checkPlan asserts the invariants every plan must keep, whatever the
// policy:
//   - every Dst is absolute and clean; binds and symlinks have a Src;
//   - a mount comes after every mount of an ancestor directory (bwrap
//     applies them left to right, so a parent would cover its child);
//   - no path is mounted twice;
//   - the remount-ro steps come last, each after the mount it remounts,
//     and the last one is "/";
//   - nothing lands in the sandbox's /proc or /dev but the fixed entries.
func checkPlan(t *testing.T, p *Plan) {
	t.Helper()
	at := map[string]int{}
	firstRemount := -1
	for i, m := range p.Mounts {
		if !filepath.IsAbs(m.Dst) || filepath.Clean(m.Dst) != m.Dst {
			t.Errorf("mount %d: Dst %q is not absolute and clean", i, m.Dst)
		}
		switch m.Kind {
		case MountRO, MountRW, MountSymlink:
			if m.Src == "" {
				t.Errorf("mount %d (%s %s) has no Src", i, m.Kind, m.Dst)
			}
		case MountRemountRO:
			if firstRemount < 0 {
				firstRemount = i
			}
			if j, ok := at[m.Dst]; m.Dst != "/" && (!ok || j > i) {
				t.Errorf("remount-ro %s (mount %d) has no earlier mount at that path", m.Dst, i)
			}
			continue
		}
		if firstRemount >= 0 {
			t.Errorf("mount %d (%s %s) comes after a remount-ro", i, m.Kind, m.Dst)
		}
		if j, ok := at[m.Dst]; ok {
			t.Errorf("%s is mounted twice (mounts %d and %d): %+v", m.Dst, j, i, p.Mounts)
		}
		at[m.Dst] = i
		if (policy.Within(m.Dst, "/proc") && m.Kind != MountProc && !procMask(m.Dst)) ||
			(policy.Within(m.Dst, "/dev") && m.Dst != "/dev" && m.Dst != SandboxShm) {
			t.Errorf("mount %d (%s %s) lands in the sandbox's own /proc or /dev", i, m.Kind, m.Dst)
		}
	}
	for i, m := range p.Mounts {
		if m.Kind == MountRemountRO {
			continue
		}
		for d := filepath.Dir(m.Dst); ; d = filepath.Dir(d) {
			if j, ok := at[d]; ok && j > i {
				t.Errorf("mount %d (%s %s) comes before mount %d of its ancestor %s", i, m.Kind, m.Dst, j, d)
			}
			if d == "/" {
				break
			}
		}
	}
	if n := len(p.Mounts); n == 0 || p.Mounts[n-1] != (Mount{Kind: MountRemountRO, Dst: "/"}) {
		t.Errorf("the last mount must be remount-ro /: %+v", p.Mounts)
	}
	for _, w := range p.Writable {
		if mountAt(p, w.Dst) == nil && !coveredRW(p, w.Dst) {
			t.Errorf("writable root %s has no rw mount", w.Dst)
		}
	}
}

// coveredRW reports whether the nearest mount at or above dst is a rw bind.
func coveredRW(p *Plan, dst string) bool {
	for d := dst; ; d = filepath.Dir(d) {
		if m := mountAt(p, d); m != nil {
			return m.Kind == MountRW
		}
		if d == "/" {
			return false
		}
	}
}

func mountAt(p *Plan, dst string) *Mount {
	for i := range p.Mounts {
		if p.Mounts[i].Dst == dst && p.Mounts[i].Kind != MountRemountRO {
			return &p.Mounts[i]
		}
	}
	return nil
}

// view says how the sandbox sees path f, from the mounts alone: the last
// mount at or above f decides (checkPlan guarantees deeper mounts come
// later). "ro" and "rw" are host binds, "hidden" an empty tmpfs or an
// unreadable file, "private" the sandbox's own (/tmp, /proc, /dev), "link" a
// symlink, "none" not in the sandbox at all.
func view(p *Plan, f string) string {
	var last *Mount
	for i, m := range p.Mounts {
		if m.Kind != MountRemountRO && policy.Within(f, m.Dst) {
			last = &p.Mounts[i]
		}
	}
	if last == nil {
		return "none"
	}
	switch last.Kind {
	case MountRO:
		return "ro"
	case MountRW:
		return "rw"
	case MountHideFile:
		return "hidden"
	case MountTmpfs:
		if last.Dst == SandboxTmp || last.Dst == SandboxShm {
			return "private"
		}
		return "hidden"
	case MountSymlink:
		return "link"
	}
	return "private"
}

func has(p *Plan, kind MountKind, src, dst string) bool {
	for _, m := range p.Mounts {
		if m.Kind == kind && m.Dst == dst && (src == "" || m.Src == src) {
			return true
		}
	}
	return false
}

func wantMount(t *testing.T, p *Plan, kind MountKind, src, dst string) {
	t.Helper()
	if !has(p, kind, src, dst) {
		t.Errorf("missing %s %s -> %s in\n%s", kind, src, dst, dumpMounts(p))
	}
}

func wantNoMount(t *testing.T, p *Plan, dst string) {
	t.Helper()
	if m := mountAt(p, dst); m != nil {
		t.Errorf("unexpected mount %+v in\n%s", *m, dumpMounts(p))
	}
}

func dumpMounts(p *Plan) string {
	var b strings.Builder
	for _, m := range p.Mounts {
		fmt.Fprintf(&b, "  %-10s %s -> %s\n", m.Kind, m.Src, m.Dst)
	}
	return b.String()
}

func writableDsts(p *Plan) []string {
	var out []string
	for _, w := range p.Writable {
		out = append(out, w.Dst)
	}
	sort.Strings(out)
	return out
}

func sameStrings(a, b []string) bool {
	a, b = append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	return strings.Join(a, "\n") == strings.Join(b, "\n")
}

func TestPlanSystemViewAndCwd(t *testing.T) {
	root := fakeHost(t, baseHost...)
	p := buildPlan(t, root, policy.Filesystem{})
	if p.Cwd != "/home/u/proj" {
		t.Errorf("Cwd = %q", p.Cwd)
	}
	wantMount(t, p, MountRO, "/usr", "/usr")
	wantMount(t, p, MountRO, "/sbin", "/sbin")
	// A symlink of the system view stays a symlink, pointing where it did.
	wantMount(t, p, MountSymlink, "usr/bin", "/bin")
	wantMount(t, p, MountSymlink, "usr/lib", "/lib")
	wantNoMount(t, p, "/lib64") // not on this host
	wantMount(t, p, MountRO, "/etc/passwd", "/etc/passwd")
	wantMount(t, p, MountRO, "/etc/hosts", "/etc/hosts")
	wantMount(t, p, MountRO, "/etc/ssl", "/etc/ssl")
	wantMount(t, p, MountRO, "/etc/localtime", "/etc/localtime")
	// The working directory is visible read-only; nothing above it is.
	wantMount(t, p, MountRO, "/home/u/proj", "/home/u/proj")
	for _, m := range p.Mounts {
		for _, never := range []string{"/etc/shadow", "/home/u/.ssh", "/home/other", "/var", "/root", "/tmp/hostfile", "/etc/missing"} {
			if policy.Within(m.Dst, never) || (m.Src != "" && policy.Within(m.Src, never)) {
				t.Errorf("%s must not be mounted: %+v", never, m)
			}
		}
		if m.Dst == "/home" || m.Dst == "/home/u" || m.Dst == "/etc" || m.Dst == "/" && m.Kind != MountRemountRO {
			t.Errorf("a parent of a visible path is mounted whole: %+v", m)
		}
	}
	// The sandbox's own fixed mounts.
	wantMount(t, p, MountProc, "", "/proc")
	wantMount(t, p, MountDev, "", "/dev")
	wantMount(t, p, MountTmpfs, "", "/tmp")
	wantMount(t, p, MountTmpfs, "", SandboxShm)
	wantMount(t, p, MountDir, "", SandboxHome)
	if m := mountAt(p, "/tmp"); m == nil || m.Size != DefaultTmpBytes {
		t.Errorf("/tmp: %+v, want a tmpfs of %d bytes", m, DefaultTmpBytes)
	}
	wantMount(t, p, MountRemountRO, "", "/dev")
	if len(p.Writable) != 0 || len(p.Protected) != 0 {
		t.Errorf("nothing writable or protected without allow_write: %+v %+v", p.Writable, p.Protected)
	}
	// TmpBytes. The srt-mcp binary is never mounted: the sandbox runs it
	// through an inherited descriptor.
	in := planInput(root, policy.Filesystem{})
	in.TmpBytes = 8 << 20
	p = mustPlan(t, in)
	for _, m := range p.Mounts {
		if strings.Contains(m.Src, "srt-mcp") || strings.Contains(m.Dst, "srt-mcp") {
			t.Errorf("a mount names srt-mcp: %+v", m)
		}
	}
	if m := mountAt(p, "/tmp"); m == nil || m.Size != 8<<20 {
		t.Errorf("/tmp: %+v, want a tmpfs of 8 MiB", m)
	}
}

func TestPlanCwd(t *testing.T) {
	root := fakeHost(t, append(baseHost, "home/u/link -> proj", "home/u/file")...)
	// A symlinked cwd is canonical in the plan.
	in := planInput(root, policy.Filesystem{})
	in.Cwd = "/home/u/link"
	p := mustPlan(t, in)
	if p.Cwd != "/home/u/proj" {
		t.Errorf("Cwd = %q, want the canonical /home/u/proj", p.Cwd)
	}
	wantMount(t, p, MountRO, "/home/u/proj", "/home/u/proj")
	// "/" as cwd exposes nothing of the host.
	in.Cwd = "/"
	p = mustPlan(t, in)
	wantNoMount(t, p, "/home")
	wantNoMount(t, p, "/home/u/proj")
	for _, cwd := range []string{"relative", "/home/u/missing", "/home/u/file"} {
		in.Cwd = cwd
		_, err := BuildPlan(in)
		var re *Error
		if !errors.As(err, &re) || re.Code != ErrCodeInvalidCwd {
			t.Errorf("cwd %q: want %s, got %v", cwd, ErrCodeInvalidCwd, err)
		}
	}
}

func TestPlanAllowWriteAndDenies(t *testing.T) {
	root := fakeHost(t, append(baseHost,
		"home/u/proj/out/a.o", "home/u/proj/out/keep/k", "home/u/proj/vault/key", "home/u/proj/vault/pub/ok",
		"home/u/proj/.env", "home/u/proj/docs/x", "data/x", "data/private/p")...)
	p := buildPlan(t, root, policy.Filesystem{
		AllowWrite: []string{"out"},
		DenyWrite:  []string{"out/keep", "docs", "/data/x", "nonexistent"},
		DenyRead:   []string{"vault", ".env", "/data/private", "/home/other"},
		AllowRead:  []string{"vault/pub", "/data"},
	})
	wantMount(t, p, MountRO, "/home/u/proj", "/home/u/proj")
	wantMount(t, p, MountRW, "/home/u/proj/out", "/home/u/proj/out")
	// deny_write inside a writable root: read-only again.
	wantMount(t, p, MountRO, "/home/u/proj/out/keep", "/home/u/proj/out/keep")
	// deny_write where nothing is writable: no mount at all.
	wantNoMount(t, p, "/home/u/proj/docs")
	wantNoMount(t, p, "/data/x")
	// deny_read: a directory becomes an empty read-only tmpfs, a file an
	// unreadable one.
	wantMount(t, p, MountTmpfs, "", "/home/u/proj/vault")
	if m := mountAt(p, "/home/u/proj/vault"); m != nil && m.Size != 4096 {
		t.Errorf("a hidden directory's tmpfs should be tiny: %+v", m)
	}
	wantMount(t, p, MountRemountRO, "", "/home/u/proj/vault")
	wantMount(t, p, MountHideFile, "", "/home/u/proj/.env")
	wantMount(t, p, MountTmpfs, "", "/data/private")
	wantMount(t, p, MountRemountRO, "", "/data/private")
	// deny_read of something not visible anyway: nothing to hide.
	wantNoMount(t, p, "/home/other")
	// allow_read inside a denied directory re-opens it.
	wantMount(t, p, MountRO, "/home/u/proj/vault/pub", "/home/u/proj/vault/pub")
	wantMount(t, p, MountRO, "/data", "/data")

	if got := writableDsts(p); !sameStrings(got, []string{"/home/u/proj/out"}) {
		t.Errorf("Writable = %v", got)
	}
	if w := p.Writable[0]; w.Src != "/home/u/proj/out" {
		t.Errorf("Writable[0] = %+v", w)
	}
	// Protected lists what is read-only inside the sandbox because of a
	// deny_write or a mandatory name; a deny_write that matched nothing
	// writable does not need the sweep's protection, but may be listed.
	if !sameStrings(filterUnder(p.Protected, "/home/u/proj/out"), []string{"/home/u/proj/out/keep"}) {
		t.Errorf("Protected = %v", p.Protected)
	}
	wantGlobs := []string{"/home/u/proj/out/keep", "/home/u/proj/docs", "/data/x", "/home/u/proj/nonexistent"}
	if !sameStrings(p.DenyWriteGlobs, wantGlobs) {
		t.Errorf("DenyWriteGlobs = %v, want %v", p.DenyWriteGlobs, wantGlobs)
	}
}

func filterUnder(ps []string, root string) []string {
	var out []string
	for _, p := range ps {
		if policy.Within(p, root) {
			out = append(out, p)
		}
	}
	return out
}

func TestPlanPrecedenceAtOnePath(t *testing.T) {
	root := fakeHost(t, append(baseHost, "home/u/proj/d/f", "srv/x/f")...)
	// allow_read beats deny_read at the same path.
	p := buildPlan(t, root, policy.Filesystem{DenyRead: []string{"/srv/x"}, AllowRead: []string{"/srv/x"}})
	wantMount(t, p, MountRO, "/srv/x", "/srv/x")
	// deny_write beats allow_write at the same path.
	p = buildPlan(t, root, policy.Filesystem{AllowWrite: []string{"d"}, DenyWrite: []string{"d"}})
	if coveredRW(p, "/home/u/proj/d") || len(p.Writable) != 0 {
		t.Errorf("deny_write must beat allow_write at one path:\n%s writable=%v", dumpMounts(p), p.Writable)
	}
	// A deeper allow_write inside a deny_read re-opens it writable.
	p = buildPlan(t, root, policy.Filesystem{DenyRead: []string{"/srv"}, AllowRead: []string{"/srv"}, AllowWrite: []string{"/srv/x"}})
	wantMount(t, p, MountRW, "/srv/x", "/srv/x")
}

func TestPlanMandatoryNames(t *testing.T) {
	root := fakeHost(t, append(baseHost,
		"home/u/proj/.bashrc", "home/u/proj/.mcp.json",
		"home/u/proj/.git/hooks/pre-commit.sample", "home/u/proj/.git/config", "home/u/proj/.git/HEAD",
		"home/u/proj/.vscode/settings.json", "home/u/proj/.claude/commands/x.md", "home/u/proj/.claude/settings.json",
		"home/u/proj/a/.zshrc", "home/u/proj/a/b/.idea/x", "home/u/proj/a/b/c/.bashrc",
		"home/u/proj/a/b/c/.git/hooks/", "home/u/proj/a/b/c/d/.bashrc", "home/u/proj/a/b/c/d/.git/hooks/",
		"home/u/proj/node_modules/.bashrc", "home/u/proj/node_modules/x/.bashrc",
		"home/u/proj/wt/.git", "home/u/proj/src/main.go")...)
	p := buildPlan(t, root, policy.Filesystem{AllowWrite: []string{"."}})
	wantMount(t, p, MountRW, "/home/u/proj", "/home/u/proj")
	protected := []string{
		"/home/u/proj/.bashrc", "/home/u/proj/.mcp.json", "/home/u/proj/.git/hooks", "/home/u/proj/.git/config",
		"/home/u/proj/.vscode", "/home/u/proj/.claude/commands", "/home/u/proj/a/.zshrc", "/home/u/proj/a/b/.idea",
		"/home/u/proj/a/b/c/.bashrc", "/home/u/proj/a/b/c/.git/hooks", "/home/u/proj/wt/.git",
		"/home/u/proj/node_modules/.bashrc", "/home/u/proj/node_modules/x/.bashrc",
		// Deeper than srt's three levels too: the sweep would otherwise
		// remove what a run overwrote there, the user's original with it.
		"/home/u/proj/a/b/c/d/.bashrc", "/home/u/proj/a/b/c/d/.git/hooks",
	}
	for _, pr := range protected {
		wantMount(t, p, MountRO, pr, pr)
	}
	if !sameStrings(p.Protected, protected) {
		t.Errorf("Protected = %v\nwant        %v", p.Protected, protected)
	}
	// Pins: every directory between the root and a protected path is
	// bound over itself so it cannot be renamed away.
	for _, pin := range []string{"/home/u/proj/.git", "/home/u/proj/.claude", "/home/u/proj/a", "/home/u/proj/a/b",
		"/home/u/proj/a/b/c", "/home/u/proj/a/b/c/.git", "/home/u/proj/a/b/c/d", "/home/u/proj/a/b/c/d/.git",
		"/home/u/proj/wt", "/home/u/proj/node_modules", "/home/u/proj/node_modules/x"} {
		wantMount(t, p, MountRW, pin, pin)
	}
	// Nothing else is pinned.
	for _, m := range p.Mounts {
		if m.Kind == MountRW && m.Dst != "/home/u/proj" && !strings.HasPrefix(m.Dst, "/home/u/proj/") {
			t.Errorf("unexpected rw mount %+v", m)
		}
		if m.Kind == MountRW && m.Dst == "/home/u/proj/src" {
			t.Errorf("unexpected pin %+v", m)
		}
	}

	// allow_git_config lifts .git/config only.
	fs := policy.Filesystem{AllowWrite: []string{"."}, AllowGitConfig: true}
	p = buildPlan(t, root, fs)
	wantNoMount(t, p, "/home/u/proj/.git/config")
	wantMount(t, p, MountRO, "/home/u/proj/.git/hooks", "/home/u/proj/.git/hooks")
	for _, pr := range p.Protected {
		if pr == "/home/u/proj/.git/config" {
			t.Error("allow_git_config: .git/config is still protected")
		}
	}
}

func TestPlanMandatoryInsideReadOnlyOrHidden(t *testing.T) {
	root := fakeHost(t, append(baseHost, "home/u/proj/.bashrc", "home/u/proj/w/x", "home/u/proj/w/sub/.bashrc")...)
	// The read-only cwd needs no protection.
	p := buildPlan(t, root, policy.Filesystem{AllowWrite: []string{"w"}})
	wantNoMount(t, p, "/home/u/proj/.bashrc")
	wantMount(t, p, MountRO, "/home/u/proj/w/sub/.bashrc", "/home/u/proj/w/sub/.bashrc")
	wantMount(t, p, MountRW, "/home/u/proj/w/sub", "/home/u/proj/w/sub")
	if !sameStrings(p.Protected, []string{"/home/u/proj/w/sub/.bashrc"}) {
		t.Errorf("Protected = %v", p.Protected)
	}
}

func TestPlanSymlinks(t *testing.T) {
	root := fakeHost(t, append(baseHost,
		"srv/real/f", "srv/real/.bashrc", "srv/secret/s",
		"home/u/proj/link -> /srv/real", "home/u/proj/rel -> ../../../srv/real",
		"home/u/proj/dangling -> /nowhere", "home/u/proj/dangling-rel -> missing",
		"home/u/proj/loop1 -> loop2", "home/u/proj/loop2 -> loop1", "home/u/proj/self -> self",
		"home/u/proj/to-secret -> ../../../srv/secret", "home/u/proj/to-proc -> /proc/self",
		"home/u/proj/to-tmp -> /tmp", "proc/self/")...)
	// An allow_write entry that is a symlink is bound where it points,
	// at the same path inside the sandbox, and scanned there.
	p := buildPlan(t, root, policy.Filesystem{AllowWrite: []string{"link"}})
	wantMount(t, p, MountRW, "/srv/real", "/srv/real")
	wantNoMount(t, p, "/home/u/proj/link")
	wantMount(t, p, MountRO, "/srv/real/.bashrc", "/srv/real/.bashrc")
	if got := writableDsts(p); !sameStrings(got, []string{"/srv/real"}) {
		t.Errorf("Writable = %v", got)
	}
	p = buildPlan(t, root, policy.Filesystem{AllowRead: []string{"rel"}})
	wantMount(t, p, MountRO, "/srv/real", "/srv/real")
	// A deny entry that is a symlink hides its target.
	p = buildPlan(t, root, policy.Filesystem{AllowRead: []string{"/srv"}, DenyRead: []string{"to-secret"}})
	wantMount(t, p, MountTmpfs, "", "/srv/secret")
	// A deny entry that is a dangling symlink has nothing to hide.
	p = buildPlan(t, root, policy.Filesystem{DenyRead: []string{"dangling", "dangling-rel"}, DenyWrite: []string{"dangling"}})
	wantNoMount(t, p, "/home/u/proj/dangling")
	wantNoMount(t, p, "/nowhere")
	// A symlink to /tmp is the sandbox's own /tmp: nothing of the host.
	p = buildPlan(t, root, policy.Filesystem{AllowWrite: []string{"to-tmp"}})
	for _, m := range p.Mounts {
		if (m.Kind == MountRO || m.Kind == MountRW) && policy.Within(m.Src, "/tmp") {
			t.Errorf("the host's /tmp must never be bound: %+v", m)
		}
	}

	for _, tc := range []struct {
		fs      policy.Filesystem
		field   string
		mention string
	}{
		{policy.Filesystem{AllowRead: []string{"loop1"}}, "filesystem.allow_read[0]", "cannot resolve"},
		{policy.Filesystem{AllowWrite: []string{"rel", "self"}}, "filesystem.allow_write[1]", "cannot resolve"},
		{policy.Filesystem{DenyRead: []string{"loop2"}}, "filesystem.deny_read[0]", "cannot resolve"},
		{policy.Filesystem{AllowRead: []string{"dangling"}}, "filesystem.allow_read[0]", "cannot resolve"},
		{policy.Filesystem{AllowRead: []string{"to-proc"}}, "filesystem.allow_read[0]", "/proc"},
	} {
		_, err := BuildPlan(planInput(root, tc.fs))
		var pe *policy.Error
		if !errors.As(err, &pe) || pe.Field != tc.field || pe.Code != policy.CodeInvalidPath || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%+v: want an %s error naming %s and mentioning %q, got %v", tc.fs, policy.CodeInvalidPath, tc.field, tc.mention, err)
		}
	}
}

func TestPlanEntryErrors(t *testing.T) {
	root := fakeHost(t, baseHost...)
	for _, tc := range []struct {
		fs      policy.Filesystem
		field   string
		mention string
	}{
		{policy.Filesystem{AllowWrite: []string{"missing"}}, "filesystem.allow_write[0]", "does not exist"},
		{policy.Filesystem{AllowWrite: []string{"/usr", "/nope"}}, "filesystem.allow_write[1]", "does not exist"},
		{policy.Filesystem{AllowRead: []string{"~/missing"}}, "filesystem.allow_read[0]", "/home/u/missing"},
		{policy.Filesystem{AllowRead: []string{"/proc/1"}}, "filesystem.allow_read[0]", "/proc"},
		{policy.Filesystem{AllowRead: []string{"/proc"}}, "filesystem.allow_read[0]", "/proc"},
		{policy.Filesystem{AllowWrite: []string{"/dev/shm"}}, "filesystem.allow_write[0]", "/dev"},
		{policy.Filesystem{DenyRead: []string{"/dev/sda"}}, "filesystem.deny_read[0]", "/dev"},
		{policy.Filesystem{DenyWrite: []string{"/proc/sys/**"}}, "filesystem.deny_write[0]", "/proc"},
	} {
		_, err := BuildPlan(planInput(root, tc.fs))
		var pe *policy.Error
		if !errors.As(err, &pe) || pe.Field != tc.field || pe.Code != policy.CodeInvalidPath || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%+v: want an %s error naming %s and mentioning %q, got %v", tc.fs, policy.CodeInvalidPath, tc.field, tc.mention, err)
		}
	}
	// Missing deny entries and globs that match nothing are fine.
	buildPlan(t, root, policy.Filesystem{DenyRead: []string{"missing"}, DenyWrite: []string{"missing"}, AllowRead: []string{"*.none"}})
}

func TestPlanGlobs(t *testing.T) {
	root := fakeHost(t, append(baseHost,
		"home/u/proj/a.pem", "home/u/proj/sub/b.pem", "home/u/proj/sub/deep/er/c.pem", "home/u/proj/sub/d.txt",
		"home/u/c.pem", "home/u/proj/w/", "home/u/proj/w/e.key", "home/u/proj/lit[1].txt", "home/u/proj/lit1.txt")...)
	p := buildPlan(t, root, policy.Filesystem{
		DenyRead:   []string{"**/*.pem", `lit\[1\].txt`},
		AllowWrite: []string{"w"},
		DenyWrite:  []string{"w/*.key", "w/*.new"},
	})
	for _, f := range []string{"/home/u/proj/a.pem", "/home/u/proj/sub/b.pem", "/home/u/proj/sub/deep/er/c.pem", "/home/u/proj/lit[1].txt"} {
		wantMount(t, p, MountHideFile, "", f)
	}
	for _, f := range []string{"/home/u/c.pem", "/home/u/proj/sub/d.txt", "/home/u/proj/lit1.txt"} {
		wantNoMount(t, p, f)
	}
	wantMount(t, p, MountRO, "/home/u/proj/w/e.key", "/home/u/proj/w/e.key")
	if !sameStrings(p.DenyWriteGlobs, []string{"/home/u/proj/w/*.key", "/home/u/proj/w/*.new"}) {
		t.Errorf("DenyWriteGlobs = %v", p.DenyWriteGlobs)
	}
	// A glob in allow_read exposes each match; ~ expands to Home.
	p = buildPlan(t, root, policy.Filesystem{AllowRead: []string{"~/*.pem"}})
	wantMount(t, p, MountRO, "/home/u/c.pem", "/home/u/c.pem")
}

func TestPlanPrivateTmp(t *testing.T) {
	root := fakeHost(t, append(baseHost, "tmp/shared/")...)
	// "/tmp" names the sandbox's own /tmp: accepted, and nothing of the
	// host's /tmp is bound, readable or writable.
	p := buildPlan(t, root, policy.Filesystem{AllowWrite: []string{"/tmp"}, AllowRead: []string{"/tmp"}, DenyRead: []string{"/tmp/hostfile"}})
	for _, m := range p.Mounts {
		if (m.Kind == MountRW || m.Kind == MountRO) && policy.Within(m.Src, "/tmp") {
			t.Errorf("the host's /tmp must never be bound: %+v", m)
		}
	}
	if m := mountAt(p, "/tmp"); m == nil || m.Kind != MountTmpfs {
		t.Errorf("/tmp must be the private tmpfs: %+v", m)
	}
	if len(p.Writable) != 0 {
		t.Errorf("the private /tmp is not a host writable root: %+v", p.Writable)
	}
	// A cwd under /tmp with PrivateCwd is a fresh directory of the private /tmp.
	pp := mustPlan(t, PlanInput{Cwd: "/tmp/shared", PrivateCwd: true, Root: root, SystemView: []string{"/usr"}, SystemEtc: []string{}})
	if pp.Cwd != "/tmp/shared" {
		t.Fatalf("Cwd = %q", pp.Cwd)
	}
	wantMount(t, pp, MountDir, "", "/tmp/shared")
	for _, m := range pp.Mounts {
		if m.Src != "" && policy.Within(m.Src, "/tmp") {
			t.Errorf("private cwd: the host's /tmp/shared must not be bound: %+v", m)
		}
	}
	// Cwd "/tmp" itself needs no directory.
	pp = mustPlan(t, PlanInput{Cwd: "/tmp", Root: root, SystemView: []string{"/usr"}, SystemEtc: []string{}})
	if pp.Cwd != "/tmp" || has(pp, MountDir, "", "/tmp") {
		t.Errorf("cwd /tmp: %+v", pp)
	}
}

func TestPlanExtraMounts(t *testing.T) {
	root := fakeHost(t, append(baseHost, "srv/ws/.bashrc", "srv/ws/f", "srv/ro/f")...)
	in := planInput(root, policy.Filesystem{})
	in.Extra = []ExtraMount{{Src: "/srv/ws", Dst: "/mnt/data", Writable: true}, {Src: "/srv/ro", Dst: "/mnt/ro"}}
	p := mustPlan(t, in)
	wantMount(t, p, MountRW, "/srv/ws", "/mnt/data")
	wantMount(t, p, MountRO, "/srv/ro", "/mnt/ro")
	wantMount(t, p, MountRO, "/srv/ws/.bashrc", "/mnt/data/.bashrc")
	if len(p.Writable) != 1 || p.Writable[0] != (WritableRoot{Src: "/srv/ws", Dst: "/mnt/data"}) {
		t.Errorf("Writable = %+v", p.Writable)
	}
	if !sameStrings(p.Protected, []string{"/mnt/data/.bashrc"}) {
		t.Errorf("Protected = %v (sandbox paths)", p.Protected)
	}
	// A cwd inside an extra mount is a sandbox path, not a host one.
	in.Cwd = "/mnt/data/sub"
	p = mustPlan(t, in)
	if p.Cwd != "/mnt/data/sub" {
		t.Errorf("Cwd = %q", p.Cwd)
	}
	for _, bad := range []ExtraMount{{Src: "rel", Dst: "/mnt/x"}, {Src: "/srv/ws", Dst: "/proc/x"}, {Src: "/srv/missing", Dst: "/mnt/x"}} {
		in := planInput(root, policy.Filesystem{})
		in.Extra = []ExtraMount{bad}
		_, err := BuildPlan(in)
		var re *Error
		if !errors.As(err, &re) || re.Code != ErrCodeInvalidSpec || !strings.Contains(err.Error(), "mounts[0]") {
			t.Errorf("%+v: want %s naming mounts[0], got %v", bad, ErrCodeInvalidSpec, err)
		}
	}
}

// Hide is for paths no rule may expose (the server's state directory):
// hidden under an exposed parent, and not re-opened by an allow_read of the
// path itself or of something inside it.
func TestPlanHide(t *testing.T) {
	root := fakeHost(t, append(baseHost, "srv/pub/f", "srv/state/sessions/s1/secret", "srv/state/f")...)
	in := planInput(root, policy.Filesystem{AllowRead: []string{"/srv"}})
	in.Hide = []string{"/srv/state", "/srv/missing"}
	p := mustPlan(t, in)
	wantMount(t, p, MountRO, "/srv", "/srv")
	wantMount(t, p, MountTmpfs, "", "/srv/state")

	for _, fs := range []policy.Filesystem{
		{AllowRead: []string{"/srv", "/srv/state"}},
		{AllowRead: []string{"/srv/state/sessions/s1"}},
		{AllowWrite: []string{"/srv/state/sessions"}},
	} {
		in := planInput(root, fs)
		in.Hide = []string{"/srv/state"}
		p, err := BuildPlan(in)
		if err != nil {
			// Refusing the entry is an acceptable answer too.
			continue
		}
		checkPlan(t, p)
		for _, f := range []string{"/srv/state/f", "/srv/state/sessions/s1/secret"} {
			if v := view(p, f); v == "ro" || v == "rw" {
				t.Errorf("%+v: the hidden %s is %s in\n%s", fs, f, v, dumpMounts(p))
			}
		}
	}
}

func TestPlanEtcDir(t *testing.T) {
	root := fakeHost(t, append(baseHost, "etc/extra.conf", "view/passwd")...)
	in := planInput(root, policy.Filesystem{})
	in.EtcDir = filepath.Join(root, "view")
	p := mustPlan(t, in)
	wantMount(t, p, MountRO, in.EtcDir, "/etc")
	wantNoMount(t, p, "/etc/passwd")
	// A deny inside the view applies to what the view has.
	in.FS = policy.Filesystem{DenyRead: []string{"/etc/passwd", "/etc/hosts"}}
	p = mustPlan(t, in)
	wantMount(t, p, MountHideFile, "", "/etc/passwd")
	wantNoMount(t, p, "/etc/hosts")
	// An allow entry inside /etc falls back to one bind per entry.
	in.FS = policy.Filesystem{AllowRead: []string{"/etc/extra.conf"}}
	p = mustPlan(t, in)
	wantNoMount(t, p, "/etc")
	wantMount(t, p, MountRO, "/etc/passwd", "/etc/passwd")
	wantMount(t, p, MountRO, "/etc/extra.conf", "/etc/extra.conf")
}

func TestPlanCeiling(t *testing.T) {
	root := fakeHost(t, append(baseHost, "work/a/", "home/u/proj/out -> ../../../srv/out", "srv/out/")...)
	in := planInput(root, policy.Filesystem{AllowWrite: []string{"/work/a"}})
	in.Ceiling = &Ceiling{Write: []string{"/work"}}
	in.Cwd = "/work"
	mustPlan(t, in)
	in.Cwd = "/home/u/proj"
	// A link inside the ceiling that points outside it is refused.
	in.FS = policy.Filesystem{AllowWrite: []string{"/work/a", "out"}}
	in.Ceiling = &Ceiling{Write: []string{"/work", "/home/u/proj"}}
	_, err := BuildPlan(in)
	var pe *policy.Error
	if !errors.As(err, &pe) || pe.Code != policy.CodeExceedsCeiling || pe.Field != "filesystem.allow_write[1]" || !strings.Contains(err.Error(), "/srv/out") {
		t.Errorf("want %s on filesystem.allow_write[1] naming /srv/out, got %v", policy.CodeExceedsCeiling, err)
	}
}

func TestPlanScanLimit(t *testing.T) {
	// The protected-name search reads each writable root; the same host
	// directory mounted writable at many places is read once per place, so
	// a few thousand entries reach the limit cheaply.
	root := fakeHost(t, baseHost...)
	big := filepath.Join(root, "srv/big")
	if err := os.MkdirAll(big, 0o755); err != nil {
		t.Fatal(err)
	}
	const entries = 2000
	for i := 0; i < entries; i++ {
		if err := os.WriteFile(filepath.Join(big, fmt.Sprintf("f%d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in := planInput(root, policy.Filesystem{})
	for i := 0; i*entries <= maxScan; i++ {
		in.Extra = append(in.Extra, ExtraMount{Src: "/srv/big", Dst: fmt.Sprintf("/mnt/%d", i), Writable: true})
	}
	_, err := BuildPlan(in)
	var re *Error
	if !errors.As(err, &re) || re.Code != ErrCodeInvalidPolicy || !strings.Contains(err.Error(), "narrow allow_write") {
		t.Fatalf("want %s about the scan limit, got %v", ErrCodeInvalidPolicy, err)
	}
	in.Extra = in.Extra[:2]
	mustPlan(t, in)
}

// The cwd is visible by default, like the system view, not by an
// allow_read entry: a deny_read naming the cwd itself hides it. Running from
// the home directory with deny_read "~" (and the project re-opened) must
// not expose the rest of home.
func TestPlanDenyReadOfCwd(t *testing.T) {
	root := fakeHost(t, baseHost...)
	p := buildPlan(t, root, policy.Filesystem{DenyRead: []string{"."}})
	if v := view(p, "/home/u/proj/README"); v == "ro" || v == "rw" {
		t.Errorf("deny_read . must hide the cwd; /home/u/proj/README is %s in\n%s", v, dumpMounts(p))
	}
	in := planInput(root, policy.Filesystem{DenyRead: []string{"~"}, AllowRead: []string{"~/proj"}})
	in.Cwd = "/home/u"
	p = mustPlan(t, in)
	if v := view(p, "/home/u/proj/README"); v != "ro" {
		t.Errorf("~/proj/README is %s, want ro", v)
	}
	if v := view(p, "/home/u/.ssh/id_rsa"); v == "ro" || v == "rw" {
		t.Errorf("deny_read ~ with cwd ~: ~/.ssh/id_rsa is %s in\n%s", v, dumpMounts(p))
	}
}

func TestPlanDenyTargetsArePinned(t *testing.T) {
	root := fakeHost(t, append(baseHost, "home/u/proj/conf/settings.json", "home/u/proj/vault/deep/secret", "home/u/proj/top.key")...)
	p := buildPlan(t, root, policy.Filesystem{AllowWrite: []string{"."},
		DenyWrite: []string{"conf/settings.json", "top.key"}, DenyRead: []string{"vault/deep/secret"}})
	wantMount(t, p, MountRO, "/home/u/proj/conf/settings.json", "/home/u/proj/conf/settings.json")
	// The directories between the writable root and each deny target are
	// mounted over themselves: renaming one away fails with EBUSY.
	for _, pin := range []string{"/home/u/proj/conf", "/home/u/proj/vault", "/home/u/proj/vault/deep"} {
		wantMount(t, p, MountRW, pin, pin)
	}
}

func TestPlanProtectedNameThatIsALink(t *testing.T) {
	root := fakeHost(t, append(baseHost, "home/u/proj/dotfiles/bashrc", "home/u/proj/.bashrc -> dotfiles/bashrc",
		"home/u/proj/.zshrc -> ../other/secret")...)
	p := buildPlan(t, root, policy.Filesystem{AllowWrite: []string{"."}})
	// The link is never entered; its target, inside the writable root, is
	// protected instead (and its directory pinned).
	wantMount(t, p, MountRO, "/home/u/proj/dotfiles/bashrc", "/home/u/proj/dotfiles/bashrc")
	wantMount(t, p, MountRW, "/home/u/proj/dotfiles", "/home/u/proj/dotfiles")
	wantNoMount(t, p, "/home/u/proj/.bashrc")
	wantNoMount(t, p, "/home/u/proj/.zshrc")
}

func TestPlanProcMasks(t *testing.T) {
	root := fakeHost(t, append(baseHost, "proc/sys/kernel/core_pattern", "proc/sysrq-trigger", "proc/kcore", "proc/acpi/",
		"proc/irq/", "proc/keys")...)
	p := buildPlan(t, root, policy.Filesystem{})
	// Read-only: the host's own entries, bound over the sandbox's procfs.
	wantMount(t, p, MountRO, "/proc/sys", "/proc/sys")
	wantMount(t, p, MountRO, "/proc/sysrq-trigger", "/proc/sysrq-trigger")
	wantMount(t, p, MountRO, "/proc/irq", "/proc/irq")
	// Masked: unreadable files, empty read-only directories.
	wantMount(t, p, MountHideFile, "", "/proc/kcore")
	wantMount(t, p, MountHideFile, "", "/proc/keys")
	wantMount(t, p, MountTmpfs, "", "/proc/acpi")
	wantMount(t, p, MountRemountRO, "", "/proc/acpi")
	// Absent on this host: nothing.
	wantNoMount(t, p, "/proc/bus")
	wantNoMount(t, p, "/proc/timer_list")
	if m := mountAt(p, "/proc/sys"); m == nil || !m.System {
		t.Errorf("/proc/sys should be a system mount (by path): %+v", m)
	}
}

func TestPlanCwdIsCleanedAndWithinTheCeiling(t *testing.T) {
	root := fakeHost(t, append(baseHost, "tmp/work/x")...)
	in := planInput(root, policy.Filesystem{})
	in.Ceiling = &Ceiling{Read: []string{"/tmp"}}
	for _, cwd := range []string{"/tmp/../etc", "/tmp/work/../../home/u/proj", "/home/u/proj"} {
		in.Cwd = cwd
		if p, err := BuildPlan(in); err == nil {
			t.Errorf("cwd %s outside the ceiling was accepted: %+v", cwd, p.Mounts)
		} else if !strings.Contains(err.Error(), "ceiling") {
			t.Errorf("cwd %s: %v", cwd, err)
		}
	}
	in.Cwd = "/tmp/work/./"
	p := mustPlan(t, in)
	if p.Cwd != "/tmp/work" {
		t.Errorf("cwd = %s", p.Cwd)
	}
}

// A link where access is granted is followed only when root owns it: a
// sandbox (never root) may have planted any other, e.g. where a later
// run's allow_write points.
func TestPlanGrantThroughUntrustedLink(t *testing.T) {
	root := fakeHost(t, append(baseHost, "srv/outside/f", "home/u/proj/sub -> ../../../srv/outside", "srv/real/secret")...)
	link := filepath.Join(root, "home/u/proj/sub")
	if os.Geteuid() == 0 {
		if err := os.Lchown(link, 12345, 12345); err != nil {
			t.Fatal(err)
		}
	}
	in := planInput(root, policy.Filesystem{AllowWrite: []string{"sub"}})
	in.LinkOwners = nil
	for _, fs := range []policy.Filesystem{{AllowWrite: []string{"sub"}}, {AllowRead: []string{"sub/f"}}} {
		in.FS = fs
		_, err := BuildPlan(in)
		if !errors.Is(err, ErrUntrustedLink) && !strings.Contains(fmt.Sprint(err), "owned by uid") {
			t.Errorf("%+v: want the link refused, got %v", fs, err)
		}
	}
	in.FS, in.Cwd = policy.Filesystem{}, "/home/u/proj/sub"
	if _, err := BuildPlan(in); err == nil || !strings.Contains(err.Error(), "owned by uid") {
		t.Errorf("a working directory through the link: %v", err)
	}
	// A deny entry may still follow it: hiding more is never a way out.
	in.Cwd = "/home/u/proj"
	in.FS = policy.Filesystem{AllowRead: []string{"/srv"}, DenyRead: []string{"sub"}}
	p := mustPlan(t, in)
	wantMount(t, p, MountTmpfs, "", "/srv/outside")
}
