package netproxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/srt-mcp/srt-mcp/credentials"
	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/tlsca"
)

// tlsHarness is a terminating proxy in front of real TLS upstreams with
// their own CA (httptest's), which the proxy trusts as an extra root.
type tlsHarness struct {
	t        testing.TB
	p        *Proxy
	ca       *tlsca.CA
	caPool   *x509.CertPool
	addr     string
	token    string
	up       *httptest.Server
	upPort   string
	secrets  []credentials.Secret
	mu       sync.Mutex
	requests []Request
	denials  []Decision
	seen     []*http.Request // what the upstream received
	seenBody []string
}

func newTLSHarness(t testing.TB, n policy.Network, secrets ...credentials.Secret) *tlsHarness {
	t.Helper()
	h := &tlsHarness{t: t, token: "tok"}
	h.up = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.seen = append(h.seen, r)
		h.seenBody = append(h.seenBody, string(b))
		h.mu.Unlock()
		// An upstream that echoes the request: what must not hand a
		// secret back to the sandbox.
		w.Header().Set("X-Echo-Auth", r.Header.Get("Authorization"))
		w.Header().Set("Set-Cookie", "session=1")
		fmt.Fprintf(w, "%s %s host=%s auth=%s body=%s", r.Method, r.RequestURI, r.Host, r.Header.Get("Authorization"), b)
	}))
	t.Cleanup(h.up.Close)
	_, h.upPort, _ = net.SplitHostPort(h.up.Listener.Addr().String())
	certPEM, keyPEM, err := tlsca.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	if h.ca, err = tlsca.ParseCA(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	h.caPool = x509.NewCertPool()
	h.caPool.AppendCertsFromPEM(certPEM)
	roots := x509.NewCertPool()
	roots.AddCert(h.up.Certificate())
	if n.TLSTerminate == nil {
		n.TLSTerminate = &policy.TLSTerminate{}
	}
	dec, err := policy.NewDecider(n)
	if err != nil {
		t.Fatal(err)
	}
	credentials.MintAll(secrets)
	h.secrets = secrets
	cfg := Config{
		Decider: dec, Token: h.token, Network: n, CA: h.ca, Roots: roots,
		AllowedRanges: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Resolver:      fixedResolver{"api.example.com": "127.0.0.1", "other.example.com": "127.0.0.1", "denied.test": "127.0.0.1", "example.com": "127.0.0.1"},
		OnDecision: func(d Decision) {
			if !d.Allow {
				h.mu.Lock()
				h.denials = append(h.denials, d)
				h.mu.Unlock()
			}
		},
		OnRequest: func(r Request) {
			h.mu.Lock()
			h.requests = append(h.requests, r)
			h.mu.Unlock()
		},
	}
	if len(secrets) > 0 {
		cfg.Swapper = credentials.NewSwapper(secrets)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = l.Addr().String()
	go p.ServeHTTP(l)
	t.Cleanup(func() { p.Close() })
	return h
}

// client is an HTTPS client that goes through the proxy and trusts only
// the proxy's CA, as a sandbox does.
func (h *tlsHarness) client() *http.Client {
	pu := &url.URL{Scheme: "http", User: url.UserPassword("srt", h.token), Host: h.addr}
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: h.caPool}}, Timeout: 10 * time.Second}
}

// waitRequests returns the request records once there are n (a record is
// made after its response is written, so the client may be ahead).
func (h *tlsHarness) waitRequests(n int) []Request {
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		h.mu.Lock()
		rs := append([]Request(nil), h.requests...)
		h.mu.Unlock()
		if len(rs) >= n || time.Now().After(deadline) {
			return rs
		}
	}
}

func (h *tlsHarness) url(host, path string) string { return "https://" + host + ":" + h.upPort + path }

func (h *tlsHarness) do(req *http.Request) (*http.Response, string) {
	h.t.Helper()
	resp, err := h.client().Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func (h *tlsHarness) get(host, path string, hdr ...string) (*http.Response, string) {
	req, _ := http.NewRequest("GET", h.url(host, path), nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return h.do(req)
}

func TestTerminateForwardsOverVerifiedTLS(t *testing.T) {
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}, StripResponseHeaders: []string{"set_cookie"}})
	resp, body := h.get("api.example.com", "/hello?x=1")
	if resp.StatusCode != 200 || !strings.HasPrefix(body, "GET /hello?x=1 host=api.example.com:") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if resp.Header.Get("Set-Cookie") != "" {
		t.Error("stripResponseHeaders: set_cookie (folded) must remove Set-Cookie")
	}
	if resp.TLS == nil || len(resp.TLS.PeerCertificates[0].Issuer.Organization) == 0 || resp.TLS.PeerCertificates[0].Issuer.Organization[0] != "srt-mcp" {
		t.Errorf("the client must see the proxy's leaf")
	}
	if rs := h.waitRequests(1); len(rs) != 1 || rs[0].Scheme != "https" || rs[0].Path != "/hello" || rs[0].Status != 200 {
		t.Errorf("request record: %+v", rs)
	}
	// Upstream verification: a proxy that does not trust the upstream's
	// CA refuses to forward.
	h.p.cfg.Roots = x509.NewCertPool()
	h.p.reverseOnce = sync.Once{}
	resp, body = h.get("api.example.com", "/")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "certificate") {
		t.Errorf("an unverifiable upstream: %d %q", resp.StatusCode, body)
	}
}

