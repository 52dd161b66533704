package apikeys

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseAndCheck(t *testing.T) {
	sum := sha256.Sum256([]byte("hashed-token-0123456789"))
	k, err := Parse(strings.NewReader("# keys\nalice alice-token-0123456789\n\nci sha256:" + hex.EncodeToString(sum[:]) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := k.Check("alice-token-0123456789"); !ok || p != "key:alice" {
		t.Errorf("alice: %q %v", p, ok)
	}
	if p, ok := k.Check("hashed-token-0123456789"); !ok || p != "key:ci" {
		t.Errorf("ci: %q %v", p, ok)
	}
	for _, bad := range []string{"", "alice", "alice-token-012345678", "sha256:" + hex.EncodeToString(sum[:])} {
		if p, ok := k.Check(bad); ok {
			t.Errorf("%q accepted as %s", bad, p)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for in, want := range map[string]string{
		"":                            "no keys",
		"alice":                       "line 1: want NAME TOKEN",
		"alice short":                 "shorter than 16",
		"a b c":                       "line 1: want NAME TOKEN",
		"al/ice 0123456789abcdef0123": "key name",
		"a 0123456789abcdef0\na 123456789abcdef01": "appears twice",
		"a 0123456789abcdef0\nb 0123456789abcdef0": `same token as "a"`,
		"a sha256:xyz": "64 hex digits",
	} {
		if _, err := Parse(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want %q, got %v", in, want, err)
		}
	}
}

func TestLoadRefusesAFileOthersMayWrite(t *testing.T) {
	p := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(p, []byte("a 0123456789abcdef0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "chmod go-w") {
		t.Errorf("a world-writable key file: %v", err)
	}
}
