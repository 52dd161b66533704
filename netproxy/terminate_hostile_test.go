package netproxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/srt-mcp/srt-mcp/credentials"
	"github.com/srt-mcp/srt-mcp/policy"
)

func TestTerminateDeniedNamesGetNoCertificate(t *testing.T) {
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}, DeniedDomains: []string{"denied.example.com"}})
	// A CONNECT to a denied name is refused before any TLS.
	resp := h.connectAnswer("denied.example.com:443")
	if resp.StatusCode != 403 {
		t.Fatalf("CONNECT to a denied name: %v", resp)
	}
	// An allowed CONNECT whose ClientHello asks for a denied name.
	raw := h.connect("api.example.com")
	tc := tls.Client(raw, &tls.Config{RootCAs: h.caPool, ServerName: "denied.example.com"})
	if err := tc.Handshake(); err == nil {
		t.Fatal("a tunnel to an allowed name got a certificate for a denied server name")
	}
	tc.Close()
	if n := h.ca.Leaves(); n != 0 {
		t.Fatalf("%d leaves were minted; a denied name must get none", n)
	}
}

func TestTerminateRequireHostMatch(t *testing.T) {
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com", "other.example.com"}, RequireHostMatch: true})
	// The leaf is always the target's: a client asking for another name
	// fails to verify it.
	raw := h.connect("api.example.com")
	tc := tls.Client(raw, &tls.Config{RootCAs: h.caPool, ServerName: "other.example.com"})
	if err := tc.Handshake(); err == nil {
		t.Error("with requireHostMatch the leaf must be the CONNECT target's")
	}
	tc.Close()
	// Host header naming another (allowed) host: 421, nothing forwarded.
	tc = h.tunnel("api.example.com", "api.example.com")
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: other.example.com:%s\r\n\r\n", h.upPort)
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	tc.Close()
	if err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("Host mismatch: %v %v", resp, err)
	}
	if len(h.seen) != 0 {
		t.Fatal("a mismatched request reached the upstream")
	}
}

func TestTerminateHostMismatchNeverInjects(t *testing.T) {
	// Without requireHostMatch a request naming another allowed host goes
	// on (domain fronting is the operator's call), but a credential for
	// the target is never put into it.
	sec := credentialFor("api.example.com")
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com", "other.example.com"}}, sec)
	tc := h.tunnel("api.example.com", "api.example.com")
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: other.example.com:%s\r\nAuthorization: Bearer %s\r\n\r\n", h.upPort, h.secrets[0].Standin)
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	tc.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	if got := h.seen[0].Header.Get("Authorization"); got != "Bearer "+h.secrets[0].Standin {
		t.Fatalf("a request naming another host carried the secret: %q", got)
	}
	// And a name the policy does not allow is refused.
	tc = h.tunnel("api.example.com", "api.example.com")
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: elsewhere.example.org\r\n\r\n")
	resp, err = http.ReadResponse(bufio.NewReader(tc), nil)
	tc.Close()
	if err != nil || resp.StatusCode != 403 {
		t.Fatalf("a Host the policy denies: %v %v", resp, err)
	}
}

func TestTerminateReframesSmuggling(t *testing.T) {
	// Content-Length and Transfer-Encoding both, or a body that holds a
	// second request: the proxy reads the framing once (chunked wins, RFC
	// 9112), judges every request it finds by the rules, and sends each
	// upstream with framing of its own, so no upstream can read a request
	// into it that the proxy did not judge.
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"},
		RequestRules: []policy.RequestRule{{Host: "api.example.com", Methods: []string{"POST"}, Paths: []string{"/x"}}}})
	tc := h.tunnel("api.example.com", "api.example.com")
	defer tc.Close()
	smuggled := "GET /admin HTTP/1.1\r\nHost: api.example.com\r\n\r\n"
	body := "0\r\n\r\n" + smuggled
	fmt.Fprintf(tc, "POST /x HTTP/1.1\r\nHost: api.example.com:%s\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n%s", h.upPort, len(body), body)
	br := bufio.NewReader(tc)
	var codes []int
	tc.SetReadDeadline(time.Now().Add(3 * time.Second))
	for i := 0; i < 2; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		io.Copy(io.Discard, resp.Body)
		codes = append(codes, resp.StatusCode)
	}
	if len(codes) != 2 || codes[0] != 200 || codes[1] != 403 {
		t.Errorf("responses %v, want the POST served and the GET it carried refused by the rule", codes)
	}
	for _, r := range h.seen {
		if r.URL.Path == "/admin" {
			t.Fatal("the smuggled request reached the upstream")
		}
		if len(r.TransferEncoding) > 0 && r.Header.Get("Content-Length") != "" {
			t.Fatal("the upstream got both framings")
		}
	}
}

func TestTerminateHandshakeDeadline(t *testing.T) {
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}, TLSTerminate: &policy.TLSTerminate{HandshakeTimeoutMs: 200, MaxTunnels: 1}})
	c := h.connect("api.example.com") // and then nothing
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read from a silent tunnel returned data")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a client that never sends its ClientHello was kept %v", d)
	}
	c.Close()
	// The slot came back: the next tunnel works.
	tc := h.tunnel("api.example.com", "api.example.com")
	tc.Close()
}

