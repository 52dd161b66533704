// Package opfile reads the operator's own files (API keys, settings) and
// refuses one that someone else could have written: it must be a regular
// file that belongs to root or to this process's user and that neither its
// group nor others may write. Whoever can edit such a file could add a key
// or widen the ceiling, and a server reloads its settings by itself. The
// checks are made on the opened file, not on its name.
package opfile

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

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
