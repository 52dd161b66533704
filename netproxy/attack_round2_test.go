package netproxy

// Attack round 2 from inside the sandbox: the fixes of round 1 (every
// response checked for the values' JSON, URL, hex and base64 spellings,
// trailers and 1xx checked, injection hosts always seen into) and the
// code they added. Each test fails while the hole is open.

import (
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/srt-mcp/srt-mcp/credentials"
	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/runner"
)

// storedValue makes h's upstream a store: POST keeps the body, any GET
// hands it to render (as an API's read-back would), and stores the real
// value through the body swap (the sandbox POSTs its stand-in).
func storedValue(h *tlsHarness, render func(w http.ResponseWriter, r *http.Request, stored []byte)) {
	var mu sync.Mutex
	var stored []byte
	h.up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method == "POST" {
			stored, _ = io.ReadAll(r.Body)
			fmt.Fprint(w, "stored")
			return
		}
		render(w, r, stored)
	})
	h.store()
}

func TestAttackRound2UndeclaredTrailerCarriesSecret(t *testing.T) {
	// Round 1 checks trailers when the response announced them (a
	// "Trailer:" header makes resp.Trailer non-nil before the body). A
	// trailer the upstream sends without announcing it is merged into
	// resp.Trailer by the transport at the body's end, and the reverse
	// proxy forwards every such field (http.TrailerPrefix): neither
	// redacted nor stripped.
	sec := credentialFor("api.example.com")
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}, StripResponseHeaders: []string{"X-Internal"}}, sec)
	h.up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "body\n")
		w.(http.Flusher).Flush() // chunked: trailers can follow
		w.Header().Set(http.TrailerPrefix+"X-Echo-Auth", r.Header.Get("Authorization"))
		w.Header().Set(http.TrailerPrefix+"X-Internal", "stripped-header-value")
	})
	resp, _ := h.get("api.example.com", "/", "Authorization", "Bearer "+h.secrets[0].Standin)
	if v := resp.Trailer.Get("X-Echo-Auth"); strings.Contains(v, sec.Value) {
		t.Errorf("an unannounced trailer carried the real value: %q", v)
	}
	if v := resp.Trailer.Get("X-Internal"); v != "" {
		t.Errorf("stripResponseHeaders does not apply to an unannounced trailer: %q", v)
	}
}

func TestAttackRound2StoredValueReadBackFromAnotherHost(t *testing.T) {
	// Round 1 made every tunnel to an injection host one the proxy sees
	// into, because a value stored there can be read back. The same
	// store is served under other names too (api.github.com stores a
	// gist, gist.githubusercontent.com serves it raw; uploads, codeload,
	// a CDN): an allowed host that is not an injection host is still
	// reached through SOCKS5 (or excludeDomains, or cleartext in a
	// CONNECT) opaquely, and the stored value comes back unredacted.
	sec := credentialFor("api.example.com")
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com", "other.example.com"}}, sec)
	storingUpstream(h) // both names reach the one service
	h.store()
	port, _ := strconv.Atoi(h.upPort)
	c, err := socksConnect(h.socksListen(), h.token, "other.example.com", port)
	if err != nil {
		return // refused: held
	}
	defer c.Close()
	got := exchange(t, h.upstreamClient(c, "other.example.com"), "GET /paste HTTP/1.1\r\nHost: other.example.com\r\nConnection: close\r\n\r\n")
	if strings.Contains(got, sec.Value) {
		t.Fatalf("the value stored at the injection host came back through a SOCKS5 tunnel to another allowed name of the same service:\n%s", got)
	}
}