func TestTerminateMaxTunnels(t *testing.T) {
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}, TLSTerminate: &policy.TLSTerminate{MaxTunnels: 2}})
	a := h.tunnel("api.example.com", "api.example.com")
	b := h.tunnel("api.example.com", "api.example.com")
	resp := h.connectAnswer("api.example.com:" + h.upPort)
	if resp.StatusCode != 503 || resp.Header.Get(BlockedHeader) != "too-many-tunnels" {
		t.Fatalf("past maxTunnels: %v", resp)
	}
	a.Close()
	// The slot frees when the tunnel closes (the server sees the close).
	deadline := time.Now().Add(3 * time.Second)
	for len(h.p.slots) > 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	d := h.tunnel("api.example.com", "api.example.com")
	d.Close()
	b.Close()
}

func TestOpaqueTunnelRefusedWhenTheProxyMustSee(t *testing.T) {
	// A host with request rules, excluded from termination: its tunnels
	// cannot be checked, so they are refused.
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"},
		TLSTerminate: &policy.TLSTerminate{ExcludeDomains: []string{"api.example.com"}},
		RequestRules: []policy.RequestRule{{Host: "api.example.com", Methods: []string{"GET"}}}})
	resp := h.connectAnswer("api.example.com:" + h.upPort)
	if resp.StatusCode != 403 || !strings.Contains(resp.Header.Get(BlockedHeader), "opaque") {
		t.Fatalf("%v", resp)
	}
	// A terminated tunnel that does not carry TLS to a ruled host is
	// closed, not passed through.
	h2 := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"},
		RequestRules: []policy.RequestRule{{Host: "api.example.com", Methods: []string{"GET"}}}})
	raw := h2.connect("api.example.com")
	fmt.Fprintf(raw, "POST / HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
	raw.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, _ := raw.Read(make([]byte, 64)); n > 0 {
		t.Error("cleartext inside a tunnel to a ruled host was passed through")
	}
	raw.Close()
	if len(h2.seen) != 0 {
		t.Error("the upstream saw the request")
	}
}

func TestDenyReasonInStatusLine(t *testing.T) {
	reason := "SSH pushes to GitHub are blocked; use an https:// remote — über"
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}, DeniedDomains: []string{"denied.example.com"},
		DeniedDomainReasons: map[string]string{"denied.example.com": reason}})
	c, err := h.sendConnect("denied.example.com:443")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	want := "HTTP/1.1 403 SSH pushes to GitHub are blocked; use an https:// remote ? ?ber\r\n"
	if line != want {
		t.Fatalf("status line %q, want %q", line, want)
	}
}

func credentialFor(host string) credentials.Secret {
	return credentials.Secret{Name: "TOKEN", Value: "the-real-secret-value-0123456789-abcdefgh", InjectHosts: []string{host}}
}

func TestTerminateRedactsStoredValueReadBackCompressed(t *testing.T) {
	// The sandbox stores the real value at an injection host through a
	// body swap (any "create" API), then reads it back gzip-encoded, in
	// a request that carries no credential at all (the operator turned
	// body injection on).
	sec := credentialFor("api.example.com")
	sec.InjectBody = true
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}}, sec)
	var stored []byte
	h.up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			stored, _ = io.ReadAll(r.Body)
			return
		}
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Write(stored)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		zw.Write(stored)
		zw.Close()
	})
	req, _ := http.NewRequest("POST", h.url("api.example.com", "/paste"), strings.NewReader("note: "+h.secrets[0].Standin))
	h.do(req)
	if !strings.Contains(string(stored), sec.Value) {
		t.Fatalf("the body swap did not happen: %q", stored)
	}
	for _, enc := range []string{"gzip", "gzip, deflate, br", "br"} {
		tc := h.tunnel("api.example.com", "api.example.com")
		fmt.Fprintf(tc, "GET /paste HTTP/1.1\r\nHost: api.example.com:%s\r\nAccept-Encoding: %s\r\n\r\n", h.upPort, enc)
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		tc.Close()
		body := raw
		if resp.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(raw))
			if err == nil {
				body, _ = io.ReadAll(zr)
			}
		}
		if bytes.Contains(body, []byte(sec.Value)) {
			t.Fatalf("Accept-Encoding %q: the stored value came back to the sandbox", enc)
		}
		if !bytes.Contains(body, []byte(h.secrets[0].Standin)) {
			t.Errorf("Accept-Encoding %q: want the stand-in back, got %q", enc, body)
		}
	}
}

