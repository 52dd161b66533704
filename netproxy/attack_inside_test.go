package netproxy

// Attacks on the egress proxy from the code inside the sandbox (issue 27's
// network model): every test here is a way the sandbox gets a masked
// credential's real value, gets a request past the request rules, or
// makes the proxy hold unbounded resources. Each fails while the hole is
// open.

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/srt-mcp/srt-mcp/credentials"
	"github.com/srt-mcp/srt-mcp/policy"
)

// socksListen serves the harness's proxy on a SOCKS5 listener too, as
// netproxy.Egress always does (ALL_PROXY points the sandbox at it).
func (h *tlsHarness) socksListen() string {
	h.t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.t.Fatal(err)
	}
	go h.p.ServeSOCKS(l)
	return l.Addr().String()
}

// socksConnect opens a SOCKS5 CONNECT (user/password auth with the
// token, a name for the proxy to resolve) and returns the tunnel.
func socksConnect(addr, token, host string, port int) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fail := func(err error) (net.Conn, error) { c.Close(); return nil, err }
	if _, err := c.Write([]byte{5, 1, 2}); err != nil {
		return fail(err)
	}
	b := make([]byte, 2)
	if _, err := io.ReadFull(c, b); err != nil || b[1] != 2 {
		return fail(fmt.Errorf("method: %v %v", b, err))
	}
	auth := append([]byte{1, 3}, "srt"...)
	auth = append(append(auth, byte(len(token))), token...)
	if _, err := c.Write(auth); err != nil {
		return fail(err)
	}
	if _, err := io.ReadFull(c, b); err != nil || b[1] != 0 {
		return fail(fmt.Errorf("auth: %v %v", b, err))
	}
	req := append([]byte{5, 1, 0, 3, byte(len(host))}, host...)
	req = binary.BigEndian.AppendUint16(req, uint16(port))
	if _, err := c.Write(req); err != nil {
		return fail(err)
	}
	rep := make([]byte, 4)
	if _, err := io.ReadFull(c, rep); err != nil {
		return fail(err)
	}
	if rep[1] != 0 {
		return fail(fmt.Errorf("SOCKS5 reply %d", rep[1]))
	}
	skip := 2
	switch rep[3] {
	case 1:
		skip += 4
	case 4:
		skip += 16
	case 3:
		l := make([]byte, 1)
		io.ReadFull(c, l)
		skip += int(l[0])
	}
	if _, err := io.ReadFull(c, make([]byte, skip)); err != nil {
		return fail(err)
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// upstreamTLS is how the sandbox speaks TLS to the real upstream through
// an opaque tunnel: the sandbox's bundle holds the host's roots (and the
// operator's extra CAs), so it trusts the real server too.
func (h *tlsHarness) upstreamClient(c net.Conn, name string) *tls.Conn {
	pool := x509.NewCertPool()
	pool.AddCert(h.up.Certificate())
	return tls.Client(c, &tls.Config{RootCAs: pool, ServerName: name})
}

// exchange writes a raw request and returns everything that comes back
// (the request asks for Connection: close).
func exchange(t *testing.T, c net.Conn, req string) string {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatalf("write: %v", err)
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

// storingUpstream makes h's upstream an API that stores what is POSTed
// and hands it back: as it is (GET /paste, with Range support), and as
// a "blob" object with the content base64- and hex-encoded (GitHub's
// git/blobs and contents APIs answer with base64 content).
func storingUpstream(h *tlsHarness) http.Handler {
	var mu sync.Mutex
	var stored []byte
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == "POST":
			stored, _ = io.ReadAll(r.Body)
			fmt.Fprint(w, "stored")
		case r.URL.Path == "/blob":
			json.NewEncoder(w).Encode(map[string]string{
				"encoding": "base64", "content": base64.StdEncoding.EncodeToString(stored),
				"hex": hex.EncodeToString(stored),
			})
		default:
			http.ServeContent(w, r, "paste.txt", time.Time{}, bytes.NewReader(stored))
		}
	})
	h.up.Config.Handler = handler
	return handler
}

