//go:build unix

package nofollow

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// ErrTooMany is returned (wrapped) by WalkTree when the tree has more
// entries than its limit.
var ErrTooMany = errors.New("too many entries")

// ErrMoved is returned (wrapped) by WalkTree when a directory was moved
// while it was walked (its ".." is no longer the directory it was found
// in): the walk stops rather than wander.
var ErrMoved = errors.New("a directory was moved during the walk")

// walkHeld bounds the directories WalkTree holds open: past it, a
// directory's descriptor is closed while its subdirectories are walked and
// reopened through ".." (and checked) afterwards.
const walkHeld = 32

type walkFrame struct {
	dir     *Dir // nil while closed (deep in the walk)
	rel     string
	dev     uint64
	ino     uint64
	subdirs []string // still to walk
}

// WalkTree calls fn for every entry below root, depth first, with its
// path relative to root ("a/b.txt") and its Lstat. It never follows a
// link (a link is reported, never entered), reads each directory once,
// holds at most walkHeld descriptors whatever the depth, and stops with
// ErrTooMany once it has seen more than limit entries (0: no limit). fn
// returning fs.SkipDir for a directory does not enter it.
func WalkTree(root *Dir, limit int, fn func(rel string, st Stat) error) error {
	return WalkTreeAt(root, limit, func(_ *Dir, _ string, rel string, st Stat) error { return fn(rel, st) })
}

// WalkTreeAt is WalkTree whose fn is also given the open directory an entry
// is in and its name there, for a further look at that very entry
// (Dir.HasXattr) without a path that could lead elsewhere.
func WalkTreeAt(root *Dir, limit int, fn func(dir *Dir, name, rel string, st Stat) error) error {
	st, err := root.Stat()
	if err != nil {
		return err
	}
	dup, err := unix.FcntlInt(uintptr(root.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return err
	}
	stack := []*walkFrame{{dir: &Dir{fd: dup, name: root.name}, dev: st.Dev, ino: st.Ino}}
	defer func() {
		for _, f := range stack {
			f.dir.Close()
		}
	}()
	seen := 0
	// read lists a frame's entries (its directory is open).
	read := func(f *walkFrame) error {
		return f.dir.ReadDir(func(e Entry) error {
			seen++
			if limit > 0 && seen > limit {
				return fmt.Errorf("%s: more than %d entries: %w", root.name, limit, ErrTooMany)
			}
			est, err := f.dir.Lstat(e.Name)
			if err != nil {
				return nil // gone meanwhile
			}
			rel := e.Name
			if f.rel != "" {
				rel = f.rel + "/" + e.Name
			}
			err = fn(f.dir, e.Name, rel, est)
			if errors.Is(err, fs.SkipDir) {
				return nil
			}
			if err != nil {
				return err
			}
			if est.IsDir() {
				f.subdirs = append(f.subdirs, e.Name)
			}
			return nil
		})
	}
	if err := read(stack[0]); err != nil {
		return err
	}
	for len(stack) > 0 {
		top := stack[len(stack)-1] // always open
		if len(top.subdirs) == 0 {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].dir == nil {
				// Back from deep: the parent is reopened through "..", and
				// must be the directory that was walked.
				parent := stack[len(stack)-1]
				fd, err := openatRetry(top.dir.fd, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				top.dir.Close()
				if err != nil {
					return wrap("open", parent.rel+"/..", err)
				}
				parent.dir = &Dir{fd: fd, name: root.child(parent.rel)}
				pst, err := parent.dir.Stat()
				if err != nil || pst.Dev != parent.dev || pst.Ino != parent.ino {
					return fmt.Errorf("%s: %w", root.child(parent.rel), ErrMoved)
				}
				continue
			}
			top.dir.Close()
			continue
		}
		name := top.subdirs[len(top.subdirs)-1]
		top.subdirs = top.subdirs[:len(top.subdirs)-1]
		sub, err := top.dir.Sub(name)
		if err != nil {
			continue // gone, or swapped for a link: nothing to enter
		}
		sst, err := sub.Stat()
		if err != nil {
			sub.Close()
			continue
		}
		rel := name
		if top.rel != "" {
			rel = top.rel + "/" + name
		}
		f := &walkFrame{dir: sub, rel: rel, dev: sst.Dev, ino: sst.Ino}
		stack = append(stack, f)
		if err := read(f); err != nil {
			return err
		}
		// Keep the deepest walkHeld directories open.
		if len(stack) > walkHeld {
			if old := stack[len(stack)-1-walkHeld]; old.dir != nil {
				old.dir.Close()
				old.dir = nil
			}
		}
	}
	return nil
}