func TestTerminateUpgradedConnectionIsRedacted(t *testing.T) {
	sec := credentialFor("api.example.com") // long: its stand-in has its length
	// An upstream that hands back a value it holds (stored by an earlier
	// request, say) on an upgraded connection.
	upgradeEcho := func(value string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			c, brw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
			fmt.Fprintf(brw, "stored %s auth=%s\n", value, r.Header.Get("Authorization"))
			brw.Flush()
		}
	}
	open := func(h *tlsHarness, host string) (int, string) {
		tc := h.tunnel(host, host)
		defer tc.Close()
		fmt.Fprintf(tc, "GET /ws HTTP/1.1\r\nHost: %s:%s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nAuthorization: Bearer %s\r\n\r\n", host, h.upPort, h.secrets[0].Standin)
		br := bufio.NewReader(tc)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		tc.SetReadDeadline(time.Now().Add(2 * time.Second))
		rest, _ := io.ReadAll(br)
		if resp.StatusCode != 101 {
			rest, _ = io.ReadAll(resp.Body)
		}
		return resp.StatusCode, string(rest)
	}
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com", "other.example.com"}}, sec)
	h.up.Config.Handler = upgradeEcho(sec.Value)
	// To the host the credential goes to: no upgrade at all.
	if code, rest := open(h, "api.example.com"); code != http.StatusBadGateway || strings.Contains(rest, sec.Value) {
		t.Fatalf("an upgrade to an injection host: %d %q", code, rest)
	}
	// Elsewhere: the connection's bytes are swapped back.
	code, rest := open(h, "other.example.com")
	if code != 101 || strings.Contains(rest, sec.Value) || !strings.Contains(rest, "stored "+h.secrets[0].Standin) {
		t.Fatalf("upgraded echo: %d %q", code, rest)
	}
	short := credentials.Secret{Name: "SHORT", Value: "short-secret-but-16", InjectHosts: []string{"api.example.com"}}
	h = newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com", "other.example.com"}}, short)
	h.up.Config.Handler = upgradeEcho(short.Value)
	if code, rest := open(h, "other.example.com"); code != http.StatusBadGateway || strings.Contains(rest, short.Value) {
		t.Fatalf("an upgrade with a length-changing swap must be refused: %d %q", code, rest)
	}
}

func TestRuleSetHeadersNeverInCleartext(t *testing.T) {
	rules := []policy.RequestRule{{Host: "api.example.com", SetHeaders: map[string]string{"X-Org": "acme"}}}
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}, RequestRules: rules})
	h.get("api.example.com", "/echo")
	if got := h.seen[0].Header.Get("X-Org"); got != "acme" {
		t.Fatalf("over TLS the rule's header is set: %q", got)
	}
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.Header.Get("X-Org")) }))
	defer plain.Close()
	_, port, _ := net.SplitHostPort(plain.Listener.Addr().String())
	for _, allow := range []bool{false, true} {
		h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}, RequestRules: rules, AllowPlaintextHeaderSet: allow})
		pu := &url.URL{Scheme: "http", User: url.UserPassword("srt", h.token), Host: h.addr}
		c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
		resp, err := c.Get("http://api.example.com:" + port + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if allow && (resp.StatusCode != 200 || string(b) != "acme") {
			t.Errorf("allowPlaintextHeaderSet: %d %q", resp.StatusCode, b)
		}
		if !allow && (resp.StatusCode != 403 || resp.Header.Get(BlockedHeader) != "plaintext-header-set") {
			t.Errorf("a header set in cleartext without allowPlaintextHeaderSet: %d %q", resp.StatusCode, b)
		}
	}
}

func TestDeniedResolvedAddresses(t *testing.T) {
	// api.example.com resolves to 127.0.0.1, which the harness allows as
	// a range; the operator's deniedResolvedAddresses take it back.
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}, DeniedResolvedAddresses: []string{"127.0.0.0/8"}})
	resp := h.connectAnswer("api.example.com:" + h.upPort)
	if resp.StatusCode != 403 || !strings.Contains(resp.Header.Get("X-Srt-Mcp-Rule"), "denied_resolved_addresses: 127.0.0.0/8") {
		t.Fatalf("%v", resp)
	}
}

func TestInjectBodyIsOptIn(t *testing.T) {
	// By default a stand-in in a body stays a stand-in (an API could store
	// the value and hand it back in a form no scan knows); with
	// injectBody the value goes in, and no tunnel may be opaque.
	for _, on := range []bool{false, true} {
		sec := credentialFor("api.example.com")
		sec.InjectBody = on
		h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com", "other.example.com"},
			TLSTerminate: &policy.TLSTerminate{ExcludeDomains: []string{"other.example.com"}}}, sec)
		req, _ := http.NewRequest("POST", h.url("api.example.com", "/echo"), strings.NewReader("v="+h.secrets[0].Standin))
		h.do(req)
		got := h.seenBody[len(h.seenBody)-1]
		if on != strings.Contains(got, sec.Value) {
			t.Errorf("injectBody %v: the upstream got %q", on, got)
		}
		if resp := h.connectAnswer("other.example.com:" + h.upPort); (resp.StatusCode == 200) == on {
			t.Errorf("injectBody %v: an opaque tunnel to another host: %v", on, resp)
		}
	}
}
