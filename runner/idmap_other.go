//go:build !linux

package runner

import "errors"

// sandboxWritten: only Linux has idmapped mounts; elsewhere no directory
// is ever mapped for sandboxes.
func sandboxWritten(string) bool { return false }

// IdmapProbe: idmapped mounts are Linux's.
func IdmapProbe(string) error { return errors.New("idmapped mounts exist only on Linux") }
