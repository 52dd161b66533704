package sessions

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/srt-mcp/srt-mcp/volume"
)

// persistModes runs f with workspaces that are directories, and (where
// this process can make them) filesystems of their own.
func persistModes(t *testing.T, f func(t *testing.T, cfg func(state string) Config)) {
	t.Run("directories", func(t *testing.T) {
		f(t, func(state string) Config { return Config{StateDir: state, Max: 4} })
	})
	t.Run("volumes", func(t *testing.T) {
		requireVolumes(t)
		f(t, func(state string) Config {
			return Config{StateDir: state, Max: 4, VolumeBytes: 8 << 20, UIDs: &DefaultUIDs}
		})
	})
}

func startRegistry(t *testing.T, cfg Config) *Registry {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.StartVolumes()
	return s
}

// A persistent workspace outlives its server: after a shutdown the next
// server resumes it under the same handle with its files, for its
// principal alone; create_session with its name finds it again.
func TestPersistentOutlivesShutdown(t *testing.T) {
	persistModes(t, func(t *testing.T, cfg func(string) Config) {
		state := t.TempDir()
		a := startRegistry(t, cfg(state))
		ss, created, err := a.CreatePersistent("alice", "proj")
		if err != nil || !created {
			t.Fatalf("CreatePersistent: %v created %v", err, created)
		}
		if _, err := ss.WriteFile("keep.txt", []byte("kept"), false); err != nil {
			t.Fatal(err)
		}
		again, created, err := a.CreatePersistent("alice", "proj")
		if err != nil || created || again != ss {
			t.Fatalf("the same name again: %v created %v same %v", err, created, again == ss)
		}
		id := ss.ID
		a.Shutdown()
		if volume.Mounted(filepath.Dir(ss.Workspace)) {
			t.Error("a suspended workspace is still mounted")
		}
		b := startRegistry(t, cfg(state))
		t.Cleanup(b.Shutdown)
		if _, err := b.Lookup(id, "bob"); err == nil {
			t.Fatal("bob resumed alice's persistent workspace")
		}
		r, err := b.Lookup(id, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if !r.Resumed() {
			t.Error("a resumed workspace does not say so")
		}
		if got, _, err := r.ReadFile("keep.txt", 100); err != nil || string(got) != "kept" {
			t.Errorf("after a restart keep.txt: %q %v", got, err)
		}
		if _, err := r.WriteFile("more.txt", []byte("x"), false); err != nil {
			t.Errorf("writing into the resumed workspace: %v", err)
		}
		if n, _, err := b.CreatePersistent("alice", "proj"); err != nil || n.ID != id {
			t.Errorf("by name after the restart: %v %v", n, err)
		}
		if list := b.Workspaces("alice"); len(list) != 1 || list[0].Name != "proj" || !list[0].Persist || list[0].State != "active" {
			t.Errorf("alice's workspaces: %+v", list)
		}
		if list := b.Workspaces("bob"); len(list) != 0 {
			t.Errorf("bob lists %+v", list)
		}
		dir := r.Dir
		if err := b.Close(id); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(dir); !os.IsNotExist(err) {
			t.Errorf("a destroyed persistent workspace is still stored: %v", err)
		}
		if _, err := b.Lookup(id, "alice"); err == nil {
			t.Error("a destroyed persistent workspace resumed")
		}
	})
}

// A server that dies with a persistent workspace open (its locks released,
// its filesystem still mounted): the next one resumes it with its files.
func TestPersistentAfterCrash(t *testing.T) {
	persistModes(t, func(t *testing.T, cfg func(string) Config) {
		state := t.TempDir()
		a := startRegistry(t, cfg(state))
		ss, _, err := a.CreatePersistent("alice", "proj")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ss.WriteFile("keep.txt", []byte("kept"), false); err != nil {
			t.Fatal(err)
		}
		// What SIGKILL does to it: the flocks go, the mount stays.
		a.once.Do(func() { close(a.stop) })
		ss.persist.lock.Close()
		a.lock.Close()
		if a.filling != nil {
			<-a.filling
			a.dropReady()
		}
		b := startRegistry(t, cfg(state))
		t.Cleanup(b.Shutdown)
		r, err := b.Lookup(ss.ID, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if got, _, err := r.ReadFile("keep.txt", 100); err != nil || string(got) != "kept" {
			t.Errorf("after a crash keep.txt: %q %v", got, err)
		}
	})
}

// Replicas sharing the persistent directory: a workspace suspended on one
// resumes by name on another, under a handle of the other; the old
// handle finds nothing any more.
func TestPersistentMovesBetweenReplicas(t *testing.T) {
	persistModes(t, func(t *testing.T, cfg func(string) Config) {
		shared := t.TempDir()
		ca, cb := cfg(t.TempDir()), cfg(t.TempDir())
		ca.Replica, cb.Replica = "ra", "rb"
		ca.PersistDir, cb.PersistDir = shared, shared
		a := startRegistry(t, ca)
		ss, _, err := a.CreatePersistent("alice", "proj")
		if err != nil {
			t.Fatal(err)
		}
		if ReplicaOf(ss.ID) != "ra" {
			t.Fatalf("handle %s", ss.ID)
		}
		if _, err := ss.WriteFile("keep.txt", []byte("kept"), false); err != nil {
			t.Fatal(err)
		}
		b := startRegistry(t, cb)
		t.Cleanup(b.Shutdown)
		// Open on ra: rb refuses to take it.
		_, _, err = b.CreatePersistent("alice", "proj")
		wantCode(t, err, "session_busy")
		if list := b.Workspaces("alice"); len(list) != 1 || list[0].State != "elsewhere" {
			t.Errorf("rb lists %+v", list)
		}
		old := ss.ID
		a.Shutdown()
		moved, created, err := b.CreatePersistent("alice", "proj")
		if err != nil || created {
			t.Fatalf("resuming on rb: %v created %v", err, created)
		}
		if ReplicaOf(moved.ID) != "rb" {
			t.Errorf("the moved workspace's handle %s does not name rb", moved.ID)
		}
		if got, _, err := moved.ReadFile("keep.txt", 100); err != nil || string(got) != "kept" {
			t.Errorf("on rb keep.txt: %q %v", got, err)
		}
		a2 := startRegistry(t, ca)
		t.Cleanup(a2.Shutdown)
		if _, err := a2.Lookup(old, "alice"); err == nil {
			t.Error("the old handle still resumes the workspace on ra")
		}
	})
}

// Bounds: a principal's persistent workspaces and the server's; names
// that cannot be shown are refused; suspended ones past PersistTTL go.
func TestPersistentBounds(t *testing.T) {
	state := t.TempDir()
	s := newSessions(t, Config{StateDir: state, Max: 8, MaxPersist: 3, MaxPersistPerPrincipal: 2, PersistTTL: time.Hour})
	for _, bad := range []string{"", " ", "a/b", "a\x00b", "x\u202ey", string(make([]byte, 200))} {
		if _, _, err := s.CreatePersistent("alice", bad); err == nil {
			t.Errorf("name %q accepted", bad)
		} else {
			wantCode(t, err, "invalid_arguments")
		}
	}
	for _, n := range []string{"one", "two"} {
		if _, _, err := s.CreatePersistent("alice", n); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := s.CreatePersistent("alice", "three")
	wantCode(t, err, "max_sessions")
	if _, _, err := s.CreatePersistent("bob", "one"); err != nil {
		t.Fatalf("bob's own 'one': %v", err)
	}
	_, _, err = s.CreatePersistent("carol", "one")
	wantCode(t, err, "max_sessions")
	// Suspended and idle past the TTL: swept; open ones are not.
	s.Sweep(time.Now().Add(2 * time.Hour)) // suspends all three
	if n := s.SweepPersistent(time.Now().Add(30 * time.Minute)); n != 0 {
		t.Errorf("swept %d before their TTL", n)
	}
	if n := s.SweepPersistent(time.Now().Add(3 * time.Hour)); n != 3 {
		t.Errorf("swept %d, want 3", n)
	}
	if list := s.Workspaces("alice"); len(list) != 0 {
		t.Errorf("alice still lists %+v", list)
	}
	ents, _ := os.ReadDir(s.PersistDir())
	for _, e := range ents {
		if e.Name() != ".lock" { // the directory's own
			t.Errorf("%s left in the persistent directory", e.Name())
		}
	}
}

// A suspended workspace's directory is never reached through a link: a
// meta.json or an image that is a symlink is not read or mounted.
func TestPersistentFollowsNoLink(t *testing.T) {
	state := t.TempDir()
	s := newSessions(t, Config{StateDir: state, Max: 4})
	ss, _, err := s.CreatePersistent("alice", "proj")
	if err != nil {
		t.Fatal(err)
	}
	id, dir := ss.ID, ss.Dir
	s.mu.Lock()
	delete(s.open, id)
	s.mu.Unlock()
	s.suspend(ss)
	meta := filepath.Join(dir, "meta.json")
	b, _ := os.ReadFile(meta)
	elsewhere := filepath.Join(t.TempDir(), "meta.json")
	if err := os.WriteFile(elsewhere, b, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(meta)
	if err := os.Symlink(elsewhere, meta); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup(id, "alice"); err == nil {
		t.Error("resumed through a meta.json that is a symlink")
	}
	var st syscall.Stat_t
	if syscall.Lstat(meta, &st) != nil {
		t.Error("the link was removed or replaced")
	}
}

// A resumed workspace whose recorded uid is in use (a process of the dead
// server still runs as it) gets another uid, and its files, the
// workspace's own directory included, become that uid's.
func TestPersistentResumeWithItsUIDTaken(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("session uids are a root server's")
	}
	persistModes(t, func(t *testing.T, cfg func(string) Config) {
		state := t.TempDir()
		c := cfg(state)
		c.UIDs = &DefaultUIDs
		a := startRegistry(t, c)
		ss, _, err := a.CreatePersistent("alice", "proj")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ss.WriteFile("keep.txt", []byte("kept"), false); err != nil {
			t.Fatal(err)
		}
		old := ss.UID()
		a.Shutdown()
		b := startRegistry(t, c)
		t.Cleanup(b.Shutdown)
		b.mu.Lock()
		if b.uids == nil {
			b.uids = map[int]bool{}
		}
		b.uids[old] = true // as if a process still ran as it
		b.mu.Unlock()
		r, err := b.Lookup(ss.ID, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if r.UID() == old || r.UID() == 0 {
			t.Fatalf("resumed with uid %d (the old one %d is taken)", r.UID(), old)
		}
		for _, p := range []string{r.Workspace, filepath.Join(r.Workspace, "keep.txt"), r.Cache} {
			var st syscall.Stat_t
			if err := syscall.Lstat(p, &st); err != nil || int(st.Uid) != r.UID() {
				t.Errorf("%s is uid %d, want the resumed session's %d (%v)", filepath.Base(p), st.Uid, r.UID(), err)
			}
		}
	})
}

// A server killed in the middle of a restore of a persistent workspace
// that is a directory (its trees moved aside, the copy not yet in place):
// the next resume puts the workspace back as it was and removes the
// half-made copy.
func TestPersistentKilledDuringRestore(t *testing.T) {
	state := t.TempDir()
	a := startRegistry(t, Config{StateDir: state, Max: 4})
	ss, _, err := a.CreatePersistent("alice", "proj")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.WriteFile("keep.txt", []byte("kept"), false); err != nil {
		t.Fatal(err)
	}
	a.Shutdown()
	// What replaceTrees leaves when killed between its renames.
	if err := os.MkdirAll(filepath.Join(ss.Dir, "restore-old"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(ss.Workspace, filepath.Join(ss.Dir, "restore-old", "data")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ss.Dir, "restore", "cache"), 0o700); err != nil {
		t.Fatal(err)
	}
	b := startRegistry(t, Config{StateDir: state, Max: 4})
	t.Cleanup(b.Shutdown)
	r, err := b.Lookup(ss.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := r.ReadFile("keep.txt", 100); err != nil || string(got) != "kept" {
		t.Errorf("after a restore cut short: keep.txt %q %v", got, err)
	}
	for _, n := range []string{"restore", "restore-old"} {
		if _, err := os.Lstat(filepath.Join(r.Dir, n)); err == nil {
			t.Errorf("%s left behind", n)
		}
	}
}
