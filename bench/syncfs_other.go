//go:build !linux

package bench

import "os"

// syncFS syncs f itself (no syncfs here).
func syncFS(f *os.File) error { return f.Sync() }
