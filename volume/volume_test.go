//go:build linux

package volume

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestSupportedSaysWhy(t *testing.T) {
	ok, why := Supported()
	if os.Geteuid() != 0 && (ok || why == "") {
		t.Fatalf("a non-root process: Supported() = %v, %q; want false and a reason", ok, why)
	}
	if !ok && why == "" {
		t.Fatal("unsupported without a reason")
	}
}

// An image holds about its size: allocation past it fails with ENOSPC
// (KEEP_SIZE included), and the host stores at most the image.
func TestVolumeBoundsItsSize(t *testing.T) {
	if ok, why := Supported(); !ok {
		t.Skip(why)
	}
	dir := t.TempDir()
	size := int64(16 << 20)
	image := filepath.Join(dir, "image")
	if err := Format(image, size+Overhead(size, 4096), 4096); err != nil {
		t.Fatal(err)
	}
	if err := Format(image, size, 4096); err == nil {
		t.Fatal("Format overwrote an existing file")
	}
	mnt := filepath.Join(dir, "fs")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Mount(image, mnt); err != nil {
		t.Fatal(err)
	}
	defer Unmount(mnt)
	if !Mounted(mnt) {
		t.Fatal("not mounted")
	}
	f, err := os.Create(filepath.Join(mnt, "keep.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, 64<<20)
	if !errors.Is(err, unix.ENOSPC) {
		t.Errorf("fallocate(KEEP_SIZE) of 64 MiB in a 16 MiB volume: %v, want ENOSPC", err)
	}
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, size-(2<<20)); err != nil {
		t.Errorf("fallocate of 14 MiB in a 16 MiB volume: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(image, &st); err != nil {
		t.Fatal(err)
	}
	if img := size + Overhead(size, 4096); st.Blocks*512 > img+64<<10 {
		t.Errorf("the image holds %d bytes on the host, more than its size %d", st.Blocks*512, img)
	}
	if a, err := Allocated(image); err != nil || a != st.Blocks*512 {
		t.Errorf("Allocated: %d %v, want %d", a, err, st.Blocks*512)
	}
	if err := Unmount(mnt); err != nil || Mounted(mnt) {
		t.Fatalf("Unmount: %v (mounted %v)", err, Mounted(mnt))
	}
}

// A link where the image or the mount point should be is never followed.
func TestMountFollowsNoLink(t *testing.T) {
	if ok, why := Supported(); !ok {
		t.Skip(why)
	}
	dir := t.TempDir()
	image := filepath.Join(dir, "image")
	if err := Format(image, 16<<20, 4096); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(image, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(dir, "fs")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Mount(filepath.Join(dir, "link"), mnt); err == nil {
		Unmount(mnt)
		t.Fatal("mounted an image through a symlink")
	}
	if err := os.Symlink(mnt, filepath.Join(dir, "mntlink")); err != nil {
		t.Fatal(err)
	}
	if err := Mount(image, filepath.Join(dir, "mntlink")); err == nil {
		Unmount(mnt)
		t.Fatal("mounted onto a symlink")
	}
	if err := Format(filepath.Join(dir, "link"), 16<<20, 4096); err == nil {
		t.Fatal("Format wrote through a symlink")
	}
}

// mountScratch formats and mounts a 16 MiB volume for a test.
func mountScratch(t *testing.T) string {
	t.Helper()
	if ok, why := Supported(); !ok {
		t.Skip(why)
	}
	dir := t.TempDir()
	image := filepath.Join(dir, "image")
	if err := Format(image, 16<<20, 4096); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(dir, "fs")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Mount(image, mnt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Thaw(mnt); Unmount(mnt) })
	return mnt
}

// spliceHold starts a splice from an empty pipe into a file of mnt, which
// holds the filesystem's write reference until the pipe's writer end
// closes; it returns that end.
func spliceHold(t *testing.T, mnt string) (release func(), ended chan struct{}) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(mnt, "held.bin"))
	if err != nil {
		t.Fatal(err)
	}
	ended = make(chan struct{})
	go func() {
		defer close(ended)
		_, _ = unix.Splice(p[0], nil, int(f.Fd()), nil, 4096, 0)
		f.Close()
		unix.Close(p[0])
	}()
	time.Sleep(100 * time.Millisecond) // into the pipe's wait
	var once sync.Once
	release = func() { once.Do(func() { unix.Close(p[1]) }) }
	t.Cleanup(release)
	return release, ended
}

// A writer that holds the filesystem (a splice from an empty pipe) makes
// Freeze call busy, and a freeze the writer then lets happen succeeds.
func TestFreezeAsksBusyToStopWriters(t *testing.T) {
	mnt := mountScratch(t)
	release, _ := spliceHold(t, mnt)
	called := false
	start := time.Now()
	thaw, err := Freeze(mnt, 300*time.Millisecond, func() { called = true; release() })
	if err != nil {
		t.Fatalf("Freeze after busy released the writer: %v", err)
	}
	thaw()
	if !called {
		t.Error("busy was not called while a splice held the filesystem")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Freeze took %s", took)
	}
	if err := os.WriteFile(filepath.Join(mnt, "after"), []byte("x"), 0o600); err != nil {
		t.Errorf("a write after thaw: %v", err)
	}
}

// A writer that never lets go: Freeze gives up with ErrBusy in bounded
// time, and when the writer ends at last the filesystem is not left
// frozen.
func TestFreezeGivesUpAndNeverLeavesFrozen(t *testing.T) {
	mnt := mountScratch(t)
	release, ended := spliceHold(t, mnt)
	start := time.Now()
	thaw, err := Freeze(mnt, 200*time.Millisecond, nil)
	if err == nil {
		thaw()
		t.Fatal("Freeze succeeded while a splice held the filesystem")
	}
	if !errors.Is(err, ErrBusy) {
		t.Errorf("Freeze: %v, want ErrBusy", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Freeze gave up after %s", took)
	}
	release()
	<-ended
	wrote := make(chan error, 1)
	go func() { wrote <- os.WriteFile(filepath.Join(mnt, "after"), []byte("x"), 0o600) }()
	select {
	case err := <-wrote:
		if err != nil {
			t.Errorf("a write once the writer ended: %v", err)
		}
	case <-time.After(5 * time.Second):
		Thaw(mnt)
		t.Fatal("the filesystem stayed frozen after an abandoned freeze")
	}
}

// Thaw undoes a freeze nobody else will (a killed server's), and leaves a
// filesystem that is not frozen alone.
func TestThawUndoesAFreeze(t *testing.T) {
	mnt := mountScratch(t)
	Thaw(mnt) // not frozen: nothing happens
	if _, err := Freeze(mnt, time.Second, nil); err != nil {
		t.Fatal(err)
	}
	Thaw(mnt)
	if err := os.WriteFile(filepath.Join(mnt, "after"), []byte("x"), 0o600); err != nil {
		t.Errorf("a write after Thaw: %v", err)
	}
}
