//go:build !linux

package volume

import (
	"errors"
	"os"
	"syscall"
	"time"
)

const noFollow = 0

// Supported reports that workspaces are directories here: loop devices
// and ext4 are Linux's.
func Supported() (bool, string) {
	return false, "workspaces are directories with a watched quota: a filesystem per workspace needs Linux"
}

// Mount is not available here.
func Mount(image, dir string) error { return errors.New("volume: not supported on this system") }

// Unmount is not available here.
func Unmount(dir string) error { return nil }

// Mounted reports false: nothing is mounted here.
func Mounted(dir string) bool { return false }

func dieWithParent() *syscall.SysProcAttr { return nil }

func allocated(fi os.FileInfo) int64 { return fi.Size() }

// ErrBusy is Freeze's error when the filesystem's writers did not let it
// freeze in time.
var ErrBusy = errors.New("the filesystem stayed busy")

// Freeze is not available here.
func Freeze(dir string, wait time.Duration, busy func()) (func(), error) {
	return nil, errors.New("volume: not supported on this system")
}

// Thaw does nothing here.
func Thaw(dir string) {}

// Sync does nothing here.
func Sync(dir string) {}

// Trim does nothing here.
func Trim(dir string) {}

// Settle returns at once here: nothing freezes.
func Settle(d time.Duration) bool { return true }
