package integration

// Attack round 2 on the egress fixes, from a real sandbox.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A masked credential file named through a symlinked directory (a dotfile
// manager's ~/.config -> ~/dotfiles/config): round 1's check that no
// writable root holds it compares the spelled path with canonical roots,
// and the stand-in is bound at the spelled path. The file, seen where it
// really is, is the sandbox's to read, move and replace.
func TestHostileEgressRound2MaskedFileThroughSymlink(t *testing.T) {
	parallel(t)
	const real = "REAL-NPM-TOKEN-0123456789"
	w := sbDir(t)
	write(t, filepath.Join(w, "cfg", "token"), real)
	handOver(t, filepath.Join(w, "cfg"))
	if err := os.Chmod(filepath.Join(w, "cfg", "token"), 0o600); err != nil {
		t.Fatal(err)
	}
	links := t.TempDir()
	if err := os.Symlink(filepath.Join(w, "cfg"), filepath.Join(links, "config")); err != nil {
		t.Fatal(err)
	}
	settings := egMaskedFileSettings(t, t.TempDir(), filepath.Join(links, "config", "token"))

	t.Run("read", func(t *testing.T) {
		flags := append(pinned("api.example.com"), "--allow-domain", "api.example.com:1", "--settings", settings)
		r := sh(t, w, flags, `cat cfg/token`)
		if strings.Contains(r.stdout, real) {
			t.Fatalf("the masked file's real value is readable where the file really is: %q", r.stdout)
		}
	})
	t.Run("write", func(t *testing.T) {
		flags := append(pinned("api.example.com"), "--allow-domain", "api.example.com:1", "--allow-write", ".", "--settings", settings)
		r := sh(t, w, flags, `mv cfg/token cfg/token.moved && echo decoy-decoy-decoy-decoy > cfg/token && echo moved`)
		if strings.Contains(r.stdout, "moved") {
			t.Fatalf("a run that may write the masked file (named through a symlink) ran and replaced it: %q %q", r.stdout, r.stderr)
		}
		if b, err := os.ReadFile(filepath.Join(w, "cfg", "token")); err != nil || string(b) != real {
			t.Errorf("the masked file changed: %q %v", b, err)
		}
	})
}