// store puts the real value at api.example.com through the body swap:
// the sandbox POSTs its stand-in over a terminated tunnel.
func (h *tlsHarness) store() {
	h.t.Helper()
	req, _ := http.NewRequest("POST", h.url("api.example.com", "/paste"), strings.NewReader("note: "+h.secrets[0].Standin))
	if resp, body := h.do(req); resp.StatusCode != 200 || body != "stored" {
		h.t.Fatalf("store: %d %q", resp.StatusCode, body)
	}
}

func TestAttackSOCKSIgnoresRefuseOpaqueTunnels(t *testing.T) {
	// network.refuseOpaqueTunnels refuses "every tunnel the filter cannot
	// see into (non-terminated CONNECT, SOCKS)" (srt 0.0.83). The SOCKS5
	// listener (ALL_PROXY) still opens an opaque tunnel to any allowed
	// host: the sandbox stores the real value through a body swap, then
	// reads it back end-to-end TLS through SOCKS, where nothing redacts it.
	sec := credentialFor("api.example.com")
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}, RefuseOpaqueTunnels: true}, sec)
	storingUpstream(h)
	h.store()
	port, _ := strconv.Atoi(h.upPort)
	c, err := socksConnect(h.socksListen(), h.token, "api.example.com", port)
	if err != nil {
		return // refused: what refuseOpaqueTunnels promises
	}
	defer c.Close()
	got := exchange(t, h.upstreamClient(c, "api.example.com"), "GET /paste HTTP/1.1\r\nHost: api.example.com\r\nConnection: close\r\n\r\n")
	if strings.Contains(got, sec.Value) {
		t.Fatalf("refuseOpaqueTunnels is on, yet SOCKS5 opened an opaque tunnel and the stored real value came back:\n%s", got)
	}
	t.Fatal("refuseOpaqueTunnels is on, yet SOCKS5 opened an opaque tunnel")
}

func TestAttackSOCKSBypassesRequestRules(t *testing.T) {
	// A host with request rules must be seen into (a CONNECT to it that
	// cannot be terminated is refused). Over SOCKS5 the same host is an
	// opaque tunnel: any method, any path.
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"},
		RequestRules: []policy.RequestRule{{Host: "api.example.com", Methods: []string{"GET"}, Paths: []string{"/repos/acme/"}}}})
	port, _ := strconv.Atoi(h.upPort)
	c, err := socksConnect(h.socksListen(), h.token, "api.example.com", port)
	if err != nil {
		return
	}
	defer c.Close()
	got := exchange(t, h.upstreamClient(c, "api.example.com"), "DELETE /admin/everything HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.seen {
		if r.Method == "DELETE" {
			t.Fatalf("request rules allow GET under /repos/acme/ only; DELETE /admin/everything reached the upstream through SOCKS5:\n%s", got)
		}
	}
}

func TestAttackSOCKSReadsStoredSecretFromInjectionHost(t *testing.T) {
	// The proxy checks every response for the real values because a value
	// stored at an injection host through a body swap can be read back
	// later (commit 33ee1ef). An injection host reached through SOCKS5 is
	// never seen into: the same read-back, without refuseOpaqueTunnels,
	// hands the value over. An injection host has to be one the proxy
	// must see (like a host with request rules).
	sec := credentialFor("api.example.com")
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}}, sec)
	storingUpstream(h)
	h.store()
	port, _ := strconv.Atoi(h.upPort)
	c, err := socksConnect(h.socksListen(), h.token, "api.example.com", port)
	if err != nil {
		return
	}
	defer c.Close()
	got := exchange(t, h.upstreamClient(c, "api.example.com"), "GET /paste HTTP/1.1\r\nHost: api.example.com\r\nConnection: close\r\n\r\n")
	if strings.Contains(got, sec.Value) {
		t.Fatalf("the stored real value came back through a SOCKS5 tunnel to the injection host:\n%s", got)
	}
}

