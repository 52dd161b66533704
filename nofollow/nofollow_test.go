//go:build unix

package nofollow

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func mk(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func realTemp(t *testing.T) string {
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestOpenRefusesLinksAtEveryComponent(t *testing.T) {
	root := realTemp(t)
	mk(t, filepath.Join(root, "real", "sub", "f"), "x")
	if err := os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", filepath.Join(root, "real", "sub", "lf")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		filepath.Join(root, "link", "sub"),       // a middle component
		filepath.Join(root, "link"),              // the last one
		filepath.Join(root, "real", "sub", "lf"), // a file link
		root + "/real/../real",                   // not clean
		"relative/path",                          // not absolute
	} {
		if d, err := OpenDir(p); err == nil {
			d.Close()
			t.Errorf("OpenDir(%s) followed a link or accepted a bad path", p)
		}
		if f, err := Open(p, syscall.O_RDONLY); err == nil {
			f.Close()
			t.Errorf("Open(%s) followed a link or accepted a bad path", p)
		}
	}
	if _, err := OpenDir(filepath.Join(root, "link", "sub")); !errors.Is(err, ErrSymlink) {
		t.Errorf("a link component should be ErrSymlink, got %v", err)
	}
	d, err := OpenDir(filepath.Join(root, "real"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Walk("sub/lf"); err == nil {
		t.Error("Walk entered a link")
	}
	if _, err := d.OpenFile("lf", syscall.O_RDONLY, 0); err == nil {
		t.Error("OpenFile accepted a multi-component name")
	}
	sub, err := d.Walk("sub")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := sub.OpenFile("lf", syscall.O_RDONLY, 0); err == nil {
		t.Error("OpenFile followed a file link")
	}
	if b, err := sub.ReadFile("f", 10); err != nil || string(b) != "x" {
		t.Fatalf("ReadFile: %q %v", b, err)
	}
	mk(t, filepath.Join(root, "real", "sub", "big"), strings.Repeat("y", 100))
	if _, err := sub.ReadFile("big", 10); err == nil {
		t.Error("ReadFile ignored its bound")
	}
	if err := syscall.Mkfifo(filepath.Join(root, "real", "sub", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.ReadFile("fifo", 10); err == nil {
		t.Error("ReadFile read a FIFO")
	}
}

func TestRemoveAllNeverFollows(t *testing.T) {
	root := realTemp(t)
	victim := filepath.Join(root, "victim")
	mk(t, filepath.Join(victim, "keep"), "precious")
	tree := filepath.Join(root, "tree")
	mk(t, filepath.Join(tree, "a", "f"), "x")
	for _, l := range []string{filepath.Join(tree, "dirlink"), filepath.Join(tree, "a", "deeplink")} {
		if err := os.Symlink(victim, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemoveAll(tree); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(tree); !os.IsNotExist(err) {
		t.Fatalf("tree still there: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(victim, "keep")); err != nil || string(b) != "precious" {
		t.Fatalf("the link's target was touched: %q %v", b, err)
	}
	// A tree whose root is itself a link: the link goes, the target stays.
	if err := os.Symlink(victim, tree); err != nil {
		t.Fatal(err)
	}
	if err := RemoveAll(tree); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(victim, "keep")); err != nil {
		t.Fatal("removing a link removed its target's content")
	}
}

// A tree far deeper than the descriptors RemoveAll may hold, with a file
// at every level, removed under a low RLIMIT_NOFILE.
func TestRemoveAllDeepTreeBoundedDescriptors(t *testing.T) {
	root := realTemp(t)
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	const depth = 3000
	cur, err := d.Walk(".")
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.Mkdir("deep", 0o755); err != nil {
		t.Fatal(err)
	}
	next, _ := cur.Sub("deep")
	cur.Close()
	cur = next
	for i := 0; i < depth; i++ {
		f, err := cur.OpenFile("f", syscall.O_CREAT|syscall.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := cur.Mkdir("d", 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := cur.Sub("d")
		cur.Close()
		if err != nil {
			t.Fatal(err)
		}
		cur = next
	}
	cur.Close()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = 128
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	err = d.RemoveAll("deep")
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(root)
	if len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}

func TestReadDirTypes(t *testing.T) {
	root := realTemp(t)
	mk(t, filepath.Join(root, "f"), "x")
	os.Mkdir(filepath.Join(root, "d"), 0o755)
	os.Symlink("/etc", filepath.Join(root, "l"))
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got := map[string]string{}
	if err := d.ReadDir(func(e Entry) error {
		switch {
		case e.IsDir():
			got[e.Name] = "dir"
		case e.Type == os.ModeSymlink:
			got[e.Name] = "link"
		case e.Type == 0:
			got[e.Name] = "file"
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got["f"] != "file" || got["d"] != "dir" || got["l"] != "link" || len(got) != 3 {
		t.Fatalf("entries: %v", got)
	}
}

// WalkTree sees every entry of a tree far deeper than the descriptors it
// holds, never enters a link, and stops at its limit.
func TestWalkTree(t *testing.T) {
	root := t.TempDir()
	p := root
	for i := 0; i < 300; i++ {
		p = filepath.Join(p, "d")
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "f"), []byte("12345"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(root, "side"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "side", "g"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(root, "side", "etc")); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fdsBefore := openFDs(t)
	files, dirs, links, size := 0, 0, 0, int64(0)
	maxFDs := 0
	err = WalkTree(d, 0, func(rel string, st Stat) error {
		switch {
		case st.Mode&fs.ModeSymlink != 0:
			links++
		case st.IsDir():
			dirs++
		default:
			files++
			size += st.Size
		}
		if strings.HasPrefix(rel, "side/etc/") {
			t.Errorf("walked into a link: %s", rel)
		}
		if n := openFDs(t); n > maxFDs {
			maxFDs = n
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files != 301 || dirs != 301 || links != 1 || size != 300*5+1 {
		t.Fatalf("files %d dirs %d links %d size %d", files, dirs, links, size)
	}
	if maxFDs-fdsBefore > walkHeld+4 {
		t.Fatalf("a 300-deep walk held %d descriptors", maxFDs-fdsBefore)
	}
	if n := openFDs(t); n != fdsBefore {
		t.Fatalf("descriptors left open: %d -> %d", fdsBefore, n)
	}
	if err := WalkTree(d, 100, func(string, Stat) error { return nil }); !errors.Is(err, ErrTooMany) {
		t.Fatalf("limit: %v", err)
	}
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}
