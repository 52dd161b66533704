//go:build !linux

package profiles

import "syscall"

// dieWithParent: no parent-death signal here; the probe's timeout bounds
// it while the server lives.
func dieWithParent() *syscall.SysProcAttr { return nil }
