package tlsca

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadOrCreateCAKeepsItPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	cert, key, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, CAKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v %v", fi.Mode(), err)
	}
	cert2, key2, err := LoadOrCreateCA(dir)
	if err != nil || string(cert2) != string(cert) || string(key2) != string(key) {
		t.Fatal("a second load must return the same CA")
	}
	ca, err := ParseCA(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Leaf("api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM())
	lc, _ := x509.ParseCertificate(leaf.Certificate[0])
	if _, err := lc.Verify(x509.VerifyOptions{Roots: pool, DNSName: "api.example.com"}); err != nil {
		t.Fatalf("the leaf does not verify: %v", err)
	}
	if again, _ := ca.Leaf("api.example.com"); again != leaf || ca.Leaves() != 1 {
		t.Error("a leaf is minted once per name")
	}
	// A key others may read is refused, not used.
	os.Chmod(filepath.Join(dir, CAKeyFile), 0o644)
	if _, _, err := LoadOrCreateCA(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a readable key: %v", err)
	}
	// A key replaced by a link is refused.
	os.Remove(filepath.Join(dir, CAKeyFile))
	os.Symlink("/etc/passwd", filepath.Join(dir, CAKeyFile))
	if _, _, err := LoadOrCreateCA(dir); err == nil {
		t.Fatal("a symlinked key was followed")
	}
}

func TestCertificatesOnlyDropsKeys(t *testing.T) {
	cert, key, _ := NewCA()
	combined := append(append([]byte{}, key...), cert...)
	out := CertificatesOnly(combined)
	if strings.Contains(string(out), "PRIVATE KEY") || !strings.Contains(string(out), "CERTIFICATE") {
		t.Fatalf("%s", out)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "combined.pem")
	os.WriteFile(p, combined, 0o600)
	b := TrustBundle(cert, []string{p, filepath.Join(dir, "missing.pem")})
	if strings.Contains(string(b), "PRIVATE KEY") {
		t.Fatal("a key reached the bundle")
	}
	blocks := 0
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		blocks++
	}
	if blocks < 2 {
		t.Fatalf("the CA and the extra certificate: %d blocks", blocks)
	}
}

func TestWriteBundlePrunesUnused(t *testing.T) {
	dir := t.TempDir()
	old, _ := WriteBundle(dir, []byte("old"))
	past := time.Now().Add(-2 * bundleKeep)
	os.Chtimes(old, past, past)
	cur, _ := WriteBundle(dir, []byte("new"))
	if _, err := os.Stat(old); err == nil {
		t.Error("an unused bundle stayed")
	}
	os.Chtimes(cur, past, past)
	again, _ := WriteBundle(dir, []byte("new"))
	if fi, err := os.Stat(again); err != nil || again != cur || time.Since(fi.ModTime()) > time.Minute {
		t.Error("a bundle in use is touched, not pruned")
	}
}
