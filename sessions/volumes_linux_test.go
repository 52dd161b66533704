//go:build linux

package sessions

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Images are sparse: a server makes a workspace only while the state
// directory's filesystem can hold its whole quota, and says storage_full
// (no host path) past that; a server whose first volume does not fit at
// all falls back to directories.
func TestVolumeNeedsRoomForItsQuota(t *testing.T) {
	requireVolumes(t)
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=64m"); err != nil {
		t.Skip("no tmpfs here:", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(mnt, syscall.MNT_DETACH) })
	s := newSessions(t, Config{StateDir: filepath.Join(mnt, "state"), Max: 8, VolumeBytes: 20 << 20})
	s.StartVolumes()
	if ok, note := s.VolumeStatus(); !ok {
		t.Fatal(note)
	}
	if _, _, err := s.Open("", ""); err != nil {
		t.Fatal(err)
	}
	// Leave less than a 20 MiB workspace's image free.
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	fill := int64(st.Bavail)*st.Bsize - 10<<20
	if err := os.WriteFile(filepath.Join(mnt, "filler"), make([]byte, fill), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	for i := 0; i < 3 && err == nil; i++ { // the ready volume, if any, first
		_, _, err = s.Open("", "")
	}
	wantCode(t, err, "storage_full")
	if strings.Contains(err.Error(), mnt) {
		t.Errorf("storage_full names a host path: %v", err)
	}
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open("", ""); err != nil {
		t.Errorf("with the disk free again: %v", err)
	}
	// A server whose first volume does not fit at all: directories.
	small := newSessions(t, Config{StateDir: filepath.Join(mnt, "small"), Max: 8, VolumeBytes: 1 << 30})
	small.StartVolumes()
	if ok, note := small.VolumeStatus(); ok || !strings.Contains(note, "directories") {
		t.Errorf("a 1 GiB volume on a 64 MiB disk: %v %q", ok, note)
	}
}

// A snapshot is a frozen copy of the session's filesystem: restore brings
// its files back (and only its principal's snapshot restores), an
// unfinished or expired snapshot is swept, and the budget is kept.
func TestSnapshotRestore(t *testing.T) {
	requireVolumes(t)
	s := newSessions(t, Config{StateDir: t.TempDir(), Max: 4, VolumeBytes: 32 << 20})
	s.StartVolumes()
	ss, _, err := s.Open("", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.WriteFile("keep.txt", []byte("version one"), false); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ss.Cache, "pkg.txt"), []byte("cached"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckLabel("a/b"); err == nil {
		t.Error("a name with '/' was accepted")
	}
	snap, err := s.Snapshot(ss, "first", time.Hour, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.WriteFile("keep.txt", []byte("version two"), true); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.WriteFile("later.txt", []byte("x"), false); err != nil {
		t.Fatal(err)
	}
	// Another principal's session cannot restore alice's snapshot.
	bob, _, err := s.Open("", "bob")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(bob, snap.ID); err == nil {
		t.Fatal("bob restored alice's snapshot")
	} else {
		wantCode(t, err, "not_found")
	}
	if got := s.Snapshots("bob"); len(got) != 0 {
		t.Errorf("bob lists %v", got)
	}
	if _, err := s.Restore(ss, snap.ID); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ss.Workspace, "keep.txt")); string(b) != "version one" {
		t.Errorf("after restore keep.txt holds %q", b)
	}
	if _, err := os.Lstat(filepath.Join(ss.Workspace, "later.txt")); err == nil {
		t.Error("a file made after the snapshot survived the restore")
	}
	if b, _ := os.ReadFile(filepath.Join(ss.Cache, "pkg.txt")); string(b) != "cached" {
		t.Errorf("the cache was not restored: %q", b)
	}
	if list := s.Snapshots("alice"); len(list) != 1 || list[0].Name != "first" {
		t.Errorf("alice lists %+v", list)
	}
	// The budget: a second snapshot past it is refused and leaves nothing.
	if _, err := s.Snapshot(ss, "second", time.Hour, snap.Bytes+1, nil); err == nil {
		t.Error("a snapshot past the budget was made")
	} else {
		wantCode(t, err, "quota_exceeded")
	}
	// An unfinished one (a killed server's) and an expired one are swept.
	unfinished := filepath.Join(s.snapshotsDir(), "new-0123456789abcdef")
	if err := os.MkdirAll(unfinished, 0o700); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	_ = os.Chtimes(unfinished, old, old)
	if n := s.SweepSnapshots(time.Now().Add(2 * time.Hour)); n != 2 {
		t.Errorf("swept %d, want the unfinished and the expired one", n)
	}
	if len(s.Snapshots("alice")) != 0 {
		t.Error("the expired snapshot is still listed")
	}
}

