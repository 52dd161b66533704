package sessions

// What a session holds on disk, as the quota of a directory workspace
// counts it (a workspace with a filesystem of its own is bounded by its
// filesystem instead): every entry of the workspace and of the session's
// cache directory (the sandbox's ~/.cache, which holds its installed
// packages too), by the blocks it takes.

import (
	"errors"
	"io/fs"
	"maps"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/srt-mcp/srt-mcp/nofollow"
)

// MaxFiles bounds the entries (files, directories, links) a workspace and
// its cache may hold together: a walk past it stops, and the workspace
// quota counts it as exceeded.
const MaxFiles = 100_000

// Usage is what a session's workspace and cache hold.
type Usage struct {
	Bytes   int64 // what their entries take on disk (Charge)
	Entries int   // files, directories and links
	// Over says the walk stopped at MaxFiles (Bytes and Entries are then
	// lower bounds).
	Over bool
	// Held is what the session's processes hold open unlinked (counted in
	// Bytes; a directory workspace's only: HeldUnlinked).
	Held int64
}

// Charge is what one entry counts against the quota: the blocks the
// filesystem gave it (st_blocks, preallocated ones past its size
// included), and for a regular file at least its size (a sparse file
// counts whole: it may be filled in without a new entry). Directories and
// links count their blocks too: 45,000 empty directories take 176 MiB
// on ext4 and a size of 0.
func Charge(st nofollow.Stat) int64 {
	b := st.Blocks * 512
	if st.Mode.IsRegular() && st.Size > b {
		return st.Size
	}
	return b
}

// CacheName is how a cache entry is named to a user: as the sandbox's
// home sees it.
const CacheName = "~/.cache"

// walkTree calls fn for every entry below dir (the session's workspace or
// cache, which the server made), never following a link, whatever the
// depth, up to limit entries (over: the walk stopped there). A cache that
// is not there holds nothing.
func (ss *Session) walkTree(dir string, cache bool, limit int, fn func(rel string, st nofollow.Stat)) (over bool, err error) {
	if cache && dir == "" {
		return false, nil
	}
	root, err := nofollow.OpenTrusted(dir)
	if err != nil {
		if cache && errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, sessErr("session_not_found", "Session %s has no workspace (closed?)", ss.ID)
	}
	defer root.Close()
	err = nofollow.WalkTree(root, limit, func(rel string, st nofollow.Stat) error {
		fn(rel, st)
		return nil
	})
	if errors.Is(err, nofollow.ErrTooMany) {
		return true, nil
	}
	if err != nil {
		// A reply may carry it: the walk's error names no host path.
		ss.mu.Lock()
		closed := ss.closed
		ss.mu.Unlock()
		if closed {
			return false, sessErr("session_not_found", "Session %s was closed while its workspace was being read", ss.ID)
		}
		where := WorkspaceMount
		if cache {
			where = CacheName
		}
		return false, sessErr("internal_error", "reading %s: %s", where, hostless(err))
	}
	return false, nil
}

// walk calls fn for every entry of the workspace, never following a link,
// whatever the depth, up to MaxFiles entries.
func (ss *Session) walk(fn func(rel string, st nofollow.Stat)) (bool, error) {
	return ss.walkTree(ss.Workspace, false, MaxFiles, fn)
}

// walkAll calls fn for every entry of the workspace, then of the cache,
// up to MaxFiles entries in all.
func (ss *Session) walkAll(fn func(cache bool, rel string, st nofollow.Stat)) (bool, error) {
	n := 0
	over, err := ss.walkTree(ss.Workspace, false, MaxFiles, func(rel string, st nofollow.Stat) {
		n++
		fn(false, rel, st)
	})
	if over || err != nil {
		return over, err
	}
	if n >= MaxFiles {
		return true, nil
	}
	return ss.walkTree(ss.Cache, true, MaxFiles-n, func(rel string, st nofollow.Stat) {
		if rel == "site-packages" && st.Mode.IsDir() {
			return // the server made it (install_package's target): neither the caller's bytes nor its to remove
		}
		fn(true, rel, st)
	})
}

// Usage walks the workspace and the cache and totals what they hold; for
// a directory workspace, with what its processes hold open unlinked.
func (ss *Session) Usage() (Usage, error) {
	var u Usage
	over, err := ss.walkAll(func(_ bool, _ string, st nofollow.Stat) {
		u.Entries++
		u.Bytes += Charge(st)
	})
	u.Over = over
	if err == nil {
		u.Held = ss.HeldUnlinked()
		u.Bytes += u.Held
	}
	return u, err
}

