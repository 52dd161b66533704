package tlsca

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// The first runs of a new server (or of srt-mcp exec) start together:
// each finds no CA, makes one, and renames its key, then its certificate,
// into place. Interleaved, the key on disk is one run's and the
// certificate another's, and every later run's proxy fails to start
// (tls: private key does not match public key) until the operator removes
// the directory. A caller who opens many runs at once on a fresh server
// breaks TLS termination for everyone.
func TestLoadOrCreateCAConcurrentFirstUse(t *testing.T) {
	for round := 0; round < 10; round++ {
		dir := filepath.Join(t.TempDir(), "ca")
		const n = 8
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				c, k, err := LoadOrCreateCA(dir)
				if err != nil {
					t.Errorf("concurrent first use: %v", err)
					return
				}
				if _, err := ParseCA(c, k); err != nil {
					t.Errorf("a concurrent first use returned a pair that does not match: %v", err)
				}
			}(i)
		}
		wg.Wait()
		c, k, err := LoadOrCreateCA(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseCA(c, k); err != nil {
			t.Fatalf("round %d: after concurrent first use the kept key and certificate do not match: %v", round, err)
		}
	}
}

// The operator's CA (caCertPath, caKeyPath) is read as it is: a key that
// every local user may read is taken, where LoadOrCreateCA refuses one
// for the CA srt-mcp makes ("whoever reads the key can mint certificates
// every sandbox trusts").
func TestLoadCAFilesRefusesAKeyOthersMayRead(t *testing.T) {
	dir := t.TempDir()
	cert, key, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if err := os.WriteFile(certPath, cert, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, key, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(keyPath, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadCAFiles(certPath, keyPath); err == nil {
		t.Error("a world-readable caKeyPath was accepted")
	}
}