func TestTerminateInjectsOnlyTowardsItsHosts(t *testing.T) {
	sec := credentials.Secret{Name: "GH_TOKEN", Value: "ghp_realsecretvalue0123456789abcdefABCDEFGH", InjectHosts: []string{"api.example.com"}}
	other := credentials.Secret{Name: "OTHER", Value: "other-real-secret-value-xyz", InjectHosts: []string{"other.example.com"}, InjectBody: true}
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com", "other.example.com"}}, sec, other)
	standin, otherStandin := h.secrets[0].Standin, h.secrets[1].Standin
	if len(standin) != len(sec.Value) {
		t.Fatalf("stand-in length %d, value %d", len(standin), len(sec.Value))
	}
	resp, body := h.get("api.example.com", "/", "Authorization", "Bearer "+standin)
	h.mu.Lock()
	gotAuth := h.seen[len(h.seen)-1].Header.Get("Authorization")
	h.mu.Unlock()
	if gotAuth != "Bearer "+sec.Value {
		t.Fatalf("the upstream got %q", gotAuth)
	}
	if strings.Contains(body, sec.Value) || strings.Contains(resp.Header.Get("X-Echo-Auth"), sec.Value) || !strings.Contains(body, standin) {
		t.Fatalf("the echoed secret reached the client: %q %q", body, resp.Header.Get("X-Echo-Auth"))
	}
	if rs := h.waitRequests(1); len(rs) == 0 || len(rs[len(rs)-1].Credentials) != 1 || rs[len(rs)-1].Credentials[0] != "GH_TOKEN" {
		rec := rs
		t.Errorf("the record names the credential put in: %+v", rec)
	}
	// Body, with a value of another length (short): re-framed, exact.
	req, _ := http.NewRequest("POST", h.url("other.example.com", "/upload"), strings.NewReader("token="+otherStandin+"&end"))
	_, body = h.do(req)
	h.mu.Lock()
	gotBody := h.seenBody[len(h.seenBody)-1]
	gotLen := h.seen[len(h.seen)-1].ContentLength
	h.mu.Unlock()
	if gotBody != "token="+other.Value+"&end" || gotLen != int64(len(gotBody)) {
		t.Errorf("body swap: %q (Content-Length %d)", gotBody, gotLen)
	}
	if strings.Contains(body, other.Value) {
		t.Errorf("the body echo leaked: %q", body)
	}
	// A's stand-in sent to B's host is not swapped.
	_, _ = h.get("other.example.com", "/", "Authorization", "Bearer "+standin)
	h.mu.Lock()
	gotAuth = h.seen[len(h.seen)-1].Header.Get("Authorization")
	h.mu.Unlock()
	if gotAuth != "Bearer "+standin {
		t.Errorf("a stand-in went to a host outside its injectHosts as %q", gotAuth)
	}
	// Git's credential helper: Basic user:token.
	req, _ = http.NewRequest("GET", h.url("api.example.com", "/repo.git/info/refs"), nil)
	req.SetBasicAuth("x-access-token", standin)
	resp, body = h.do(req)
	h.mu.Lock()
	u, pw, _ := h.seen[len(h.seen)-1].BasicAuth()
	h.mu.Unlock()
	if u != "x-access-token" || pw != sec.Value {
		t.Errorf("Basic not swapped: %q", pw)
	}
	realB64 := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + sec.Value))
	if strings.Contains(body, realB64) || strings.Contains(resp.Header.Get("X-Echo-Auth"), realB64) {
		t.Errorf("the echoed Basic credential carries the secret: %q", body)
	}
}

func TestTerminatePlaintextNeverInjects(t *testing.T) {
	sec := credentials.Secret{Name: "T", Value: "plain-secret-value-0123456789", InjectHosts: []string{"api.example.com"}}
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.Header.Get("Authorization"))
	}))
	defer plain.Close()
	_, port, _ := net.SplitHostPort(plain.Listener.Addr().String())
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}}, sec)
	pu := &url.URL{Scheme: "http", User: url.UserPassword("srt", h.token), Host: h.addr}
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	req, _ := http.NewRequest("GET", "http://api.example.com:"+port+"/", nil)
	req.Header.Set("Authorization", h.secrets[0].Standin)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != h.secrets[0].Standin {
		t.Fatalf("over cleartext the stand-in must go as it is, got %q", b)
	}
}

