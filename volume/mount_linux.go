//go:build linux

package volume

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const noFollow = unix.O_NOFOLLOW

// Supported reports whether this process can give workspaces filesystems
// of their own, and if not, why (a sentence naming what is missing).
func Supported() (bool, string) {
	s := support()
	return s == "", s
}

var support = sync.OnceValue(func() string {
	if os.Geteuid() != 0 {
		return "workspaces are directories with a watched quota: a filesystem per workspace needs a root server (loop devices and mount)"
	}
	if err := unix.Access("/dev/loop-control", unix.R_OK|unix.W_OK); err != nil {
		return "workspaces are directories with a watched quota: /dev/loop-control is not usable here (" + err.Error() + "); a filesystem per workspace needs loop devices"
	}
	if mkfs() == "" {
		return "workspaces are directories with a watched quota: mkfs.ext4 is not installed (Debian: apt install e2fsprogs)"
	}
	return ""
})

// Mount attaches image to a free loop device and mounts its ext4 on dir
// (nodev, nosuid). The image is opened without following a link and must
// be a regular file; the mount goes onto the directory opened the same
// way. The loop device frees itself when the filesystem is unmounted and
// no sandbox holds it any more.
func Mount(image, dir string) error {
	img, err := os.OpenFile(image, os.O_RDWR|noFollow, 0)
	if err != nil {
		return err
	}
	defer img.Close()
	if fi, err := img.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", image)
	}
	target, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(target)
	dev, loop, err := attach(img)
	if err != nil {
		return err
	}
	// Closing loop frees the device (autoclear) unless the mount holds it.
	defer loop.Close()
	err = unix.Mount(dev, "/proc/self/fd/"+strconv.Itoa(target), "ext4", unix.MS_NODEV|unix.MS_NOSUID|unix.MS_NOATIME, "errors=remount-ro")
	if err != nil {
		return fmt.Errorf("mounting %s: %w", dev, err)
	}
	return nil
}

// attach binds img to a free loop device (LOOP_CONFIGURE, autoclear,
// direct I/O: the image's pages are not cached twice, and buffered was
// half as fast for sequential writes) and returns the device's path and
// an open descriptor of it.
func attach(img *os.File) (string, *os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return "", nil, err
	}
	defer ctl.Close()
	for try := 0; ; try++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", nil, fmt.Errorf("no free loop device: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		loop, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			return "", nil, err
		}
		// 4 KiB logical blocks, ext4's inside and the host's: direct
		// I/O then never splits a block (~10% of sequential writes).
		cfg := unix.LoopConfig{Fd: uint32(img.Fd()), Size: 4096}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR | unix.LO_FLAGS_DIRECT_IO
		err = unix.IoctlLoopConfigure(int(loop.Fd()), &cfg)
		if err == nil {
			return dev, loop, nil
		}
		loop.Close()
		// Another process took the device between GET_FREE and here.
		if !errors.Is(err, unix.EBUSY) || try == 16 {
			return "", nil, fmt.Errorf("configuring %s: %w", dev, err)
		}
	}
}

