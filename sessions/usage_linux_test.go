package sessions

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Usage counts what a directory workspace takes on disk, not the sizes of
// its regular files: blocks preallocated past a file's size
// (FALLOC_FL_KEEP_SIZE), directories, the blocks of tiny files, and the
// session's cache. Before, all four counted 0 (a run kept 1.9 GiB of
// KEEP_SIZE blocks, 353 MiB of 1-byte files and empty directories, and
// 300 MiB in ~/.cache past a 64 MiB quota, never stopped).
func TestUsageCountsBlocksAndCache(t *testing.T) {
	s := newSessions(t, Config{Max: 2})
	ss, _, err := s.GetOrCreate("")
	if err != nil {
		t.Fatal(err)
	}
	base, err := ss.Usage()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(ss.Workspace, "keep.bin"))
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, 8<<20)
	f.Close()
	if err != nil {
		t.Skipf("fallocate here: %v", err)
	}
	u, _ := ss.Usage()
	if got := u.Bytes - base.Bytes; got < 8<<20 {
		t.Errorf("8 MiB preallocated with KEEP_SIZE counted %d bytes", got)
	}
	os.Remove(filepath.Join(ss.Workspace, "keep.bin"))

	base, _ = ss.Usage()
	for i := 0; i < 200; i++ {
		d := filepath.Join(ss.Workspace, fmt.Sprintf("d%d", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(d+"/one", []byte("1"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	u, _ = ss.Usage()
	if got := u.Bytes - base.Bytes; got < 200*2*1024 {
		t.Errorf("200 directories with a 1-byte file each counted %d bytes (less than 1 KiB each)", got)
	}

	base, _ = ss.Usage()
	if err := os.WriteFile(filepath.Join(ss.Cache, "blob"), make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	u, _ = ss.Usage()
	if got := u.Bytes - base.Bytes; got < 3<<20 {
		t.Errorf("3 MiB in the cache counted %d bytes", got)
	}
}

// Trim takes back what came after a survey, largest first, directories
// once empty, in the workspace and the cache, and nothing that was there.
func TestTrimTakesBackOnlyWhatCameAfter(t *testing.T) {
	s := newSessions(t, Config{Max: 2})
	ss, _, err := s.GetOrCreate("")
	if err != nil {
		t.Fatal(err)
	}
	write := func(p string, n int) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(ss.Workspace, "old", "data.csv"), 1<<20)
	write(filepath.Join(ss.Workspace, "grown.txt"), 10)
	write(filepath.Join(ss.Cache, "pkg", "old.py"), 100<<10)
	if err := os.Mkdir(filepath.Join(ss.Workspace, "empty-old"), 0o755); err != nil {
		t.Fatal(err)
	}
	base := ss.Survey(true)

	write(filepath.Join(ss.Workspace, "grown.txt"), 2<<20) // changed, not made: kept
	write(filepath.Join(ss.Workspace, "new", "big.bin"), 4<<20)
	write(filepath.Join(ss.Workspace, "new", "small.txt"), 100)
	write(filepath.Join(ss.Cache, "pkg", "blob"), 3<<20)
	for i := 0; i < 50; i++ {
		if err := os.MkdirAll(filepath.Join(ss.Workspace, "tree", fmt.Sprintf("d%d", i), "e"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Room for the old files and grown.txt only (2 MiB now, a 4 KiB
	// block before): everything made goes.
	quota := base.Usage.Bytes + 2<<20 - 4<<10
	removed, u, err := ss.Trim(base, quota)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range removed {
		names = append(names, r.Name)
	}
	t.Logf("removed %d: %.200s; now %d bytes", len(removed), strings.Join(names, " "), u.Bytes)
	if len(removed) < 3 || removed[0].Name != "new/big.bin" || removed[1].Name != CacheName+"/pkg/blob" {
		t.Errorf("want the largest first (new/big.bin, then ~/.cache/pkg/blob), got %v", names)
	}
	for _, p := range []string{"old/data.csv", "grown.txt", "empty-old"} {
		if _, err := os.Lstat(filepath.Join(ss.Workspace, p)); err != nil {
			t.Errorf("%s was there before and was removed: %v", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(ss.Cache, "pkg", "old.py")); err != nil {
		t.Errorf("the cache's old file was removed: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(ss.Workspace, "tree")); err == nil {
		t.Errorf("the empty directories made after the survey are still there (%d bytes left)", u.Bytes)
	}
	if u.Bytes > quota {
		t.Errorf("after Trim the session holds %d bytes, over the %d asked", u.Bytes, quota)
	}
}

// Past the quota with nothing new left to remove, files that were there
// and grew are cut back to their size before, largest growth first; a
// file the user had is judged by its own size then, not by the size of
// a name the run put it under (a hard link at a small file's path).
func TestTrimCutsGrownFilesBack(t *testing.T) {
	s := newSessions(t, Config{Max: 2})
	ss, _, err := s.GetOrCreate("")
	if err != nil {
		t.Fatal(err)
	}
	ws := func(p string) string { return filepath.Join(ss.Workspace, p) }
	if err := os.WriteFile(ws("big.bin"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"small.txt", "log.txt"} {
		if err := os.WriteFile(ws(n), []byte("0123456789"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := ss.Survey(true)

	f, err := os.OpenFile(ws("log.txt"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 3<<20)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Remove(ws("small.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(ws("big.bin"), ws("small.txt")); err != nil {
		t.Fatal(err)
	}
	removed, u, err := ss.Trim(base, base.Usage.Bytes+64<<10)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("removed %+v; now %d bytes", removed, u.Bytes)
	if len(removed) != 1 || !removed[0].Cut || removed[0].Name != "log.txt" || removed[0].CutTo != 10 {
		t.Errorf("want log.txt cut back to 10 bytes and nothing else, got %+v", removed)
	}
	if fi, err := os.Stat(ws("log.txt")); err != nil || fi.Size() != 10 {
		t.Errorf("log.txt: %v %v", fi, err)
	}
	if fi, err := os.Stat(ws("big.bin")); err != nil || fi.Size() != 1<<20 {
		t.Errorf("the user's big.bin, linked by the run at small.txt's path, is now %v %v", fi, err)
	}
}
