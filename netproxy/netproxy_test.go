package netproxy

import (
	"bufio"
	"context"
	"crypto/tls"
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

	"golang.org/x/net/proxy"

	"github.com/srt-mcp/srt-mcp/policy"
)

// fixedResolver maps test names to loopback without touching /etc/hosts.
type fixedResolver map[string]string

func (f fixedResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if ip, ok := f[host]; ok {
		return []netip.Addr{netip.MustParseAddr(ip)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

type harness struct {
	t         *testing.T
	p         *Proxy
	httpAddr  string
	socksAddr string
	token     string
	mu        sync.Mutex
	decisions []Decision
}

func newHarness(t *testing.T, n policy.Network, ranges ...string) *harness {
	t.Helper()
	dec, err := policy.NewDecider(n)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, token: "tok-" + t.Name()}
	var pfx []netip.Prefix
	for _, r := range ranges {
		pfx = append(pfx, netip.MustParsePrefix(r))
	}
	p, err := New(Config{
		Decider: dec, Token: h.token, AllowedRanges: pfx,
		Resolver: fixedResolver{"pypi.test": "127.0.0.1", "x.com": "127.0.0.1", "api.x.com": "127.0.0.1",
			"evil-x.com": "127.0.0.1", "public.test": "93.184.216.34", "localhost": "127.0.0.1"},
		OnDecision: func(d Decision) {
			h.mu.Lock()
			h.decisions = append(h.decisions, d)
			h.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	hl, _ := net.Listen("tcp", "127.0.0.1:0")
	sl, _ := net.Listen("tcp", "127.0.0.1:0")
	go p.ServeHTTP(hl)
	go p.ServeSOCKS(sl)
	t.Cleanup(func() { p.Close() })
	h.p, h.httpAddr, h.socksAddr = p, hl.Addr().String(), sl.Addr().String()
	return h
}

func (h *harness) client(withToken bool) *http.Client {
	u := &url.URL{Scheme: "http", Host: h.httpAddr}
	if withToken {
		u.User = url.UserPassword("srt", h.token)
	}
	return &http.Client{
		Transport: &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true},
		Timeout:   10 * time.Second,
	}
}

func (h *harness) last() Decision {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.decisions) == 0 {
		h.t.Fatal("no decision reported")
	}
	return h.decisions[len(h.decisions)-1]
}

func upstream(t *testing.T, body string) (*httptest.Server, string) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return srv, port
}

func TestHTTPAllowAndDeny(t *testing.T) {
	_, port := upstream(t, "hello-from-upstream")
	h := newHarness(t, policy.Network{AllowedDomains: []string{"pypi.test:" + port, "127.0.0.1:" + port}}, "127.0.0.0/8")
	c := h.client(true)

	resp, err := c.Get("http://pypi.test:" + port + "/simple/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "hello-from-upstream" {
		t.Fatalf("allowed name: %d %q", resp.StatusCode, b)
	}
	if d := h.last(); !d.Allow || d.Protocol != "http" || d.Host != "pypi.test" || d.Rule != "allowed_domains: pypi.test:"+port {
		t.Fatalf("decision %+v", d)
	}

	// The inet_aton spelling of 127.0.0.1 is the same host.
	resp, err = c.Get("http://2130706433:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("2130706433 should be 127.0.0.1 and allowed, got %d", resp.StatusCode)
	}

	for _, u := range []string{"http://other.test:" + port + "/", "http://pypi.test:1/", "http://127.0.0.2:" + port + "/"} {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get(BlockedHeader) != "blocked-by-allowlist" || !strings.Contains(string(b), "blocked") {
			t.Fatalf("%s: want 403 with reason, got %d %q", u, resp.StatusCode, b)
		}
		if d := h.last(); d.Allow || d.Rule != policy.RuleNotAllowed {
			t.Fatalf("%s: decision %+v", u, d)
		}
	}
}

func TestProxyTokenRequired(t *testing.T) {
	_, port := upstream(t, "x")
	h := newHarness(t, policy.Network{AllowedDomains: []string{"127.0.0.1:" + port}})
	resp, err := h.client(false).Get("http://127.0.0.1:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusProxyAuthRequired {
		t.Fatalf("no token: want 407, got %d", resp.StatusCode)
	}
	// A CONNECT without the token gets 407 too.
	c, err := net.Dial("tcp", h.httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT 127.0.0.1:%s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\n", port, port)
	line, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.Contains(line, "407") {
		t.Fatalf("CONNECT without token: %q", line)
	}
	// SOCKS5 without the password is refused.
	d, _ := proxy.SOCKS5("tcp", h.socksAddr, &proxy.Auth{User: "srt", Password: "wrong"}, proxy.Direct)
	if conn, err := d.Dial("tcp", "127.0.0.1:"+port); err == nil {
		conn.Close()
		t.Fatal("SOCKS5 with a wrong password connected")
	}
}

func TestConnectTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "tls-ok") }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	h := newHarness(t, policy.Network{AllowedDomains: []string{"*.x.com"}}, "127.0.0.0/8")
	c := h.client(true)
	resp, err := c.Get("https://api.x.com:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "tls-ok" {
		t.Fatalf("got %q", b)
	}
	if d := h.last(); !d.Allow || d.Protocol != "connect" {
		t.Fatalf("decision %+v", d)
	}
	// *.x.com is strict subdomains: not x.com, not evil-x.com.
	for _, host := range []string{"x.com", "evil-x.com"} {
		_, err := c.Get("https://" + host + ":" + port + "/")
		if err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Fatalf("%s: want a 403 CONNECT refusal, got %v", host, err)
		}
		if d := h.last(); d.Allow || d.Host != host {
			t.Fatalf("%s: decision %+v", host, d)
		}
	}
}

