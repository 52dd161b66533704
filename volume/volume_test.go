//go:build linux

package volume

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

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