func TestTerminateRequestRules(t *testing.T) {
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"},
		RequestRules: []policy.RequestRule{{Host: "api.example.com", Methods: []string{"GET"}, Paths: []string{"/repos/acme/"}}}})
	if resp, _ := h.get("api.example.com", "/repos/acme/x"); resp.StatusCode != 200 {
		t.Errorf("allowed path: %d", resp.StatusCode)
	}
	for _, c := range []struct {
		method, path string
		code         int
		kind         string
	}{
		{"POST", "/repos/acme/x", 403, "blocked-by-request-rule"},
		{"GET", "/repos/acmeevil/x", 403, "blocked-by-request-rule"},
		{"GET", "/repos/acme/../admin", 400, "ambiguous-request-target"},
		{"GET", "/repos/acme/%2e%2e/admin", 400, "ambiguous-request-target"},
		{"TRACE", "/repos/acme/x", 405, "trace-refused"},
	} {
		resp, body := h.raw(c.method, c.path)
		if resp.StatusCode != c.code || resp.Header.Get(BlockedHeader) != c.kind {
			t.Errorf("%s %s: %d %s %q", c.method, c.path, resp.StatusCode, resp.Header.Get(BlockedHeader), body)
		}
	}
	h.mu.Lock()
	n := len(h.seen)
	h.mu.Unlock()
	if n != 1 {
		t.Errorf("the upstream saw %d requests, want only the allowed one", n)
	}
}

// raw sends a request line as spelled (Go's client would clean it) over
// a terminated tunnel.
func (h *tlsHarness) raw(method, target string) (*http.Response, string) {
	h.t.Helper()
	tc := h.tunnel("api.example.com", "api.example.com")
	defer tc.Close()
	fmt.Fprintf(tc, "%s %s HTTP/1.1\r\nHost: api.example.com:%s\r\nContent-Length: 0\r\n\r\n", method, target, h.upPort)
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, target, err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// tunnel opens a CONNECT to target and a TLS session with serverName.
func (h *tlsHarness) tunnel(target, serverName string) *tls.Conn {
	h.t.Helper()
	c := h.connect(target)
	tc := tls.Client(c, &tls.Config{RootCAs: h.caPool, ServerName: serverName})
	if err := tc.Handshake(); err != nil {
		h.t.Fatalf("handshake for %s via %s: %v", serverName, target, err)
	}
	return tc
}

// sendConnect dials the proxy and sends a CONNECT to hostport with the
// sandbox's token; the answer is the caller's to read.
func (h *tlsHarness) sendConnect(hostport string) (net.Conn, error) {
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		return nil, err
	}
	auth := base64.StdEncoding.EncodeToString([]byte("srt:" + h.token))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", hostport, hostport, auth)
	return c, nil
}

// connectAnswer is the proxy's answer to a CONNECT to hostport (the
// connection closed after it).
func (h *tlsHarness) connectAnswer(hostport string) *http.Response {
	h.t.Helper()
	c, err := h.sendConnect(hostport)
	if err != nil {
		h.t.Fatal(err)
	}
	defer c.Close()
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "CONNECT"})
	if err != nil {
		h.t.Fatalf("CONNECT %s: %v", hostport, err)
	}
	return resp
}

func (h *tlsHarness) connect(target string) net.Conn {
	h.t.Helper()
	c, err := h.sendConnect(net.JoinHostPort(target, h.upPort))
	if err != nil {
		h.t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		h.t.Fatalf("CONNECT %s: %v %v", target, resp, err)
	}
	return c
}

// BenchmarkTerminatedDownload is a 64 MiB response through a terminated
// tunnel with a masked credential (every response scanned): the proxy's
// share of bench --tls's download row, for a CPU profile.
func BenchmarkTerminatedDownload(b *testing.B) {
	sec := credentials.Secret{Name: "T", Value: "ghp_realsecretvalue0123456789abcdefABCDEFGH", InjectHosts: []string{"api.example.com"}}
	h := newTLSHarness(b, policy.Network{AllowedDomains: []string{"api.example.com"}}, sec)
	const size = 64 << 20
	zeros := make([]byte, 1<<20)
	h.up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(size))
		for i := 0; i < size/len(zeros); i++ {
			w.Write(zeros)
		}
	})
	c := h.client()
	b.SetBytes(size)
	for i := 0; i < b.N; i++ {
		resp, err := c.Get(h.url("api.example.com", "/big"))
		if err != nil {
			b.Fatal(err)
		}
		if n, _ := io.Copy(io.Discard, resp.Body); n != size {
			b.Fatalf("%d bytes", n)
		}
		resp.Body.Close()
	}
}