func TestAttackRound2ArchiveCarriesStoredValue(t *testing.T) {
	// A binary body is checked for the literal value only: "an upstream
	// does not re-spell" it. An archive does: a repository's tarball or
	// zipball (GitHub's /tarball, /zipball, a gist's download), a git
	// pack, a gzipped export are compressed inside the body, under a
	// binary type and no Content-Encoding. Store the value, download the
	// archive, unpack it in the sandbox.
	sec := credentialFor("api.example.com")
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}}, sec)
	storedValue(h, func(w http.ResponseWriter, r *http.Request, stored []byte) {
		w.Header().Set("Content-Type", "application/x-gzip") // GitHub's tarball
		zw := gzip.NewWriter(w)
		zw.Write(stored)
		zw.Close()
	})
	_, body := h.get("api.example.com", "/repos/acme/x/tarball/main")
	zr, err := gzip.NewReader(strings.NewReader(body))
	if err != nil {
		t.Fatalf("%v", err)
	}
	got, _ := io.ReadAll(zr)
	if strings.Contains(string(got), sec.Value) {
		t.Fatalf("the stored value came back inside an archive: %q", got)
	}
}

func TestAttackRound2WrappedBase64CarriesStoredValue(t *testing.T) {
	// GitHub's contents API (GET /repos/{o}/{r}/contents/{path}) answers
	// {"encoding":"base64","content":...} with the base64 broken into
	// lines of 60 characters (as base64(1), Python's encodebytes, MIME
	// and PEM break theirs at 76 or 64). The value's base64 spelling is
	// looked for in one piece; a line break inside it hides it.
	sec := credentialFor("api.example.com")
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}}, sec)
	storedValue(h, func(w http.ResponseWriter, r *http.Request, stored []byte) {
		b64 := base64.StdEncoding.EncodeToString(stored)
		var lines []string
		for len(b64) > 60 {
			lines = append(lines, b64[:60])
			b64 = b64[60:]
		}
		lines = append(lines, b64)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		json.NewEncoder(w).Encode(map[string]string{"encoding": "base64", "content": strings.Join(lines, "\n") + "\n"})
	})
	_, body := h.get("api.example.com", "/repos/acme/x/contents/note.txt")
	var obj map[string]string
	if err := json.Unmarshal([]byte(body), &obj); err != nil {
		t.Fatalf("%q: %v", body, err)
	}
	raw, _ := base64.StdEncoding.DecodeString(strings.ReplaceAll(obj["content"], "\n", ""))
	if strings.Contains(string(raw), sec.Value) {
		t.Fatalf("the stored value came back as line-wrapped base64: %q", obj["content"])
	}
}

