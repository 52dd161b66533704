//go:build unix && !linux

package nofollow

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// openNoSymlinks walks path one component at a time with O_NOFOLLOW.
func openNoSymlinks(path string, flags int) (int, error) {
	return openComponents(path, flags)
}

// readEntries reads names in batches and asks each entry's type with
// fstatat (never by path).
func readEntries(d *Dir, fn func(Entry) error) error {
	dup, err := unix.Dup(d.fd)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(dup), "")
	defer f.Close()
	for {
		names, err := f.Readdirnames(256)
		for _, name := range names {
			st, serr := d.Lstat(name)
			if errors.Is(serr, fs.ErrNotExist) {
				continue
			}
			if serr != nil {
				return serr
			}
			if err := fn(Entry{Name: name, Type: st.Mode.Type()}); err != nil {
				return err
			}
		}
		if err != nil || len(names) == 0 {
			return nil
		}
	}
}