func TestAttackCleartextInTerminatedTunnelReadsStoredSecret(t *testing.T) {
	// A terminated CONNECT whose first byte is not a TLS handshake is
	// passed through opaquely (unless request rules or
	// refuseOpaqueTunnels apply). To the injection host's cleartext port
	// that is an unredacted HTTP exchange, while the same request sent
	// as a plain proxy request (GET http://...) is redacted.
	sec := credentialFor("api.example.com")
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}}, sec)
	handler := storingUpstream(h)
	plain := httptest.NewServer(handler) // the same service on :80
	defer plain.Close()
	_, plainPort, _ := net.SplitHostPort(plain.Listener.Addr().String())
	h.store()

	// The plain proxy request: redacted.
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(mustURL("http://srt:" + h.token + "@" + h.addr))}}).Get("http://api.example.com:" + plainPort + "/paste")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(b), sec.Value) || !strings.Contains(string(b), h.secrets[0].Standin) {
		t.Fatalf("the plain proxy path must redact: %q", b)
	}

	// The same through CONNECT: cleartext after the 200.
	c := h.connectPort("api.example.com", plainPort)
	defer c.Close()
	got := exchange(t, c, "GET /paste HTTP/1.1\r\nHost: api.example.com\r\nConnection: close\r\n\r\n")
	if strings.Contains(got, sec.Value) {
		t.Fatalf("cleartext inside a CONNECT to the injection host was tunnelled opaquely; the stored value came back:\n%s", got)
	}
}

func TestAttackRangeRequestsSplitStoredSecret(t *testing.T) {
	// The stored value read back in two byte ranges: neither response
	// holds the whole value, so neither is redacted, and the sandbox
	// joins them. A multi-range request does it in one response (the
	// multipart boundary sits inside the value).
	sec := credentialFor("api.example.com")
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}}, sec)
	storingUpstream(h)
	h.store()
	mid := len("note: ") + len(sec.Value)/2
	_, a := h.get("api.example.com", "/paste", "Range", fmt.Sprintf("bytes=0-%d", mid-1))
	_, b := h.get("api.example.com", "/paste", "Range", fmt.Sprintf("bytes=%d-", mid))
	if strings.Contains(a+b, sec.Value) {
		t.Errorf("two Range requests returned the stored real value in halves: %q + %q", a, b)
	}
	resp, multi := h.get("api.example.com", "/paste", "Range", fmt.Sprintf("bytes=0-%d,%d-", mid-1, mid))
	if parts := multipartBodies(resp, multi); strings.Contains(strings.Join(parts, ""), sec.Value) {
		t.Errorf("one multi-range response carried the real value split by a part boundary: %q", multi)
	}
}

func multipartBodies(resp *http.Response, body string) []string {
	ct := resp.Header.Get("Content-Type")
	i := strings.Index(ct, "boundary=")
	if i < 0 {
		return []string{body}
	}
	var out []string
	for _, part := range strings.Split(body, "--"+ct[i+len("boundary="):]) {
		if _, rest, ok := strings.Cut(part, "\r\n\r\n"); ok {
			out = append(out, strings.TrimSuffix(rest, "\r\n"))
		}
	}
	return out
}

func TestAttackStoredSecretReadBackEncoded(t *testing.T) {
	// The stored value read back base64- or hex-encoded (GitHub's
	// git/blobs API answers {"content": <base64>, "encoding": "base64"}):
	// only the literal value is redacted.
	sec := credentialFor("api.example.com")
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}}, sec)
	storingUpstream(h)
	h.store()
	_, body := h.get("api.example.com", "/blob")
	var blob map[string]string
	if err := json.Unmarshal([]byte(body), &blob); err != nil {
		t.Fatalf("%q: %v", body, err)
	}
	if raw, _ := base64.StdEncoding.DecodeString(blob["content"]); strings.Contains(string(raw), sec.Value) {
		t.Errorf("the stored value came back base64-encoded: %s", blob["content"])
	}
	if raw, _ := hex.DecodeString(blob["hex"]); strings.Contains(string(raw), sec.Value) {
		t.Errorf("the stored value came back hex-encoded: %s", blob["hex"])
	}
}

