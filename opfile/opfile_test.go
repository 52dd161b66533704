package opfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadAndCheckDir(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "settings.json")
	if err := os.WriteFile(f, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(f, 100); err != nil || string(b) != "{}" {
		t.Fatalf("a file of the server's own: %q %v", b, err)
	}
	if err := CheckDir(dir); err != nil {
		t.Fatalf("a directory of the server's own: %v", err)
	}
	// A directory others may write, not sticky: refused, and so is what is
	// under it (they could rename another file over it).
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	g := filepath.Join(open, "keys")
	if err := os.WriteFile(g, []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadServerFile(g, 100); err == nil || !strings.Contains(err.Error(), "not sticky") {
		t.Fatalf("a server's file under a directory others may write: %v", err)
	}
	if _, err := Read(g, 100); err != nil {
		t.Fatalf("a file a command reads once (srt-mcp exec --settings) is checked itself only: %v", err)
	}
	if err := CheckDir(open); err == nil || !strings.Contains(err.Error(), "written by others") {
		t.Fatalf("a directory others may write: %v", err)
	}
	if err := CheckDir(filepath.Join(open)); err == nil {
		t.Fatal("CheckDir accepted a world-writable directory")
	}
	// Sticky (like /tmp): what is under it stays its owner's.
	if err := os.Chmod(open, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadServerFile(g, 100); err != nil {
		t.Fatalf("a file under a sticky directory: %v", err)
	}
	// The file itself: others may write it.
	if err := os.Chmod(f, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(f, 100); err == nil {
		t.Fatal("a file others may write was read")
	}
	if err := CheckDir(f); err == nil {
		t.Fatal("CheckDir accepted a file")
	}
}
