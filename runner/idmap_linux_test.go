package runner

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/srt-mcp/srt-mcp/policy"
)

// sessionLikeUser is a uid from a root server's data-session range
// (sessions.DefaultUIDs): no account, no file on the host owned by it.
var sessionLikeUser = SandboxUser{UID: 2000123, GID: 2000123}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("as root only: a runner that is not root runs sandboxes as its own uid, which maps nothing")
	}
}

// ownerDir is a fresh 0755 directory owned by uid:gid, under a 0700
// directory of root's that the sandbox user cannot even search: a mapped
// mount does not need its host path to be reachable by the sandbox user.
func ownerDir(t *testing.T, uid, gid int) string {
	t.Helper()
	private := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(private, "shared")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, uid, gid); err != nil {
		t.Fatal(err)
	}
	return d
}

func ownerOfPath(t *testing.T, p string) (int, int) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Uid), int(st.Gid)
}

// A root server's data session runs as a uid of its own; a directory the
// operator allows it to write (owned by uid 1000, mode 0755) used to be
// refused ("not writable by the sandbox user"). Through an idmapped mount
// the session's uid writes there as the directory's owner: the host sees
// uid 1000's files, the command runs as the session's uid.
func TestIdmapSessionUIDWritesAsOwner(t *testing.T) {
	requireRoot(t)
	dir := ownerDir(t, 1000, 1000)
	both(t, func(t *testing.T, start func(Spec, func(Event)) Handle) {
		name := strings.NewReplacer("/", "-").Replace(t.Name())
		file := filepath.Join(dir, name)
		var c collector
		s := testSpec(t, "/bin/sh", "-c", fmt.Sprintf(`id -u; id -g; stat -c '%%u %%g' %s; echo hello > %s && mkdir %s.d && stat -c '%%u %%g' %s`, dir, file, file, file))
		u := sessionLikeUser
		s.User = &u
		s.Policy.Filesystem.AllowWrite = []string{dir}
		h := start(s, c.sink)
		h.Wait()
		out, errs, end := c.check(t)
		if end.Type != EventExit || end.ExitCode != 0 {
			t.Fatalf("end %+v, stdout %q, stderr %q", end, out, errs)
		}
		// Inside: the session's uid, which sees the directory and what it
		// made as its own.
		want := "2000123\n2000123\n2000123 2000123\n2000123 2000123\n"
		if out != want {
			t.Errorf("inside the sandbox: %q, want %q", out, want)
		}
		// On the host: the directory's owner, with the mode unchanged.
		for _, p := range []string{file, file + ".d"} {
			if uid, gid := ownerOfPath(t, p); uid != 1000 || gid != 1000 {
				t.Errorf("%s belongs to %d:%d on the host, want 1000:1000", p, uid, gid)
			}
		}
		if b, err := os.ReadFile(file); err != nil || string(b) != "hello\n" {
			t.Errorf("host file: %q %v", b, err)
		}
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("the directory's mode changed: %v %v", fi.Mode(), err)
		}
	})
}

