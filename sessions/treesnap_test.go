package sessions

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Workspaces that are directories snapshot, restore and fork as copies of
// their trees: links are copied as links (never followed), FIFOs left
// out (never opened to block), and a tree snapshot restores only into a
// directory workspace.
func TestTreeSnapshots(t *testing.T) {
	s := newSessions(t, Config{StateDir: t.TempDir(), Max: 4})
	ss, _, err := s.Open("", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.WriteFile("keep.txt", []byte("version one"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.WriteFile("sub/deep.txt", []byte("deep"), false); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("host"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(ss.Workspace, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ss.Workspace, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ss.Cache, "pkg.txt"), []byte("cached"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var snap *SnapshotInfo
	go func() {
		defer close(done)
		snap, err = s.Snapshot(ss, "first", time.Hour, 0, nil)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a snapshot of a workspace holding a FIFO blocked")
	}
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Tree || snap.Bytes < int64(len("version one")+len("deep")+len("cached")) {
		t.Errorf("snapshot %+v", snap)
	}
	if _, err := ss.WriteFile("keep.txt", []byte("version two"), true); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.WriteFile("later.txt", []byte("x"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(ss, snap.ID); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ss.Workspace, "keep.txt")); string(b) != "version one" {
		t.Errorf("after restore keep.txt holds %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ss.Workspace, "sub", "deep.txt")); string(b) != "deep" {
		t.Errorf("after restore sub/deep.txt holds %q", b)
	}
	if _, err := os.Lstat(filepath.Join(ss.Workspace, "later.txt")); err == nil {
		t.Error("a file made after the snapshot survived the restore")
	}
	if target, err := os.Readlink(filepath.Join(ss.Workspace, "link")); err != nil || target != secret {
		t.Errorf("the link came back as %q %v, want a link to %s", target, err, secret)
	}
	if b, _ := os.ReadFile(filepath.Join(ss.Cache, "pkg.txt")); string(b) != "cached" {
		t.Errorf("the cache was not restored: %q", b)
	}
	// A fork: a copy in a new session, independent of its source.
	dst, _, err := s.Open("", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Fork(ss, dst, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst.Workspace, "keep.txt")); string(b) != "version one" {
		t.Errorf("the fork holds %q", b)
	}
	if _, err := dst.WriteFile("only-fork.txt", []byte("x"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(ss.Workspace, "only-fork.txt")); err == nil {
		t.Error("a write into the fork reached its source")
	}
	// Nothing of the restore's scratch stays.
	for _, n := range []string{"restore", "restore-old"} {
		if _, err := os.Lstat(filepath.Join(ss.Dir, n)); err == nil {
			t.Errorf("%s left in the session's directory", n)
		}
	}
	// The budget holds for trees as for images.
	if _, err := s.Snapshot(ss, "second", time.Hour, snap.Bytes+1, nil); err == nil {
		t.Error("a snapshot past the budget was made")
	} else {
		wantCode(t, err, "quota_exceeded")
	}
}