// Unmount detaches the filesystem mounted on dir (lazily: a sandbox still
// running keeps its view until it exits). It never follows a link at dir.
func Unmount(dir string) error {
	err := unix.Unmount(dir, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
	if errors.Is(err, unix.EINVAL) {
		return nil // not a mount point
	}
	return err
}

// Mounted reports whether dir (not followed if a link) is a mount point of
// a filesystem other than its parent's.
func Mounted(dir string) bool {
	var st, parent unix.Stat_t
	if unix.Lstat(dir, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return false
	}
	if unix.Lstat(dir+"/..", &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}

// dieWithParent makes mkfs get SIGKILL when the server dies.
func dieWithParent() *unix.SysProcAttr { return &unix.SysProcAttr{Pdeathsig: unix.SIGKILL} }

// allocated is the bytes the host allocated for the file fi describes.
func allocated(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

// FIFREEZE and FITHAW: _IOWR('X', 119, int) and _IOWR('X', 120, int).
const (
	fiFreeze = 0xc0045877
	fiThaw   = 0xc0045878
)

// ErrBusy is Freeze's error when the filesystem's writers did not let it
// freeze in time.
var ErrBusy = errors.New("the filesystem stayed busy: a writer held it past the freeze's deadline")

// Freeze makes the filesystem mounted at dir consistent on its device and
// holds every writer until thaw is called (FIFREEZE, FITHAW), so a copy of
// its image taken meanwhile is a filesystem as the kernel left it.
//
// FIFREEZE waits, uninterruptibly, for every write in progress to end, and
// a sandbox can make one last for ever (a splice from an empty pipe into a
// file holds the filesystem's write reference while it waits). So the
// freeze runs on a thread of its own: when it has not happened after wait,
// busy is called (to stop the programs that may hold it), and after wait
// once more Freeze gives up with ErrBusy; a freeze that still comes later
// is thawed at once. New writes wait meanwhile, as they would for the
// freeze itself.
func Freeze(dir string, wait time.Duration, busy func()) (thaw func(), err error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var (
		mu        sync.Mutex
		abandoned bool
		done      = make(chan syscall.Errno, 1)
	)
	freezing.Add(1)
	go func() {
		defer freezing.Done()
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fiFreeze, 0)
		mu.Lock()
		defer mu.Unlock()
		if !abandoned {
			done <- e
			return
		}
		if e == 0 {
			_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fiThaw, 0)
		}
		unix.Close(fd)
	}()
	var e syscall.Errno
	select {
	case e = <-done:
	case <-time.After(wait):
		if busy != nil {
			busy()
		}
		select {
		case e = <-done:
		case <-time.After(wait):
			mu.Lock()
			select {
			case e = <-done: // it came just now
				mu.Unlock()
			default:
				abandoned = true
				mu.Unlock()
				return nil, &os.PathError{Op: "freeze", Path: dir, Err: ErrBusy}
			}
		}
	}
	if e != 0 {
		unix.Close(fd)
		return nil, &os.PathError{Op: "freeze", Path: dir, Err: e}
	}
	return func() {
		_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fiThaw, 0)
		unix.Close(fd)
	}, nil
}

// freezing counts the freezes under way, abandoned ones included.
var freezing sync.WaitGroup

// Settle waits up to d for the freezes under way to end. A process that
// exits while an abandoned freeze is still waiting leaves the filesystem
// frozen once it happens (nobody thaws it: a frozen filesystem outlives
// its unmount, with its loop device); a server settles before it exits,
// once the sandboxes that held the filesystem are gone.
func Settle(d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		freezing.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// Thaw undoes a freeze of the filesystem mounted at dir that nobody will
// undo: a server killed while it copied a frozen image. A frozen
// filesystem outlives its lazy unmount, with its loop device and every
// writer stuck, so leftovers are thawed before they are unmounted. A
// filesystem that is not frozen is left as it is.
func Thaw(dir string) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fiThaw, 0) // EINVAL when not frozen
	unix.Close(fd)
}

// fiTrim is FITRIM: _IOWR('X', 121, struct fstrim_range).
const fiTrim = 0xc0185879

// Trim gives the free blocks of the filesystem mounted at dir back to the
// host (FITRIM: the loop device punches holes in the image), so an image
// holds what its files hold, not every block they ever used: a snapshot
// then copies only that.
func Trim(dir string) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	r := struct{ start, len, minlen uint64 }{0, ^uint64(0), 0}
	_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fiTrim, uintptr(unsafe.Pointer(&r)))
	unix.Close(fd)
}

// Sync writes the dirty pages of the filesystem mounted at dir to its
// image (syncfs), so the image's allocation says what the filesystem holds.
func Sync(dir string) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	_ = unix.Syncfs(fd)
	unix.Close(fd)
}