// Protected names inside a mapped directory stay read-only, and what is
// mounted over them comes from the mapped tree (its host path is not
// reachable by the sandbox user either).
func TestIdmapProtectedNamesStayReadOnly(t *testing.T) {
	requireRoot(t)
	requireBwrap(t)
	dir := ownerDir(t, 1000, 1000)
	hooks := filepath.Join(dir, ".git", "hooks")
	if err := os.MkdirAll(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".bashrc"), []byte("original\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, ".git"), hooks, filepath.Join(dir, ".bashrc")} {
		_ = os.Chown(p, 1000, 1000)
	}
	var c collector
	s := testSpec(t, "/bin/sh", "-c", fmt.Sprintf(`cd %s && echo evil > .bashrc; echo x > .git/hooks/pre-commit; echo ok > fine; cat .bashrc`, dir))
	u := sessionLikeUser
	s.User = &u
	s.Policy.Filesystem.AllowWrite = []string{dir}
	r, _ := Start(t.Context(), s, c.sink, Options{})
	r.Wait()
	out, errs, end := c.check(t)
	if end.Type != EventExit || out != "original\n" {
		t.Fatalf("end %+v, stdout %q, stderr %q", end, out, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".bashrc")); string(b) != "original\n" {
		t.Errorf(".bashrc was changed: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(hooks, "pre-commit")); err == nil {
		t.Error("a hook was planted")
	}
	if uid, _ := ownerOfPath(t, filepath.Join(dir, "fine")); uid != 1000 {
		t.Errorf("fine belongs to uid %d, want 1000", uid)
	}
}

// Where the kernel or the filesystem cannot map (ramfs has no idmapped
// mounts), the run is refused as before, saying why and which chown to
// run; nothing is written.
func TestIdmapUnsupportedFilesystemRefused(t *testing.T) {
	requireRoot(t)
	requireBwrap(t)
	mnt := t.TempDir()
	if err := unix.Mount("none", mnt, "ramfs", 0, ""); err != nil {
		t.Skipf("cannot mount a ramfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	dir := filepath.Join(mnt, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var c collector
	s := testSpec(t, "/bin/sh", "-c", "touch "+filepath.Join(dir, "x"))
	u := sessionLikeUser
	s.User = &u
	s.Policy.Filesystem.AllowWrite = []string{dir}
	r, _ := Start(t.Context(), s, c.sink, Options{})
	r.Wait()
	_, _, end := c.check(t)
	if end.Type != EventError || end.ErrCode != ErrCodeInvalidPolicy {
		t.Fatalf("end %+v", end)
	}
	for _, want := range []string{"not writable by the sandbox user 2000123:2000123", "idmapped", "ramfs", "chown 2000123:2000123 " + dir} {
		if !strings.Contains(end.Message, want) {
			t.Errorf("the message lacks %q: %s", want, end.Message)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "x")); err == nil {
		t.Error("the command ran")
	}
}

// A directory the sandbox user may already write is bound as before (no
// mapping): files stay the sandbox user's.
func TestIdmapNotUsedWhereModesSuffice(t *testing.T) {
	requireRoot(t)
	requireBwrap(t)
	dir := ownerDir(t, 1000, 1000)
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(filepath.Dir(dir), 0o711) // bound by path as before: reachable
	var c collector
	s := testSpec(t, "/bin/sh", "-c", "touch "+filepath.Join(dir, "x"))
	u := sessionLikeUser
	s.User = &u
	s.Policy.Filesystem.AllowWrite = []string{dir}
	r, _ := Start(t.Context(), s, c.sink, Options{})
	r.Wait()
	if _, _, end := c.check(t); end.Type != EventExit || end.ExitCode != 0 {
		t.Fatalf("end %+v", end)
	}
	if uid, _ := ownerOfPath(t, filepath.Join(dir, "x")); uid != sessionLikeUser.UID {
		t.Errorf("x belongs to uid %d, want the sandbox's %d", uid, sessionLikeUser.UID)
	}
}

// In a root-owned directory mapped for sandboxes, a link a sandbox makes
// is root's on the host. The plan follows root's links where it grants
// access (no sandbox ever ran as root), so such a link must not be: the
// runner marks the directory, and no link below the mark is trusted. The
// same root-owned link elsewhere still is.
func TestIdmapLinksInMappedTreeNotTrusted(t *testing.T) {
	requireRoot(t)
	requireBwrap(t)
	dir := ownerDir(t, 0, 0)
	outside := t.TempDir()
	var c collector
	s := testSpec(t, "/bin/ln", "-s", outside, filepath.Join(dir, "out"))
	s.Policy.Filesystem.AllowWrite = []string{dir}
	r, _ := Start(t.Context(), s, c.sink, Options{})
	r.Wait()
	if _, _, end := c.check(t); end.Type != EventExit || end.ExitCode != 0 {
		t.Fatalf("planting the link: end %+v", end)
	}
	if uid, _ := ownerOfPath(t, filepath.Join(dir, "out")); uid != 0 {
		t.Fatalf("the premise: the planted link belongs to uid %d on the host, not root", uid)
	}
	for _, field := range []string{"allow_write", "allow_read", "cwd"} {
		in := PlanInput{Cwd: "/", Home: "/"}
		link := filepath.Join(dir, "out")
		switch field {
		case "allow_write":
			in.FS.AllowWrite = []string{link}
		case "allow_read":
			in.FS.AllowRead = []string{link}
		case "cwd":
			in.Cwd = link
		}
		if p, err := BuildPlan(in); err == nil {
			t.Errorf("%s through the planted link was accepted: cwd %s, writable %v", field, p.Cwd, p.Writable)
		} else if !strings.Contains(err.Error(), "idmapped") {
			t.Errorf("%s: %v", field, err)
		}
	}
	ctl := rootAloneDir(t)
	if err := os.Symlink(outside, filepath.Join(ctl, "out")); err != nil {
		t.Fatal(err)
	}
	p, err := BuildPlan(PlanInput{Cwd: "/", Home: "/", FS: policyWrite(filepath.Join(ctl, "out"))})
	if err != nil || len(p.Writable) != 1 || p.Writable[0].Src != outside {
		t.Fatalf("root's link outside a mapped tree: %v %+v", err, p)
	}
	// The same link where others may write: a sandbox could have moved it
	// there out of a mapped tree (the mark stays behind).
	for _, mode := range []os.FileMode{0o777, 0o1777, 0o775} {
		if err := os.Chmod(ctl, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := BuildPlan(PlanInput{Cwd: "/", Home: "/", FS: policyWrite(filepath.Join(ctl, "out"))}); err == nil || !strings.Contains(err.Error(), "others than root may write") {
			t.Errorf("root's link in a %v directory: %v", mode, err)
		}
	}
	if err := os.Chmod(ctl, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(ctl, 1000, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := BuildPlan(PlanInput{Cwd: "/", Home: "/", FS: policyWrite(filepath.Join(ctl, "out"))}); err == nil || !strings.Contains(err.Error(), "others than root may write") {
		t.Errorf("root's link in a directory of uid 1000: %v", err)
	}
}

// rootAloneDir is a new directory only root may write, below directories
// only root may write (t.TempDir is below /tmp, which everyone may).
func rootAloneDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/run", "srt-mcp-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

func policyWrite(p ...string) policy.Filesystem { return policy.Filesystem{AllowWrite: p} }

// A single writable file is mapped the same way (its mount point is a
// file; it needs write, not search); a directory its owner may not write
// either is not mapped, and refused as before.
func TestIdmapFileRootAndNothingToGain(t *testing.T) {
	requireRoot(t)
	requireBwrap(t)
	dir := ownerDir(t, 0, 0)
	file := filepath.Join(dir, "notes")
	if err := os.WriteFile(file, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var c collector
	s := testSpec(t, "/bin/sh", "-c", "echo two >> "+file)
	s.Policy.Filesystem.AllowWrite = []string{file}
	r, _ := Start(t.Context(), s, c.sink, Options{})
	r.Wait()
	if _, errs, end := c.check(t); end.Type != EventExit || end.ExitCode != 0 {
		t.Fatalf("a root-owned 0644 file: end %+v %s", end, errs)
	}
	if b, _ := os.ReadFile(file); string(b) != "one\ntwo\n" {
		t.Errorf("the file holds %q", b)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the file's mode changed: %v %v", fi.Mode(), err)
	}

	ro := ownerDir(t, 1000, 1000)
	if err := os.Chmod(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	var c2 collector
	s = testSpec(t, "/bin/true")
	s.Policy.Filesystem.AllowWrite = []string{ro}
	r, _ = Start(t.Context(), s, c2.sink, Options{})
	r.Wait()
	if _, _, end := c2.check(t); end.Type != EventError || end.ErrCode != ErrCodeInvalidPolicy || strings.Contains(end.Message, "idmapped") {
		t.Errorf("a 0555 directory: end %+v", end)
	}
}

// A tree holding a program a sandbox writing as its owner could keep
// privileged (a store through a shared mmap keeps set-uid, set-gid and
// file capabilities) is not mapped, whoever owns it; the message names
// the file and the fix. Without the program the same tree is mapped.
func TestIdmapPrivilegedFilesRefused(t *testing.T) {
	requireRoot(t)
	requireBwrap(t)
	caps := make([]byte, 20) // vfs_cap_data revision 2, effective, CAP_NET_RAW permitted
	binary.LittleEndian.PutUint32(caps[0:], 0x02000001)
	binary.LittleEndian.PutUint32(caps[4:], 1<<13)
	for _, tc := range []struct {
		name     string
		uid, gid int
		make     func(p string) error
		want     string
	}{
		{"set-uid root", 0, 0, func(p string) error { return os.Chmod(p, os.ModeSetuid|0o755) }, "set-uid"},
		{"set-gid of the group", 1000, 1000, func(p string) error {
			if err := os.Chown(p, 1000, 1000); err != nil {
				return err
			}
			return os.Chmod(p, os.ModeSetgid|0o755)
		}, "set-gid"},
		{"file capabilities", 0, 0, func(p string) error { return unix.Setxattr(p, "security.capability", caps, 0) }, "capabilities"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := ownerDir(t, tc.uid, tc.gid)
			deep := filepath.Join(dir, "a", "b")
			if err := os.MkdirAll(deep, 0o755); err != nil {
				t.Fatal(err)
			}
			prog := filepath.Join(deep, "helper")
			if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := tc.make(prog); err != nil {
				t.Fatal(err)
			}
			run := func() Event {
				var c collector
				s := testSpec(t, "/bin/true")
				s.Policy.Filesystem.AllowWrite = []string{dir}
				r, _ := Start(t.Context(), s, c.sink, Options{})
				r.Wait()
				_, _, end := c.check(t)
				return end
			}
			if end := run(); end.Type != EventError || end.ErrCode != ErrCodeInvalidPolicy || !strings.Contains(end.Message, prog) || !strings.Contains(end.Message, tc.want) {
				t.Fatalf("a tree holding %s: end %+v", prog, end)
			}
			if err := os.Remove(prog); err != nil {
				t.Fatal(err)
			}
			if end := run(); end.Type != EventExit || end.ExitCode != 0 {
				t.Errorf("the same tree without it: end %+v", end)
			}
		})
	}
}

// The check before mapping is bounded: a tree with more entries than the
// bound is refused, saying so.
func TestIdmapPrivilegedCheckBounded(t *testing.T) {
	requireRoot(t)
	dir := ownerDir(t, 0, 0)
	for i := range 12 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := refusePrivilegedFiles(f, 0, 0, 10); err == nil || !strings.Contains(err.Error(), "more than 10 entries") {
		t.Errorf("12 entries, bound 10: %v", err)
	}
	if err := refusePrivilegedFiles(f, 0, 0, 100); err != nil {
		t.Errorf("12 entries, bound 100: %v", err)
	}
}

// BenchmarkRefusePrivilegedFiles: the check before each mapped run, on a
// tree of 10,000 files in 100 directories (runner/README.md has the table).
func BenchmarkRefusePrivilegedFiles(b *testing.B) {
	dir := b.TempDir()
	for i := range 100 {
		d := filepath.Join(dir, fmt.Sprint(i))
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := range 100 {
			mode := os.FileMode(0o644)
			if j%4 == 0 {
				mode = 0o755
			}
			if err := os.WriteFile(filepath.Join(d, fmt.Sprint(j)), nil, mode); err != nil {
				b.Fatal(err)
			}
		}
	}
	f, err := os.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := refusePrivilegedFiles(f, st.Uid, st.Gid, idmapCheckLimit); err != nil {
			b.Fatal(err)
		}
	}
}

// A file of the owner's with a hard link outside the tree is not mapped
// (a chmod and a write through the mapping would change it there too);
// links within the tree are fine.
func TestIdmapHardLinkOutsideRefused(t *testing.T) {
	requireRoot(t)
	dir := ownerDir(t, 0, 0)
	outside := filepath.Join(filepath.Dir(dir), "store")
	if err := os.WriteFile(outside, []byte("x"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "one"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "a", "one"), filepath.Join(dir, "two")); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := refusePrivilegedFiles(f, 0, 0, 100); err != nil {
		t.Fatalf("two names of one file, both in the tree: %v", err)
	}
	if err := os.Link(outside, filepath.Join(dir, "a", "pkg")); err != nil {
		t.Fatal(err)
	}
	if err := refusePrivilegedFiles(f, 0, 0, 100); err == nil || !strings.Contains(err.Error(), "hard links") || !strings.Contains(err.Error(), "a/pkg") {
		t.Errorf("a file linked from outside the tree: %v", err)
	}
}
