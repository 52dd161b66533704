package server

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func writePEM(t *testing.T, typ string, der []byte) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestReadPublicKey(t *testing.T) {
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pkix := func(k any) []byte {
		der, err := x509.MarshalPKIXPublicKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	for _, tc := range []struct {
		name string
		file string
		want any
	}{
		{"Ed25519 PKIX", writePEM(t, "PUBLIC KEY", pkix(edPub)), edPub},
		{"RSA PKIX", writePEM(t, "PUBLIC KEY", pkix(&rsaKey.PublicKey)), &rsaKey.PublicKey},
		{"RSA PKCS1", writePEM(t, "RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&rsaKey.PublicKey)), &rsaKey.PublicKey},
		{"ECDSA PKIX", writePEM(t, "PUBLIC KEY", pkix(&ecKey.PublicKey)), &ecKey.PublicKey},
	} {
		got, err := ReadPublicKey(tc.file)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %T %v, want %T", tc.name, got, got, tc.want)
		}
	}

	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("not a key at all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, file, want string }{
		{"no PEM block", garbage, "no PEM block"},
		{"PEM of garbage", writePEM(t, "PUBLIC KEY", []byte("garbage")), "asn1"},
		{"a private key", writePEM(t, "PRIVATE KEY", func() []byte {
			der, err := x509.MarshalPKCS8PrivateKey(rsaKey)
			if err != nil {
				t.Fatal(err)
			}
			return der
		}()), ""},
		{"missing file", filepath.Join(dir, "absent.pem"), "no such file"},
	} {
		k, err := ReadPublicKey(tc.file)
		if err == nil {
			t.Errorf("%s: accepted as %T", tc.name, k)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.want)
		}
	}
}
