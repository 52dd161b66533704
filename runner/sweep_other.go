//go:build !linux

package runner

import "time"

// timestampSlack: filesystems elsewhere may keep coarse times; assume the
// coarsest common one (two seconds).
func timestampSlack(fd int) time.Duration { return 2 * time.Second }
