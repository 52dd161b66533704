//go:build !linux

package sessions

import (
	"os"
	"syscall"
)

const noFollow = syscall.O_NOFOLLOW

var (
	errNoSpace error = syscall.ENOSPC
	errQuota   error = syscall.EDQUOT
)

// nextData: the whole file is data here.
func nextData(f *os.File, off, size int64) (data, hole int64, err error) { return off, size, nil }

// bootID is "" here: no workspace is ever mounted.
func bootID() string { return "" }

// loopBacked reports false: there are no loop devices here.
func loopBacked(image string) bool { return false }
