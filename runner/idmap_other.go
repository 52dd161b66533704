//go:build !linux

package runner

// sandboxWritten: only Linux has idmapped mounts; elsewhere no directory
// is ever mapped for sandboxes.
func sandboxWritten(string) bool { return false }
