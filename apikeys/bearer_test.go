package apikeys

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPrincipalOfToken(t *testing.T) {
	if p := PrincipalOfToken(""); p != "anonymous" {
		t.Errorf("no token: %q", p)
	}
	sum := sha256.Sum256([]byte("server-token-0123456789"))
	want := "bearer:" + hex.EncodeToString(sum[:8])
	if p := PrincipalOfToken("server-token-0123456789"); p != want || len(p) != len("bearer:")+16 {
		t.Errorf("PrincipalOfToken = %q, want %q", p, want)
	}
	if PrincipalOfToken("a-different-token-0123") == want {
		t.Error("two tokens, one principal")
	}
	if strings.Contains(PrincipalOfToken("server-token-0123456789"), "server-token") {
		t.Error("the principal holds the token")
	}
}

// bearerCase runs auth on a request with the Authorization header authz
// ("" sends none) and reports the principal, whether it was let in, and
// how many times refuse ran.
func bearerCase(t *testing.T, auth func(http.ResponseWriter, *http.Request) (string, bool), refused *int, authz string) (string, bool, int) {
	t.Helper()
	before := *refused
	r := httptest.NewRequest("POST", "/mcp", nil)
	if authz != "" {
		r.Header.Set("Authorization", authz)
	}
	w := httptest.NewRecorder()
	p, ok := auth(w, r)
	if n := *refused - before; (n == 1) == ok {
		t.Errorf("%q: let in %v but refuse ran %d times", authz, ok, n)
	}
	if !ok && w.Code != http.StatusUnauthorized {
		t.Errorf("%q: refused without the route's refusal (status %d)", authz, w.Code)
	}
	return p, ok, *refused - before
}

func TestBearer(t *testing.T) {
	const token = "server-token-0123456789"
	keys, err := Parse(strings.NewReader("alice alice-token-0123456789\nboth " + token + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	refuse := func(w http.ResponseWriter) { refused++; w.WriteHeader(http.StatusUnauthorized) }

	t.Run("token only", func(t *testing.T) {
		auth := Bearer(token, nil, refuse)
		for authz, want := range map[string]string{
			"Bearer " + token:                  PrincipalOfToken(token),
			"Bearer  " + token + " ":           PrincipalOfToken(token), // spaces around it
			token:                              PrincipalOfToken(token), // the scheme may be left out
			"Bearer " + token[:len(token)-1]:   "",                      // a prefix of it
			"Bearer " + token + "x":            "",                      // longer
			"Bearer " + strings.ToUpper(token): "",
			"Bearer alice-token-0123456789":    "", // a key, but there are none here
			"Basic " + token:                   "",
			"":                                 "",
		} {
			p, ok, _ := bearerCase(t, auth, &refused, authz)
			if p != want || ok != (want != "") {
				t.Errorf("%q: %q %v, want %q", authz, p, ok, want)
			}
		}
	})

	t.Run("keys win", func(t *testing.T) {
		auth := Bearer(token, keys, refuse)
		if p, ok, _ := bearerCase(t, auth, &refused, "Bearer alice-token-0123456789"); !ok || p != "key:alice" {
			t.Errorf("alice's key: %q %v", p, ok)
		}
		// A key that is also the --token is the key's principal.
		if p, ok, _ := bearerCase(t, auth, &refused, "Bearer "+token); !ok || p != "key:both" {
			t.Errorf("the token that is also a key: %q %v", p, ok)
		}
		if _, ok, n := bearerCase(t, auth, &refused, "Bearer wrong-token-0123456789"); ok || n != 1 {
			t.Errorf("a wrong token: let in %v, refuse ran %d times", ok, n)
		}
	})

	t.Run("keys without a token", func(t *testing.T) {
		auth := Bearer("", keys, refuse)
		if p, ok, _ := bearerCase(t, auth, &refused, "Bearer alice-token-0123456789"); !ok || p != "key:alice" {
			t.Errorf("alice's key: %q %v", p, ok)
		}
		// No header is no token: "" must not match the absent --token.
		for _, authz := range []string{"", "Bearer ", "Bearer wrong-token-0123456789"} {
			if p, ok, n := bearerCase(t, auth, &refused, authz); ok || n != 1 {
				t.Errorf("%q: let in as %q, refuse ran %d times", authz, p, n)
			}
		}
	})

	t.Run("no token and no keys", func(t *testing.T) {
		auth := Bearer("", nil, refuse)
		for _, authz := range []string{"", "Bearer anything-at-all-0123"} {
			if p, ok, n := bearerCase(t, auth, &refused, authz); !ok || p != "anonymous" || n != 0 {
				t.Errorf("%q: %q %v, refuse ran %d times", authz, p, ok, n)
			}
		}
	})
}
