//go:build embedserver && !linux

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// execSealed executes program from a file in a directory private to this
// user (created 0700 under the user's cache directory, never a shared
// /tmp), verified by owner, mode and content hash before it is run.
func execSealed(name string, program []byte, argv, env []string) error {
	cache, err := os.UserCacheDir()
	if err != nil {
		return err
	}
	dir := filepath.Join(cache, "srt-mcp")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is not a private directory of uid %d; remove it", dir, os.Geteuid())
	}
	sum := sha256.Sum256(program)
	path := filepath.Join(dir, name+"-"+hex.EncodeToString(sum[:8]))
	f, err := os.OpenFile(path+".tmp", os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o700)
	if err != nil {
		return err
	}
	if _, err := f.Write(program); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return err
	}
	return syscall.Exec(path, argv, env)
}

// stageEnv: the stage binary is for Linux sandboxes only.
func stageEnv() []string { return nil }
