// Package opfile reads the operator's own files (API keys, settings) and
// checks the operator's own directories (the state directory), refusing
// what someone else could have written: a file must be a regular file that
// belongs to root or to this process's user and that neither its group
// nor others may write, and so must every directory above it be, unless
// it is sticky (/tmp: no one renames what another owns in it). Whoever can
// edit such a file, or swap it for another through its directory, could
// add a key or widen the ceiling (a server reloads its settings by
// itself), plant the secret download links are signed with, or code every
// session runs. The file's own checks are made on the opened file.
package opfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// ReadServerFile is Read for a file a server trusts and reads again while
// it runs (its settings, its API keys, its signing secret): every
// directory above it must be the operator's too (checkAncestors), or
// whoever controls one could swap the file for another.
func ReadServerFile(path string, max int64) ([]byte, error) {
	if err := checkAncestors(path); err != nil {
		return nil, err
	}
	return Read(path, max)
}

// Read returns the content of the file at path, at most max bytes.
func Read(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
			return nil, fmt.Errorf("%s belongs to uid %d, not to root or this server's user (uid %d)", path, st.Uid, os.Geteuid())
		}
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("%s may be written by others (mode %v): chmod go-w %s", path, fi.Mode().Perm(), path)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return data, nil
}

// CheckDir refuses a directory of the operator's that someone else could
// change: it must belong to root or this process's user, neither its group
// nor others may write it, and every directory above it passes
// checkAncestors.
func CheckDir(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", abs)
	}
	if err := owned(abs, fi); err != nil {
		return err
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s may be written by others (mode %v): chmod go-w %s, or use a directory of the server's own", abs, fi.Mode().Perm(), abs)
	}
	return checkAncestors(abs)
}

// checkAncestors refuses a path under a directory someone else could
// change: each directory above it must belong to root or this process's
// user and, if its group or others may write it, be sticky.
func checkAncestors(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if err := owned(d, fi); err != nil {
			return fmt.Errorf("%s is under a directory someone else controls: %v", path, err)
		}
		if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
			return fmt.Errorf("%s is under %s, which others may write (mode %v) and is not sticky: they could swap what is in it", path, d, fi.Mode().Perm())
		}
		if d == "/" {
			return nil
		}
	}
}

// owned refuses what belongs to neither root nor this process's user.
func owned(path string, fi os.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to root or this server's user (uid %d)", path, st.Uid, os.Geteuid())
	}
	return nil
}