func TestAttackRound2OtherEncodersSpellings(t *testing.T) {
	// derivedPairs spells the value as Go's encoders do. Other servers'
	// encoders spell it otherwise, and the value comes back unredacted.
	// A base64 value (an Azure storage key, a Basic password) has '+',
	// '/' and '='.
	const value = "q+Zb/8Kx3R+0wPv/Y5nA2dLm9Tc7Hs1fEg4Ju6Io??=="
	if b64 := base64.StdEncoding.EncodeToString([]byte(value)); !strings.Contains(b64[4:len(b64)-4], "/") {
		t.Fatalf("the value's base64 must have a '/' inside: %s", b64)
	}
	cases := []struct {
		name   string
		render func(w http.ResponseWriter, stored []byte)
		decode func(body string) string
		value  string // when not value
	}{
		{
			// HTML and XML escape & < > " ': an HTML page (an error page
			// that quotes what it got, a rendered Markdown document, an
			// XML API) spells a password with them otherwise.
			name:  "HTML-escaped (an error page, rendered Markdown, XML)",
			value: "pa<ss>wo&rd-0123456789-real-secret-xyz",
			render: func(w http.ResponseWriter, stored []byte) {
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				fmt.Fprintf(w, "<p>invalid value: <code>%s</code></p>", html.EscapeString(string(stored)))
			},
			decode: func(body string) string { return html.UnescapeString(body) },
		},
		{
			// .NET's System.Text.Json (and others that make JSON safe
			// for HTML) escape '+' as \u002B: uppercase hex, a character
			// Go leaves alone.
			name: "JSON with + as \\u002B (System.Text.Json)",
			render: func(w http.ResponseWriter, stored []byte) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"note":"%s"}`, strings.ReplaceAll(string(stored), "+", `\u002B`))
			},
			decode: func(body string) string {
				var m map[string]string
				json.Unmarshal([]byte(body), &m)
				return m["note"]
			},
		},
		{
			// PHP's json_encode escapes '/' as "\/" in every string: in a
			// base64 content field too (only the value's own JSON
			// spelling gets the "\/" variant).
			name: "base64 content with \\/ (PHP json_encode)",
			render: func(w http.ResponseWriter, stored []byte) {
				w.Header().Set("Content-Type", "application/json")
				b64 := base64.StdEncoding.EncodeToString(stored)
				fmt.Fprintf(w, `{"content":"%s"}`, strings.ReplaceAll(b64, "/", `\/`))
			},
			decode: func(body string) string {
				var m map[string]string
				json.Unmarshal([]byte(body), &m)
				b, _ := base64.StdEncoding.DecodeString(m["content"])
				return string(b)
			},
		},
		{
			// Python's urllib.parse.quote keeps '/' (safe="/") and
			// escapes '+': neither QueryEscape's nor PathEscape's
			// spelling (a Location, a "next" link).
			name: "URL-encoded with / kept (Python quote)",
			render: func(w http.ResponseWriter, stored []byte) {
				w.Header().Set("Content-Type", "text/plain")
				fmt.Fprintf(w, "https://example.com/next?token=%s", strings.ReplaceAll(url.QueryEscape(string(stored)), "%2F", "/"))
			},
			decode: func(body string) string {
				u, _ := url.Parse(body)
				return u.Query().Get("token")
			},
		},
		{
			// Lowercase percent-encoding (%2b, %2f): what some encoders
			// write and every decoder reads.
			name: "URL-encoded lowercase hex",
			render: func(w http.ResponseWriter, stored []byte) {
				w.Header().Set("Content-Type", "text/plain")
				fmt.Fprint(w, regexp.MustCompile(`%[0-9A-F]{2}`).ReplaceAllStringFunc(url.QueryEscape(string(stored)), strings.ToLower))
			},
			decode: func(body string) string { s, _ := url.QueryUnescape(body); return s },
		},
		{
			// A JSON body under a binary Content-Type (an API that lets
			// the caller pick the response's type, httpbin's
			// /response-headers, a stored object's metadata): only the
			// literal value is looked for, and its JSON spelling differs.
			name: "JSON-escaped under application/octet-stream",
			render: func(w http.ResponseWriter, stored []byte) {
				w.Header().Set("Content-Type", "application/octet-stream")
				fmt.Fprintf(w, `{"v":"%s"}`, strings.ReplaceAll(string(stored), "/", `\/`))
			},
			decode: func(body string) string {
				var m map[string]string
				json.Unmarshal([]byte(body), &m)
				return m["v"]
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			value := value
			if c.value != "" {
				value = c.value
			}
			sec := credentials.Secret{Name: "T", Value: value, InjectHosts: []string{"api.example.com"}}
			h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}}, sec)
			storedValue(h, func(w http.ResponseWriter, r *http.Request, stored []byte) {
				c.render(w, bytes.TrimPrefix(stored, []byte("note: ")))
			})
			_, body := h.get("api.example.com", "/read")
			if got := c.decode(body); strings.Contains(got, value) {
				t.Fatalf("the stored value came back in another spelling: %q", body)
			}
		})
	}
}

func TestAttackRound2StalledResponsesHoldMemory(t *testing.T) {
	// The proxy runs in the runner, outside the sandbox's cgroup: what
	// it holds for the sandbox is not under the sandbox's memory limit.
	// A large response is read ahead into five 64 KiB buffers and
	// scanned through two more of 64 KiB and up, and a client that
	// stops reading holds them all. maxConns (4096) plain proxy
	// connections (no tunnel slot needed) each asking for a large
	// response and reading nothing make the proxy hold gigabytes.
	sec := credentialFor("api.example.com")
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}}, sec)
	chunk := make([]byte, 1<<20)
	h.up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		for i := 0; i < 16; i++ {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := int64(ms.HeapInuse)
	auth := base64.StdEncoding.EncodeToString([]byte("srt:" + h.token))
	const n = 64
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.(*net.TCPConn).SetReadBuffer(4096)
		fmt.Fprintf(c, "GET https://api.example.com:%s/big HTTP/1.1\r\nHost: api.example.com:%s\r\nProxy-Authorization: Basic %s\r\n\r\n", h.upPort, h.upPort, auth)
	}
	time.Sleep(3 * time.Second)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	per := (int64(ms.HeapInuse) - before) / n
	total := per * maxConns
	t.Logf("%d KiB held per stalled response; %d MiB for maxConns (%d) of them", per>>10, total>>20, maxConns)
	if total > 1<<30 {
		t.Fatalf("one sandbox can make its proxy hold %d MiB outside its memory limit (%d KiB per stalled response, %d connections)", total>>20, per>>10, maxConns)
	}
}

func TestAttackRound2RecordCapHidesCredentialUse(t *testing.T) {
	// Round 1 caps request records at 1000 per execution and counts the
	// rest. The sandbox picks which 1000: a thousand refused TRACEs
	// (they never reach an upstream) first, and then every request that
	// carries the real credential, to any path, is missing from the
	// audit log; only "N more requests" remains.
	_, port := upstream(t, "ok")
	var mu sync.Mutex
	var got []runner.Violation
	hl, _ := net.Listen("tcp", "127.0.0.1:0")
	sl, _ := net.Listen("tcp", "127.0.0.1:0")
	n := policy.Network{AllowedDomains: []string{"pinned.test:" + port}, AllowedIPRanges: []string{"127.0.0.0/8"},
		Hosts: map[string]string{"pinned.test": "127.0.0.1"}}
	secrets := []credentials.Secret{{Name: "TOKEN", Value: "the-real-secret-value-0123456789-abcdefgh", InjectHosts: []string{"pinned.test"}}}
	credentials.MintAll(secrets)
	closer, err := Egress(runner.EgressConfig{Network: n, Token: "tok", Secrets: secrets, AllowPlaintextInject: true}, hl, sl, func(v runner.Violation) {
		mu.Lock()
		got = append(got, v)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: hl.Addr().String(), User: url.UserPassword("srt", "tok")})}}
	do := func(method, path string, hdr ...string) {
		req, _ := http.NewRequest(method, "http://pinned.test:"+port+path, nil)
		if len(hdr) == 2 {
			req.Header.Set(hdr[0], hdr[1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for i := 0; i < maxRequestRecords; i++ {
		do("TRACE", "/")
	}
	do("DELETE", "/repos/acme/everything", "Authorization", "Bearer "+secrets[0].Standin)
	time.Sleep(200 * time.Millisecond)
	closer.Close()
	mu.Lock()
	defer mu.Unlock()
	for _, v := range got {
		if v.Kind == "request" && len(v.Credentials) > 0 {
			return
		}
	}
	t.Fatalf("the request that carried TOKEN (DELETE /repos/acme/everything) left no record: a sandbox that first makes %d refused requests uses its credentials unaudited", maxRequestRecords)
}

func TestAttackRound2UpstreamErrorQuotesValue(t *testing.T) {
	// The proxy's own 502 quotes the transport's error, redacted for the
	// raw spelling only (credentials.Redact), not the spellings round 1
	// added. The query carries the value URL-encoded, and a service that
	// echoes the request line (echo, a line-based service's "unknown
	// command" on another port of the injection host) makes Go's
	// transport fail with `malformed HTTP status code "/?k=<value>"`.
	// Low: it needs such a service on an injection host.
	sec := credentials.Secret{Name: "T", Value: "q+Zb/8Kx3R+0wPv/Y5nA2dLm9Tc7Hs1fEg4Ju6Io==", InjectHosts: []string{"api.example.com"}}
	h := newTLSHarness(t, policy.Network{AllowedDomains: []string{"api.example.com"}}, sec)
	l, err := tls.Listen("tcp", "127.0.0.1:0", h.up.TLS)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	_, echoPort, _ := net.SplitHostPort(l.Addr().String())
	resp, err := h.client().Get("https://api.example.com:" + echoPort + "/?k=" + h.secrets[0].Standin)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(b), url.QueryEscape(sec.Value)) {
		t.Fatalf("the proxy's error quoted the value URL-encoded: %s", b)
	}
}