// HeldUnlinked is what the session's processes hold open in its
// directory workspace and cache with no name left (0 for a workspace with
// a filesystem of its own, which bounds them).
func (ss *Session) HeldUnlinked() int64 {
	if ss.volume {
		return 0
	}
	return ss.heldUnlinked()
}

// Scan lists the workspace and totals what it holds (the cache not
// included), in one walk.
func (ss *Session) Scan() (Listing, Usage) {
	sv := ss.Survey(false)
	return sv.Files, sv.Usage
}

// Survey is what a session held at one moment: its workspace's regular
// files by path (a run's artifacts are those new or changed since), its
// usage, and, for a survey of the cache too, every other entry (the
// workspace's directories and links, everything in the cache) by inode:
// what a run made is what was not there (Trim).
type Survey struct {
	Files Listing
	Usage Usage
	known map[fileID]int64 // by inode: a regular file's size then, or knownDir, knownOther
	kept  map[string]bool  // workspace paths the server wrote meanwhile (Keep)
}

// Keep returns sv with the workspace files at paths (/mnt/data/...) taken
// as there before and never changed by the run, whatever they hold now:
// files the server itself wrote while a run went on (an upload).
func (sv Survey) Keep(paths ...string) Survey {
	sv.kept = maps.Clone(sv.kept)
	if sv.kept == nil {
		sv.kept = map[string]bool{}
	}
	for _, p := range paths {
		sv.kept[p] = true
	}
	return sv
}

type fileID struct{ dev, ino uint64 }

// What Survey.known holds for an entry that is not a regular file.
const (
	knownDir   = -1
	knownOther = -2 // a link, a FIFO, ...
)

// knownAs is what Survey.known records of an entry: its size for a
// regular file, else its kind.
func knownAs(st nofollow.Stat) int64 {
	switch {
	case st.Mode.IsRegular():
		return st.Size
	case st.IsDir():
		return knownDir
	}
	return knownOther
}

// Survey walks the workspace, and the cache too if asked (a quota
// counts it: Usage, Trim), once.
func (ss *Session) Survey(cache bool) Survey {
	sv := Survey{Files: Listing{}}
	walk := ss.walkAll
	if cache {
		sv.known = map[fileID]int64{}
	} else {
		walk = func(fn func(cache bool, rel string, st nofollow.Stat)) (bool, error) {
			return ss.walk(func(rel string, st nofollow.Stat) { fn(false, rel, st) })
		}
	}
	known := cache
	over, _ := walk(func(cache bool, rel string, st nofollow.Stat) {
		sv.Usage.Entries++
		sv.Usage.Bytes += Charge(st)
		// Every entry's inode, listed files' too: a file the user had that
		// a run moves is still the user's, never taken for the run's.
		if known {
			sv.known[fileID{st.Dev, st.Ino}] = knownAs(st)
		}
		if !cache {
			if f := listed(rel, st); f != nil {
				sv.Files[f.Path] = *f
			}
		}
	})
	sv.Usage.Over = over
	if cache {
		sv.Usage.Held = ss.HeldUnlinked()
		sv.Usage.Bytes += sv.Usage.Held
	}
	return sv
}

// Removed is one entry Trim took back.
type Removed struct {
	// Name is the entry as its tree names it: a workspace file's path
	// below /mnt/data, or ~/.cache/... (raw: the sandbox chose it).
	Name  string
	Bytes int64
	// Cut says the entry is a file that was there before the run and grew:
	// it was cut back to its size then (CutTo), not removed.
	Cut   bool
	CutTo int64
}

// made is an entry a run made.
type made struct {
	cache bool
	rel   string
	id    fileID
	dir   bool
	bytes int64
	// before is a grown file's size before the run (for a cut); -1 for
	// an entry the run made.
	before int64
}

