//go:build linux

package sessions

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Images are sparse: a server admits a volume only while the state
// directory's filesystem has room for it and for what its other volumes
// may still grow by, so the host's disk never fills before a session
// reaches its quota. Past that, a new session is storage_full.
func TestVolumePromisesNoMoreThanTheDiskHolds(t *testing.T) {
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
	var opened int
	var err error
	for opened = 0; opened < 4; opened++ {
		if _, _, err = s.Open("", ""); err != nil {
			break
		}
	}
	if opened != 2 {
		t.Fatalf("a 64 MiB disk admitted %d workspaces of 20 MiB (~26 MiB images), want 2 (%v)", opened, err)
	}
	wantCode(t, err, "storage_full")
	if strings.Contains(err.Error(), mnt) {
		t.Errorf("storage_full names a host path: %v", err)
	}
	// A server whose first volume does not fit at all: directories.
	small := newSessions(t, Config{StateDir: filepath.Join(mnt, "small"), Max: 8, VolumeBytes: 1 << 30})
	small.StartVolumes()
	if ok, note := small.VolumeStatus(); ok || !strings.Contains(note, "directories") {
		t.Errorf("a 1 GiB volume on a 64 MiB disk: %v %q", ok, note)
	}
}