func TestAttackReflectedSecretInAnotherSpelling(t *testing.T) {
	// No storage needed: an upstream that reflects what it got (httpbin's
	// /anything, any "invalid value ..." error) hands the value back in
	// the spelling its format uses. Only the literal value is redacted.
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.ParseForm()
		// httpbin's shape: the query and form decoded, the body as a
		// JSON string (Go's encoder escapes <, > and &).
		json.NewEncoder(w).Encode(map[string]any{"args": r.URL.Query(), "data": string(b)})
	})
	for _, c := range []struct {
		name, value, send string
		file              bool
		leaked            func(body, value string) bool
	}{
		{
			// A masked file keeps its trailing newline (credentials.readFile
			// does not trim it); JSON writes it as \n, and what is left is
			// the token every tool uses.
			name: "file value with a trailing newline, echoed as JSON", value: "the-real-file-token-0123456789abcdefghij\n", send: "body", file: true,
			leaked: func(body, v string) bool { return strings.Contains(body, strings.TrimSpace(v)) },
		},
		{
			// An AWS secret access key has / and +: in a query, + reads as
			// a space, and the decoded value is reflected.
			name: "value with + in a query, reflected decoded", value: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", send: "query",
			leaked: func(body, v string) bool { return strings.Contains(body, strings.ReplaceAll(v, "+", " ")) },
		},
		{
			name: "password with <>& reflected JSON-escaped", value: "pa<ss>wo&rd-0123456789-real-secret-xyz", send: "body",
			leaked: func(body, v string) bool {
				var m map[string]any
				json.Unmarshal([]byte(body), &m)
				return strings.Contains(fmt.Sprint(m["data"]), v)
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			sec := credentials.Secret{Name: "T", Value: c.value, InjectHosts: []string{"api.example.com"}}
			if c.file {
				// As the runner gets it: read by credentials.Resolve from
				// the operator's file.
				f := filepath.Join(t.TempDir(), "token")
				os.WriteFile(f, []byte(c.value), 0o600)
				ss, err := credentials.Resolve(&policy.Credentials{Files: []policy.CredentialFile{{Path: f, Mode: policy.CredentialMask, InjectHosts: []string{"api.example.com"}}}},
					nil, func(string) (string, bool) { return "", false }, "/root")
				if err != nil || len(ss) != 1 {
					t.Fatalf("resolve: %v %v", ss, err)
				}
				sec = ss[0]
			}
			h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}}, sec)
			h.up.Config.Handler = echo
			standin := h.secrets[0].Standin
			var req *http.Request
			if c.send == "query" {
				req, _ = http.NewRequest("GET", h.url("api.example.com", "/anything?secret="+standin), nil)
			} else {
				req, _ = http.NewRequest("POST", h.url("api.example.com", "/anything"), strings.NewReader(standin))
			}
			_, body := h.do(req)
			if c.leaked(body, c.value) {
				t.Fatalf("the real value came back in another spelling: %s", body)
			}
		})
	}
}

func TestAttackTrailerCarriesSecret(t *testing.T) {
	// Response headers are redacted, trailers are not (the reverse proxy
	// copies res.Trailer after the body, past ModifyResponse).
	sec := credentialFor("api.example.com")
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}, StripResponseHeaders: []string{"X-Internal"}}, sec)
	h.up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Echo-Auth, X-Internal")
		io.WriteString(w, "body\n")
		w.Header().Set("X-Echo-Auth", r.Header.Get("Authorization"))
		w.Header().Set("X-Internal", "stripped-header-value")
	})
	resp, _ := h.get("api.example.com", "/", "Authorization", "Bearer "+h.secrets[0].Standin)
	if v := resp.Trailer.Get("X-Echo-Auth"); strings.Contains(v, sec.Value) {
		t.Errorf("a trailer carried the real value: %q", v)
	}
	if v := resp.Trailer.Get("X-Internal"); v != "" {
		t.Errorf("stripResponseHeaders does not apply to trailers: %q", v)
	}
}

func TestAttackInformationalResponseCarriesSecret(t *testing.T) {
	// 1xx responses (103 Early Hints) are forwarded by the reverse proxy
	// as they arrive, before ModifyResponse: neither redacted nor
	// stripped.
	sec := credentialFor("api.example.com")
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}, StripResponseHeaders: []string{"X-Internal"}}, sec)
	h.up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css?auth="+r.Header.Get("Authorization")+">; rel=preload")
		w.Header().Set("X-Internal", "stripped-header-value")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Del("X-Internal")
		io.WriteString(w, "ok")
	})
	tc := h.tunnel("api.example.com", "api.example.com")
	defer tc.Close()
	got := exchange(t, tc, fmt.Sprintf("GET / HTTP/1.1\r\nHost: api.example.com:%s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", h.upPort, h.secrets[0].Standin))
	if !strings.Contains(got, "103") {
		t.Logf("no 103 came through: %q", got)
	}
	if strings.Contains(got, sec.Value) {
		t.Errorf("a 103 response carried the real value:\n%s", got)
	}
	if strings.Contains(got, "stripped-header-value") {
		t.Errorf("stripResponseHeaders does not apply to 1xx responses:\n%s", got)
	}
}