func TestSOCKS5(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	_, port, _ := net.SplitHostPort(echo.Addr().String())
	h := newHarness(t, policy.Network{AllowedDomains: []string{"pypi.test:" + port}}, "127.0.0.1/32")
	d, _ := proxy.SOCKS5("tcp", h.socksAddr, &proxy.Auth{User: "srt", Password: h.token}, proxy.Direct)
	c, err := d.Dial("tcp", "pypi.test:"+port) // socks5h: the proxy resolves
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(c, "ping\n")
	line, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if line != "ping\n" {
		t.Fatalf("echo got %q", line)
	}
	if dd := h.last(); !dd.Allow || dd.Protocol != "socks5" {
		t.Fatalf("decision %+v", dd)
	}
	_, err = d.Dial("tcp", "other.test:"+port)
	if err == nil || !strings.Contains(err.Error(), "not allowed by ruleset") {
		t.Fatalf("denied SOCKS5: want ruleset refusal (0x02), got %v", err)
	}
}

func TestRebindingGuard(t *testing.T) {
	_, port := upstream(t, "secret-internal")
	// pypi.test resolves to 127.0.0.1; without an allowed range the guard
	// refuses it even though the name is allowed.
	h := newHarness(t, policy.Network{AllowedDomains: []string{"pypi.test"}})
	resp, err := h.client(true).Get("http://pypi.test:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || strings.Contains(string(b), "secret-internal") {
		t.Fatalf("guard: %d %q", resp.StatusCode, b)
	}
	if d := h.last(); d.Allow || d.Rule != RuleGuard {
		t.Fatalf("decision %+v", d)
	}
	// "localhost" allowed by name may reach loopback.
	h2 := newHarness(t, policy.Network{AllowedDomains: []string{"localhost"}})
	resp, err = h2.client(true).Get("http://localhost:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("localhost: %d", resp.StatusCode)
	}
}

func TestEmptyAllowListMeansNoNetwork(t *testing.T) {
	_, port := upstream(t, "x")
	h := newHarness(t, policy.Network{})
	resp, err := h.client(true).Get("http://127.0.0.1:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || h.last().Rule != policy.RuleNoNetwork {
		t.Fatalf("want 403 %q, got %d %+v", policy.RuleNoNetwork, resp.StatusCode, h.last())
	}
}

func TestDenyBeatsAllow(t *testing.T) {
	_, port := upstream(t, "x")
	h := newHarness(t, policy.Network{AllowedDomains: []string{"127.0.0.1"}, DeniedDomains: []string{"127.0.0.1:" + port}})
	resp, err := h.client(true).Get("http://127.0.0.1:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.HasPrefix(h.last().Rule, "denied_domains:") {
		t.Fatalf("want denied_domains rule, got %d %+v", resp.StatusCode, h.last())
	}
}

func TestRestricted(t *testing.T) {
	for _, s := range []string{"127.0.0.1", "10.1.2.3", "192.168.1.1", "172.16.0.1", "169.254.169.254", "100.100.100.200",
		"168.63.129.16", "::1", "fe80::1", "fd00:ec2::254", "::ffff:127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::", "0.0.0.0", "100.64.0.1",
		"::ffff:0:7f00:1",                                // SIIT
		"::ffff:0:a9fe:a9fe",                             // SIIT, the metadata endpoint
		"2001:0:4136:e378:8000:63bf:80ff:fffe",           // Teredo, client 127.0.0.1 (inverted)
		"2001:0:7f00:1:8000:63bf:3fff:fdd2",              // Teredo, server 127.0.0.1
		"64:ff9b:1::1",                                   // NAT64 local-use (RFC 8215)
		"::7f00:1",                                       // IPv4-compatible
		"fe80::5efe:7f00:1", "2001:4860::200:5efe:a00:1", // ISATAP
	} {
		if !Restricted(netip.MustParseAddr(s)) {
			t.Errorf("%s should be restricted", s)
		}
	}
	for _, s := range []string{"93.184.216.34", "1.1.1.1", "2606:4700::1111", "2001:0:4136:e378:8000:63bf:a2d2:3f84", "2002:5db8:d822::1"} {
		if Restricted(netip.MustParseAddr(s)) {
			t.Errorf("%s should not be restricted", s)
		}
	}
}

func TestTokenParsing(t *testing.T) {
	p := &Proxy{cfg: Config{Token: "abc"}}
	ok := "Basic " + base64.StdEncoding.EncodeToString([]byte("srt:abc"))
	bad := "Basic " + base64.StdEncoding.EncodeToString([]byte("srt:abd"))
	if !p.tokenOK(ok) || p.tokenOK(bad) || p.tokenOK("") || p.tokenOK("Bearer abc") {
		t.Fatal("token check")
	}
}

func basicAuth(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}
