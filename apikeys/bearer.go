package apikeys

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

// AnonymousPrincipal is every caller's principal on a server with neither
// a --token nor named keys (a loopback bind, or --insecure-no-auth).
const AnonymousPrincipal = "anonymous"

// PrincipalOfToken names the principal of the server's single --token:
// "bearer:" and a hash of it (so that logs and audit lines never hold the
// token), or "anonymous" without one. Named keys are "key:NAME".
func PrincipalOfToken(token string) string {
	if token == "" {
		return AnonymousPrincipal
	}
	sum := sha256.Sum256([]byte(token))
	return "bearer:" + hex.EncodeToString(sum[:8])
}

// Bearer returns a route's authentication: the Authorization header's
// bearer token is checked against the named keys, then against the single
// token (in constant time); the caller's principal comes back with true.
// A caller that presents neither gets refuse (which writes the route's own
// refusal) and false. With no token and no keys every caller is let in as
// "anonymous".
func Bearer(token string, keys *Keys, refuse func(http.ResponseWriter)) func(http.ResponseWriter, *http.Request) (string, bool) {
	principal := PrincipalOfToken(token)
	return func(w http.ResponseWriter, r *http.Request) (string, bool) {
		if token == "" && keys == nil {
			return principal, true
		}
		got := strings.TrimSpace(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		if p, ok := keys.Check(got); ok {
			return p, true
		}
		if token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1 {
			return principal, true
		}
		refuse(w)
		return "", false
	}
}