// Snapshots asked for at once under a budget that holds one: each
// promises its size before it copies, so at most one is published.
func TestSnapshotBudgetHoldsUnderRace(t *testing.T) {
	requireVolumes(t)
	s := newSessions(t, Config{StateDir: t.TempDir(), Max: 8, VolumeBytes: 32 << 20})
	s.StartVolumes()
	var all []*Session
	for i := 0; i < 4; i++ {
		ss, _, err := s.Open("", "alice")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ss.WriteFile("d.bin", make([]byte, 4<<20), false); err != nil {
			t.Fatal(err)
		}
		all = append(all, ss)
	}
	one, err := s.Snapshot(all[0], "size", time.Hour, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSnapshot(one.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	budget := one.Bytes * 3 / 2
	for round := 0; round < 5; round++ {
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for _, ss := range all {
			wg.Add(1)
			go func(ss *Session) {
				defer wg.Done()
				<-gate
				_, _ = s.Snapshot(ss, "race", time.Hour, budget, nil)
			}(ss)
		}
		close(gate)
		wg.Wait()
		list := s.Snapshots("alice")
		held := int64(0)
		for _, o := range list {
			held += o.Bytes
		}
		if len(list) != 1 || held > budget {
			t.Fatalf("round %d: %d snapshots published at once, %d bytes under a budget of %d; want exactly one", round, len(list), held, budget)
		}
		for _, o := range list {
			_ = s.DeleteSnapshot(o.ID, "alice")
		}
	}
}

// A fork copies a session's files straight into another session: no
// snapshot exists at any time, and the copy's files are the new
// session's.
func TestForkMakesNoSnapshot(t *testing.T) {
	requireVolumes(t)
	s := newSessions(t, Config{StateDir: t.TempDir(), Max: 4, VolumeBytes: 32 << 20})
	s.StartVolumes()
	src, _, err := s.Open("", "alice")
	if err != nil {
		t.Fatal(err)
	}
	dst, _, err := s.Open("", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.WriteFile("a.txt", []byte("from src"), false); err != nil {
		t.Fatal(err)
	}
	if err := s.Fork(src, dst, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst.Workspace, "a.txt")); string(b) != "from src" {
		t.Errorf("the fork holds %q", b)
	}
	if ents, _ := os.ReadDir(s.snapshotsDir()); len(ents) != 0 {
		t.Errorf("a fork left %d entries in the snapshots directory", len(ents))
	}
	if _, err := dst.WriteFile("b.txt", []byte("x"), false); err != nil {
		t.Errorf("writing into the fork: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(src.Workspace, "b.txt")); err == nil {
		t.Error("a write into the fork reached its source")
	}
}

// A session whose filesystem never freezes (a splice into it that nobody
// ends) gets session_busy in bounded time, and nothing half-made stays.
func TestSnapshotOfABusyFilesystem(t *testing.T) {
	requireVolumes(t)
	s := newSessions(t, Config{StateDir: t.TempDir(), Max: 4, VolumeBytes: 32 << 20})
	s.StartVolumes()
	ss, _, err := s.Open("", "alice")
	if err != nil {
		t.Fatal(err)
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(ss.Workspace, "held.bin"))
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_, _ = unix.Splice(p[0], nil, int(f.Fd()), nil, 4096, 0)
		f.Close()
	}()
	defer func() { syscall.Close(p[1]); <-ended; syscall.Close(p[0]) }()
	time.Sleep(100 * time.Millisecond)
	busy := 0
	start := time.Now()
	_, err = s.Snapshot(ss, "busy", time.Hour, 0, func() { busy++ })
	if err == nil {
		t.Fatal("a snapshot of a filesystem a splice held was made")
	}
	wantCode(t, err, "session_busy")
	if busy != 1 {
		t.Errorf("busy was called %d times, want 1", busy)
	}
	if took := time.Since(start); took > 3*freezeWait {
		t.Errorf("the snapshot gave up after %s", took)
	}
	if ents, _ := os.ReadDir(s.snapshotsDir()); len(ents) != 0 {
		t.Errorf("%d entries left in the snapshots directory", len(ents))
	}
}

// The state disk full during a snapshot and a restore, for both kinds of
// workspace: storage_full, no host path, nothing half-made in the
// snapshots directory, and the workspace as it was.
func TestSnapshotOnAFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	for _, vol := range []bool{false, true} {
		t.Run(kind(vol), func(t *testing.T) {
			if vol {
				requireVolumes(t)
			}
			mnt := t.TempDir()
			if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=96m"); err != nil {
				t.Skip("no tmpfs here:", err)
			}
			t.Cleanup(func() { _ = syscall.Unmount(mnt, syscall.MNT_DETACH) })
			cfg := Config{StateDir: filepath.Join(mnt, "state"), Max: 4}
			if vol {
				cfg.VolumeBytes = 24 << 20
			}
			s := newSessions(t, cfg)
			s.StartVolumes()
			ss, _, err := s.Open("", "alice")
			if err != nil {
				t.Fatal(err)
			}
			data := bytes.Repeat([]byte("d"), 8<<20)
			if _, err := ss.WriteFile("keep.bin", data, false); err != nil {
				t.Fatal(err)
			}
			snap, err := s.Snapshot(ss, "before", time.Hour, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ss.WriteFile("keep.bin", []byte("changed"), true); err != nil {
				t.Fatal(err)
			}
			var st syscall.Statfs_t
			if err := syscall.Statfs(mnt, &st); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(mnt, "filler"), make([]byte, int64(st.Bavail)*st.Bsize-(2<<20)), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = s.Snapshot(ss, "full", time.Hour, 0, nil)
			wantCode(t, err, "storage_full")
			if strings.Contains(err.Error(), mnt) {
				t.Errorf("the error names a host path: %v", err)
			}
			if ents, _ := os.ReadDir(s.snapshotsDir()); len(ents) != 1 {
				t.Errorf("the snapshots directory holds %d entries, want the first snapshot only", len(ents))
			}
			_, err = s.Restore(ss, snap.ID)
			wantCode(t, err, "storage_full")
			if b, _, err := ss.ReadFile("keep.bin", 100); err != nil || string(b) != "changed" {
				t.Errorf("after a refused restore the workspace holds %q %v", b, err)
			}
			if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Restore(ss, snap.ID); err != nil {
				t.Fatalf("a restore once there is room: %v", err)
			}
			if b, _, _ := ss.ReadFile("keep.bin", 16<<20); !bytes.Equal(b, data) {
				t.Errorf("the restored workspace holds %d bytes, want the snapshot's %d", len(b), len(data))
			}
		})
	}
}
