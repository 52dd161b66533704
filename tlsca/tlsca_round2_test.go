package tlsca

import (
	"os"
	"path/filepath"
	"testing"
)

// Round 1 refuses a CA key others may read, and LoadOrCreateCA's key must
// be srt-mcp's own (readPrivate). The operator's key (LoadCAFiles) is only
// checked for its mode: a key another user owns (who may rewrite it, and
// its certificate, with a CA of their own at any time) is used. And
// LoadOrCreateCA keeps its key in a directory it does not check: one that
// exists already, owned by another user or writable by everyone, is used
// (its owner may remove or replace what srt-mcp writes there).
func TestRound2CAFilesOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to another user")
	}
	const other = 65534
	t.Run("LoadCAFiles key owned by another user", func(t *testing.T) {
		dir := t.TempDir()
		certPEM, keyPEM, err := NewCA()
		if err != nil {
			t.Fatal(err)
		}
		cert, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
		os.WriteFile(cert, certPEM, 0o644)
		os.WriteFile(key, keyPEM, 0o600)
		for _, p := range []string{cert, key} {
			if err := os.Chown(p, other, other); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := LoadCAFiles(cert, key); err == nil {
			t.Errorf("a CA key owned by uid %d (who may replace it and its certificate) was used", other)
		}
	})
	t.Run("LoadOrCreateCA in another user's directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "egress-ca")
		if err := os.Mkdir(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o777)
		if err := os.Chown(dir, other, other); err != nil {
			t.Fatal(err)
		}
		if _, _, err := LoadOrCreateCA(dir); err == nil {
			t.Errorf("the CA was made and kept in a directory owned by uid %d and writable by everyone", other)
		}
	})
}
