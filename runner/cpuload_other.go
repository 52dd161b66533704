//go:build !linux

package runner

// cpuTimes: only Linux pre-starts sandboxes.
func cpuTimes() (idle, total uint64, ok bool) { return 0, 0, false }
