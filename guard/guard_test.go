package guard

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHostAllowed(t *testing.T) {
	g := New(Config{AllowedHosts: []string{"mcp.example.com"}})
	for host, want := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:8080": true, "10.1.2.3": true, "localhost:8080": true, "app.localhost": true,
		"mcp.example.com:443": true, "MCP.example.com.": true,
		"evil.example:8080": false, "127.0.0.1.nip.io:8080": false, "": false, "localhost.evil.example": false,
	} {
		if got := g.HostAllowed(host); got != want {
			t.Errorf("HostAllowed(%q) = %v, want %v", host, got, want)
		}
	}
	if !New(Config{AllowedHosts: []string{"*"}}).HostAllowed("anything.example") {
		t.Error(`"*" should allow any host`)
	}
}

func TestOriginAllowed(t *testing.T) {
	g := New(Config{AllowedOrigins: []string{"https://app.example.com"}})
	for _, tc := range []struct {
		origin, host string
		want         bool
	}{
		{"http://127.0.0.1:3000", "127.0.0.1:8080", true},
		{"http://localhost:5173", "127.0.0.1:8080", true},
		{"http://10.0.0.5:8080", "10.0.0.5:8080", true}, // same origin
		{"https://app.example.com", "127.0.0.1:8080", true},
		{"https://evil.example", "127.0.0.1:8080", false},
		{"null", "127.0.0.1:8080", false},
		{"file://", "127.0.0.1:8080", false},
		{"http://10.0.0.5:9999", "10.0.0.5:8080", false},
	} {
		if got := g.OriginAllowed(tc.origin, tc.host); got != tc.want {
			t.Errorf("OriginAllowed(%q, %q) = %v", tc.origin, tc.host, got)
		}
	}
}

func TestWrap(t *testing.T) {
	g := New(Config{Rate: 1, Burst: 2, MaxBody: 10})
	h := g.Wrap(Route{PerSession: true}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 100)
		if _, err := r.Body.Read(buf); err != nil && !strings.Contains(err.Error(), "EOF") {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		}
	}))
	do := func(host, origin, body, session string, remote string) int {
		r := httptest.NewRequest("POST", "http://"+host+"/x", strings.NewReader(body))
		r.Host = host
		r.RemoteAddr = remote
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		if session != "" {
			r.Header.Set("Mcp-Session-Id", session)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if c := do("evil.example:80", "", "x", "", "127.0.0.1:1"); c != 403 {
		t.Errorf("a rebinding Host: %d", c)
	}
	if c := do("127.0.0.1:80", "https://evil.example", "x", "", "127.0.0.1:1"); c != 403 {
		t.Errorf("a foreign Origin: %d", c)
	}
	if c := do("127.0.0.1:80", "", strings.Repeat("y", 100), "s0", "127.0.0.1:1"); c != 413 {
		t.Errorf("a body over the cap: %d", c)
	}
	// The limit is per caller: each MCP session its own bucket.
	for i := 0; i < 20; i++ {
		if c := do("127.0.0.1:80", "", "x", fmt.Sprintf("session-%d", i), "127.0.0.1:1"); c != 200 {
			t.Fatalf("session %d was limited by the others: %d", i, c)
		}
	}
	codes := map[int]int{}
	for i := 0; i < 5; i++ {
		codes[do("127.0.0.1:80", "", "x", "one-session", "127.0.0.1:1")]++
	}
	if codes[429] == 0 {
		t.Errorf("one caller over its rate was not limited: %v", codes)
	}
	// Off MCP, an invented Mcp-Session-Id is no way around the limit.
	other := g.Wrap(Route{}, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	codes = map[int]int{}
	for i := 0; i < 5; i++ {
		r := httptest.NewRequest("POST", "http://127.0.0.1/y", strings.NewReader("x"))
		r.RemoteAddr = "127.0.0.2:1"
		r.Header.Set("Mcp-Session-Id", fmt.Sprintf("invented-%d", i))
		w := httptest.NewRecorder()
		other.ServeHTTP(w, r)
		codes[w.Code]++
	}
	if codes[429] == 0 {
		t.Errorf("invented session ids escaped a non-MCP route's limit: %v", codes)
	}
	// A flood of invented session ids does not grow the limiter map
	// without bound.
	for i := 0; i < maxLimiters+500; i++ {
		g.allow(fmt.Sprintf("flood-%d", i))
	}
	if n := g.limits.Len(); n > maxLimiters {
		t.Errorf("%d limiters kept", n)
	}
}

// A cross-site browser request is refused unless its route allows it; a
// refused request's connection is closed.
func TestCrossSiteAndRefusals(t *testing.T) {
	g := New(Config{})
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	deny := func(w http.ResponseWriter, r *http.Request) (string, bool) {
		http.Error(w, "no", http.StatusUnauthorized)
		return "", false
	}
	for _, tc := range []struct {
		rt    Route
		site  string
		code  int
		close bool
	}{
		{Route{}, "cross-site", 403, true},
		{Route{}, "Cross-Site", 403, true},
		{Route{}, "same-origin", 200, false},
		{Route{}, "none", 200, false},
		{Route{}, "", 200, false},
		{Route{CrossSite: true}, "cross-site", 200, false},
		{Route{Auth: deny}, "", 401, true},
	} {
		r := httptest.NewRequest("GET", "http://127.0.0.1:8080/x", nil)
		r.RemoteAddr = "127.0.0.1:5000"
		if tc.site != "" {
			r.Header.Set("Sec-Fetch-Site", tc.site)
		}
		w := httptest.NewRecorder()
		g.Wrap(tc.rt, ok).ServeHTTP(w, r)
		if w.Code != tc.code || (w.Header().Get("Connection") == "close") != tc.close {
			t.Errorf("%+v Sec-Fetch-Site %q: %d, Connection %q; want %d, close %v", tc.rt, tc.site, w.Code, w.Header().Get("Connection"), tc.code, tc.close)
		}
	}
}

// Listener closes connections past its bounds as they arrive, and counts
// a closed one out.
func TestListenerBounds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listener(ln, 2, 3)
	defer l.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func(from string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
	a1, a2, a3 := dial("127.0.0.1"), dial("127.0.0.1"), dial("127.0.0.1")
	if closed(a1) || closed(a2) || !closed(a3) {
		t.Fatal("the third connection of one address must be closed, the first two kept")
	}
	b1, b2 := dial("127.0.0.2"), dial("127.0.0.2")
	if closed(b1) || !closed(b2) {
		t.Fatal("past the total of 3, a connection is closed whatever its address")
	}
	first := <-accepted
	first.Close()
	if c := dial("127.0.0.3"); closed(c) {
		t.Fatal("a closed connection frees its place")
	}
}