// wsFrames reads WebSocket frames until EOF and returns each message's
// payload, inflated when the frame says it is compressed (RSV1).
func wsFrames(t *testing.T, br *bufio.Reader) []string {
	t.Helper()
	var msgs []string
	var cur []byte
	compressed := false
	for {
		hdr := make([]byte, 2)
		if _, err := io.ReadFull(br, hdr); err != nil {
			return msgs
		}
		n := int(hdr[1] & 0x7f)
		if n == 126 {
			ext := make([]byte, 2)
			io.ReadFull(br, ext)
			n = int(binary.BigEndian.Uint16(ext))
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(br, p); err != nil {
			return msgs
		}
		if hdr[0]&0x0f != 0 {
			compressed = hdr[0]&0x40 != 0
		}
		cur = append(cur, p...)
		if hdr[0]&0x80 != 0 {
			if compressed {
				r := flate.NewReader(io.MultiReader(bytes.NewReader(cur), bytes.NewReader([]byte{0, 0, 0xff, 0xff})))
				cur, _ = io.ReadAll(r)
			}
			msgs = append(msgs, string(cur))
			cur = nil
		}
	}
}

func TestAttackWebSocketFramingHidesSecret(t *testing.T) {
	// An upgraded connection is redacted as a byte stream, but WebSocket
	// messages are framed: a permessage-deflate message (the extension
	// the sandbox offers, passed through) is compressed, and a fragmented
	// one has a frame header inside the value. Either way the literal
	// value is never on the wire the proxy reads.
	frame := func(fin bool, op byte, rsv1 bool, p []byte) []byte {
		b0 := op
		if fin {
			b0 |= 0x80
		}
		if rsv1 {
			b0 |= 0x40
		}
		out := []byte{b0}
		if len(p) < 126 {
			out = append(out, byte(len(p)))
		} else {
			out = append(out, 126)
			out = binary.BigEndian.AppendUint16(out, uint16(len(p)))
		}
		return append(out, p...)
	}
	upgrade := func(fragment bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			deflate := strings.Contains(r.Header.Get("Sec-WebSocket-Extensions"), "permessage-deflate")
			c, brw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n")
			if deflate {
				fmt.Fprintf(brw, "Sec-WebSocket-Extensions: permessage-deflate\r\n")
			}
			fmt.Fprintf(brw, "\r\n")
			msg := []byte("echo " + r.Header.Get("Authorization"))
			switch {
			case fragment:
				// A server's write buffer splits a long message; the
				// sandbox can pad the value onto a boundary.
				for i := 0; i < len(msg); i += 16 {
					end := min(i+16, len(msg))
					op := byte(0)
					if i == 0 {
						op = 1
					}
					brw.Write(frame(end == len(msg), op, false, msg[i:end]))
				}
			case deflate:
				var z bytes.Buffer
				fw, _ := flate.NewWriter(&z, flate.BestCompression)
				fw.Write(msg)
				fw.Flush()
				brw.Write(frame(true, 1, true, bytes.TrimSuffix(z.Bytes(), []byte{0, 0, 0xff, 0xff})))
			default:
				brw.Write(frame(true, 1, false, msg))
			}
			brw.Flush()
		}
	}
	for _, c := range []struct {
		name     string
		fragment bool
	}{{"permessage-deflate", false}, {"fragmented", true}} {
		t.Run(c.name, func(t *testing.T) {
			sec := credentialFor("api.example.com") // stand-in of the value's length: upgrades are allowed
			h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}}, sec)
			h.up.Config.Handler = upgrade(c.fragment)
			tc := h.tunnel("api.example.com", "api.example.com")
			defer tc.Close()
			fmt.Fprintf(tc, "GET /ws HTTP/1.1\r\nHost: api.example.com:%s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Extensions: permessage-deflate\r\nAuthorization: Bearer %s\r\n\r\n", h.upPort, h.secrets[0].Standin)
			tc.SetReadDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(tc)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 101 {
				return // refused: fine
			}
			msgs := wsFrames(t, br)
			if strings.Contains(strings.Join(msgs, "|"), sec.Value) {
				t.Fatalf("the WebSocket message carried the real value to the sandbox: %q", msgs)
			}
		})
	}
}

