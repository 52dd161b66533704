package policy

import "testing"

// EncodedTraversal (round 1) refuses a dot segment behind an encoded
// separator (..%2f, ..%5c, ..;). One more layer of encoding passes:
// "%252f" is "%2f" to an upstream that decodes once more than the proxy
// (a front end that decodes the path and forwards it to an application
// that decodes again: nginx's proxy_pass with a URI, IIS's double
// decoding), which then reads "/repos/acme/../../admin" where the request
// rule judged "/repos/acme/...". Low: it needs such an upstream.
func TestRound2EncodedTraversalDoubleEncoded(t *testing.T) {
	for _, p := range []string{
		"/repos/acme/..%252f..%252fadmin",
		"/repos/acme/%252e%252e%252fadmin",
		"/repos/acme/..%255cadmin",
	} {
		if !EncodedTraversal(p) {
			t.Errorf("%s: a dot segment behind a double-encoded separator is forwarded", p)
		}
	}
}