// Trim takes back what the session gained since base until it holds at
// most quota bytes and fewer than MaxFiles entries: the workspace's files
// that were not there (by path: a file the run only changed stays), any
// other entry of the workspace or the cache that was not (by inode),
// largest first; then the directories among them that are empty by then,
// deepest first. Nothing that was there before is removed. It returns
// what it removed and what the session holds afterwards. The caller
// holds the session, and nothing runs in it.
func (ss *Session) Trim(base Survey, quota int64) ([]Removed, Usage, error) {
	var cands, grown []made
	cutting := map[fileID]bool{}
	var u Usage
	over, err := ss.walkAll(func(cache bool, rel string, st nofollow.Stat) {
		u.Entries++
		c := Charge(st)
		u.Bytes += c
		id := fileID{st.Dev, st.Ino}
		// A file there before that the run grew: cut back to its size
		// then if what the run made does not free enough.
		grew := func(before int64) {
			if st.Mode.IsRegular() && before >= 0 && c > before && !cutting[id] {
				cutting[id] = true // one file by two names is cut once
				grown = append(grown, made{cache: cache, rel: rel, id: id, bytes: c - before, before: before})
			}
		}
		// A file that was there is judged by what it held then, whatever
		// its name now: a name the run gave it (a hard link at the path
		// of a small file) does not make it the run's to cut. An inode
		// number is the same entry only as the same kind: a filesystem
		// hands a removed link's number to the next new file.
		before, ok := base.known[id]
		if ok && (before >= 0 && st.Mode.IsRegular() || before < 0 && before == knownAs(st)) {
			grew(before)
			return
		}
		if !cache && st.Mode.IsRegular() {
			p := WorkspaceMount + "/" + rel
			if base.kept[p] {
				return
			}
			if f, ok := base.Files[p]; ok {
				grew(f.Size) // a new file at a name that was there: the run's, kept at that size
				return
			}
		}
		if base.known == nil && (cache || !st.Mode.IsRegular()) {
			return // there before (a survey without the cache: only workspace files are compared)
		}
		cands = append(cands, made{cache: cache, rel: rel, id: id, dir: st.IsDir(), bytes: c, before: -1})
	})
	if err != nil {
		return nil, u, err
	}
	u.Over = over
	fits := func() bool { return u.Bytes <= quota && u.Entries < MaxFiles && !u.Over }
	var removed []Removed
	take := func(m made) {
		if ss.removeMade(m) != nil {
			return
		}
		u.Bytes -= m.bytes
		u.Entries--
		u.Over = false
		name := m.rel
		if m.cache {
			name = CacheName + "/" + m.rel
		}
		removed = append(removed, Removed{Name: name, Bytes: m.bytes})
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].bytes > cands[j].bytes })
	for _, m := range cands {
		if fits() {
			break
		}
		if !m.dir {
			take(m)
		}
	}
	// Directories, deepest first: each is empty by the time its parent's
	// turn comes if all it held was the run's.
	sort.SliceStable(cands, func(i, j int) bool {
		return strings.Count(cands[i].rel, "/") > strings.Count(cands[j].rel, "/")
	})
	for _, m := range cands {
		if fits() {
			break
		}
		if m.dir {
			take(m)
		}
	}
	// Then what the run added to files that were there, most first: the
	// file stays, at its size before the run (what it held then may have
	// been rewritten; the bytes past it were the run's).
	sort.SliceStable(grown, func(i, j int) bool { return grown[i].bytes > grown[j].bytes })
	for _, m := range grown {
		if fits() {
			break
		}
		if ss.cutMade(m) != nil {
			continue
		}
		u.Bytes -= m.bytes
		name := m.rel
		if m.cache {
			name = CacheName + "/" + m.rel
		}
		removed = append(removed, Removed{Name: name, Bytes: m.bytes, Cut: true, CutTo: m.before})
	}
	if after, err := ss.Usage(); err == nil {
		u = after
	}
	return removed, u, nil
}

// cutMade cuts the grown file Trim chose back to its size before the run,
// if it is still that very file (opened without following a link).
func (ss *Session) cutMade(m made) error {
	d, base, err := ss.madeDir(m)
	if err != nil {
		return err
	}
	defer d.Close()
	f, err := d.OpenFile(base, unix.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if (fileID{uint64(st.Dev), st.Ino}) != m.id || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fs.ErrNotExist
	}
	return f.Truncate(m.before)
}

// madeDir opens the directory an entry Trim chose is in (never through a
// link), and gives its name there.
func (ss *Session) madeDir(m made) (*nofollow.Dir, string, error) {
	top := ss.Workspace
	if m.cache {
		top = ss.Cache
	}
	root, err := nofollow.OpenTrusted(top)
	if err != nil {
		return nil, "", err
	}
	defer root.Close()
	dir, base := path.Split(m.rel)
	d, err := root.Walk(dir)
	if err != nil {
		return nil, "", err
	}
	return d, base, nil
}

// removeMade removes one entry Trim chose, if it is still that very entry
// (a directory only if it is empty).
func (ss *Session) removeMade(m made) error {
	d, base, err := ss.madeDir(m)
	if err != nil {
		return err
	}
	defer d.Close()
	st, err := d.Lstat(base)
	if err != nil {
		return err
	}
	if (fileID{st.Dev, st.Ino}) != m.id || st.IsDir() != m.dir {
		return fs.ErrNotExist
	}
	return d.Remove(base)
}
