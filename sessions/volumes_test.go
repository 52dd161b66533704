package sessions

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/srt-mcp/srt-mcp/volume"
)

// A walk racing close_session answered, about once in a hundred, with the
// walk's own error: "getdents <host path>: ...". No reply carries a host
// path.
func TestUsageRacingCloseNamesNoHostPath(t *testing.T) {
	s := newSessions(t, Config{Max: 4})
	for i := 0; i < 200; i++ {
		ss, _, err := s.Open("", "")
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 40; j++ {
			if err := os.MkdirAll(filepath.Join(ss.Workspace, "d"+strings.Repeat("x", j%5), "e", "f"), 0o700); err != nil {
				t.Fatal(err)
			}
			_ = os.WriteFile(filepath.Join(ss.Workspace, "f"+strings.Repeat("y", j)), []byte("z"), 0o600)
		}
		var wg sync.WaitGroup
		errc := make(chan error, 4)
		for k := 0; k < 4; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := ss.Usage()
				errc <- err
			}()
		}
		_ = s.Close(ss.ID)
		wg.Wait()
		close(errc)
		for err := range errc {
			if err != nil && strings.Contains(err.Error(), s.StateDir()) {
				t.Fatalf("a walk racing close_session: %v", err)
			}
		}
	}
}

// requireVolumes skips where a process cannot make volumes (not root, no
// loop devices, no mkfs.ext4).
func requireVolumes(t *testing.T) {
	t.Helper()
	if ok, why := volume.Supported(); !ok {
		t.Skip(why)
	}
}

// A session of a registry with volumes is a filesystem of its own: the
// kernel refuses a write past its size, its cache counts, closing it
// unmounts and removes the image, and a server killed with volumes
// mounted leaves nothing the next one does not remove.
func TestVolumeSessions(t *testing.T) {
	requireVolumes(t)
	state := t.TempDir()
	s := newSessions(t, Config{StateDir: state, Max: 4, VolumeBytes: 8 << 20, UIDs: &DefaultUIDs})
	s.StartVolumes()
	if ok, note := s.VolumeStatus(); !ok {
		t.Fatalf("volumes were asked for and are supported, yet: %s", note)
	}
	ss, _, err := s.Open("", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !ss.Bounded() || !volume.Mounted(filepath.Dir(ss.Workspace)) {
		t.Fatalf("the session's workspace %s is not a mounted filesystem", ss.Workspace)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(ss.Workspace, &st); err != nil || int(st.Uid) != ss.UID() {
		t.Fatalf("the workspace is not the session uid's (%d): %+v %v", ss.UID(), st.Uid, err)
	}
	// 6 MiB in the cache, then an upload of 4 MiB does not fit: one
	// bound for both.
	if err := os.WriteFile(filepath.Join(ss.Cache, "pkg.bin"), bytes.Repeat([]byte("c"), 6<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = ss.WriteFile("up.bin", bytes.Repeat([]byte("u"), 4<<20), false)
	wantCode(t, err, "quota_exceeded")
	if strings.Contains(err.Error(), state) {
		t.Errorf("the quota error names a host path: %v", err)
	}
	if f, _, err := ss.Open("up.bin"); err == nil {
		f.Close()
		t.Error("a write that did not fit left its file")
	}
	used, free, ok := ss.Space()
	if !ok || used < 6<<20 || free > 3<<20 {
		t.Errorf("Space: used %d free %d ok %v after 6 MiB in an 8 MiB volume", used, free, ok)
	}
	dir := ss.Dir
	if err := s.Close(ss.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("a closed session's workspace is still there: %v", err)
	}
	if mounted(t, dir) {
		t.Errorf("a closed session's volume is still mounted")
	}
}

// mounted reports whether any mount point of this mount namespace lies
// under dir.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(b, []byte(" "+dir+"/"))
}

// A server killed with sessions and ready volumes mounted: the next one
// unmounts and removes them all.
func TestVolumeLeftovers(t *testing.T) {
	requireVolumes(t)
	state := t.TempDir()
	dead, err := New(Config{StateDir: state, Max: 4, VolumeBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	dead.StartVolumes()
	if _, _, err := dead.Open("", ""); err != nil {
		t.Fatal(err)
	}
	// Killed: its lock goes with its process, nothing else is undone.
	dead.once.Do(func() { close(dead.stop) })
	<-dead.filling
	dead.lock.Close()
	if !mounted(t, filepath.Join(state, "workspaces")) {
		t.Fatal("the test's premise: the dead server's volumes are mounted")
	}
	next := newSessions(t, Config{StateDir: state, Max: 4, VolumeBytes: 8 << 20})
	next.StartVolumes()
	n, err := next.RemoveLeftovers()
	if err != nil || n < 1 {
		t.Fatalf("RemoveLeftovers: %d, %v (a session and ready volumes were left)", n, err)
	}
	ents, _ := os.ReadDir(filepath.Join(state, "workspaces"))
	for _, e := range ents {
		if b, err := os.ReadFile(filepath.Join(state, "workspaces", e.Name(), "instance")); err == nil && string(b) == dead.Instance() {
			t.Errorf("the dead server's %s is still there", e.Name())
		}
	}
	// The next server's own ready volumes are mounted there too; a mount
	// point whose directory is gone is a leak.
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], state+"/") {
			if _, err := os.Lstat(f[4]); err != nil {
				t.Errorf("a mount of a removed workspace is left: %s", line)
			}
		}
	}
}