func TestAttackRequestRulesEncodedSeparators(t *testing.T) {
	// Rules allow GET under /repos/acme/. NormalizeTarget resolves %2e,
	// "\" and dot segments, but not an encoded slash or backslash or a
	// dot segment with a path parameter: the target passes the rule as
	// spelled and common upstreams resolve it elsewhere — Go's net/http
	// (and most routers) decode %2F in r.URL.Path before cleaning it, IIS
	// reads %5C as "\" and "\" as "/", Tomcat strips ";params" from "..;".
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"},
		RequestRules: []policy.RequestRule{{Host: "api.example.com", Methods: []string{"GET"}, Paths: []string{"/repos/acme/"}}}})
	var mu sync.Mutex
	var reached []string
	params := regexp.MustCompile(`;[^/]*`)
	h.up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := path.Clean(strings.ReplaceAll(params.ReplaceAllString(r.URL.Path, ""), `\`, "/"))
		mu.Lock()
		reached = append(reached, r.RequestURI+" => "+p)
		mu.Unlock()
		fmt.Fprint(w, "served ", p)
	})
	for _, target := range []string{"/repos/acme/..%2fadmin", "/repos/acme/..%2F..%2Fuser%2Fkeys", "/repos/acme/..%5cadmin", "/repos/acme/..;/admin"} {
		h.raw("GET", target)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range reached {
		if _, p, _ := strings.Cut(r, " => "); !strings.HasPrefix(p, "/repos/acme/") {
			t.Errorf("a request the upstream reads outside /repos/acme/ passed the rule: %s", r)
		}
	}
}

func TestAttackUnparsableHostSkipsDenyCheck(t *testing.T) {
	// Inside a tunnel to an allowed host, a Host the proxy cannot make
	// canonical is marked a mismatch but never decided: it goes upstream
	// as spelled, where a virtual-host router that is more lenient (trims
	// dots, drops userinfo) routes it to the denied name.
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}, DeniedDomains: []string{"denied.test"}})
	for _, host := range []string{"denied.test..", "x@denied.test", "denied.test.:" + h.upPort + "."} {
		tc := h.tunnel("api.example.com", "api.example.com")
		got := exchange(t, tc, "GET / HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n")
		tc.Close()
		if strings.HasPrefix(got, "HTTP/1.1 200") {
			t.Errorf("Host %q (a spelling of the denied name) was forwarded unchecked: %q", host, firstLine(got))
		}
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\r\n")
	return l
}

func TestAttackOpaqueTunnelsAreUnbounded(t *testing.T) {
	// maxTunnels bounds terminated tunnels. A terminated CONNECT whose
	// first byte is not TLS gives its slot back and becomes an opaque
	// tunnel with no limit and no timeout, as does every SOCKS5 tunnel:
	// each holds two descriptors and two goroutines in the proxy (the
	// server process on the Docker backend) for as long as the sandbox
	// likes.
	const max, try = 2, 12
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer plain.Close()
	_, plainPort, _ := net.SplitHostPort(plain.Listener.Addr().String())
	pp, _ := strconv.Atoi(plainPort)
	open := func(t *testing.T, dial func() (net.Conn, error)) int {
		var live []net.Conn
		defer func() {
			for _, c := range live {
				c.Close()
			}
		}()
		for i := 0; i < try; i++ {
			c, err := dial()
			if err != nil {
				continue
			}
			c.SetDeadline(time.Now().Add(3 * time.Second))
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || resp.StatusCode != 200 {
				c.Close()
				continue
			}
			live = append(live, c) // kept open: keep-alive, no deadline in the proxy
		}
		return len(live)
	}
	t.Run("cleartext in terminated CONNECT", func(t *testing.T) {
		h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}, TLSTerminate: &policy.TLSTerminate{MaxTunnels: max}})
		n := open(t, func() (net.Conn, error) { return h.tryConnectPort("api.example.com", plainPort) })
		if n > max {
			t.Errorf("%d tunnels open at once with maxTunnels %d", n, max)
		}
	})
	t.Run("SOCKS5", func(t *testing.T) {
		h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}, TLSTerminate: &policy.TLSTerminate{MaxTunnels: max}})
		addr := h.socksListen()
		n := open(t, func() (net.Conn, error) { return socksConnect(addr, h.token, "api.example.com", pp) })
		if n > max {
			t.Errorf("%d SOCKS5 tunnels open at once with maxTunnels %d", n, max)
		}
	})
}

func (h *tlsHarness) connectPort(target, port string) net.Conn {
	h.t.Helper()
	c, err := h.tryConnectPort(target, port)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

func (h *tlsHarness) tryConnectPort(target, port string) (net.Conn, error) {
	c, err := h.sendConnect(net.JoinHostPort(target, port))
	if err != nil {
		return nil, err
	}
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	// Byte by byte: nothing past the CONNECT's response may be consumed.
	var head []byte
	one := make([]byte, 1)
	for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
		if _, err := c.Read(one); err != nil {
			c.Close()
			return nil, err
		}
		head = append(head, one[0])
	}
	c.SetReadDeadline(time.Time{})
	if !bytes.HasPrefix(head, []byte("HTTP/1.1 200")) {
		c.Close()
		return nil, errors.New(firstLine(string(head)))
	}
	return c, nil
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

func TestAttackRedactionIsAGuessingOracle(t *testing.T) {
	// Every response, from any allowed host, is searched for every
	// secret's real value and the value replaced by its stand-in. That is
	// an oracle: the sandbox has an allowed host reflect a list of
	// guesses (an echo, a search, GitHub's POST /markdown/raw) and the
	// one guess that comes back as the stand-in is the value. No
	// credential is sent anywhere; a megabyte of guesses per request
	// finds a short or dictionary password (a masked database or Basic
	// password) in one or a few requests. A value too short to be safe
	// to mask must be refused when the operator's credentials are read.
	const weak = "hunter2"
	ss, err := credentials.Resolve(&policy.Credentials{EnvVars: []policy.CredentialEnv{{Name: "DB_PASSWORD", Mode: policy.CredentialMask, InjectHosts: []string{"db-api.example.com"}}}},
		nil, func(string) (string, bool) { return weak, true }, "/root")
	if err != nil {
		return // refused: fine
	}
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}}, ss...)
	h.up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(w, r.Body) })
	var guesses []string
	for _, word := range []string{"password", "letmein", "hunter", "dragon", "monkey"} {
		for d := 0; d < 10; d++ {
			guesses = append(guesses, word+strconv.Itoa(d))
		}
	}
	// A host outside the secret's injectHosts: nothing is injected,
	// the response is redacted all the same.
	req, _ := http.NewRequest("POST", h.url("api.example.com", "/echo"), strings.NewReader(strings.Join(guesses, "\n")))
	_, body := h.do(req)
	back := strings.Split(body, "\n")
	for i, g := range guesses {
		if i < len(back) && back[i] != g {
			t.Fatalf("the proxy's redaction told the sandbox the masked value: guess %q came back as %q", g, back[i])
		}
	}
}

func TestAttackSecondContentEncodingLineIsNotDecoded(t *testing.T) {
	// The proxy reads only the first Content-Encoding line: "identity"
	// then "gzip" (two lines — an application's header plus a
	// compressing middleware that adds its own) passes the gzip body
	// through unchecked, and the sandbox gunzips it.
	sec := credentialFor("api.example.com")
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}}, sec)
	h.up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		io.WriteString(zw, "token "+r.Header.Get("Authorization"))
		zw.Close()
		w.Header()["Content-Encoding"] = []string{"identity", "gzip"}
		w.Write(z.Bytes())
	})
	tc := h.tunnel("api.example.com", "api.example.com")
	defer tc.Close()
	got := exchange(t, tc, fmt.Sprintf("GET / HTTP/1.1\r\nHost: api.example.com:%s\r\nAccept-Encoding: gzip\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", h.upPort, h.secrets[0].Standin))
	if _, body, ok := strings.Cut(got, "\r\n\r\n"); ok {
		if zr, err := gzip.NewReader(strings.NewReader(body)); err == nil {
			if b, _ := io.ReadAll(zr); strings.Contains(string(b), sec.Value) {
				t.Fatalf("a gzip body behind a second Content-Encoding line carried the real value: %q", b)
			}
		}
	}
}
