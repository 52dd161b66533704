package integration

// Everything a caller can make the server hold has a bound: idle
// connections, connections per address, MCP sessions per key, per address
// and in all (and what each holds), output retained, a principal's share of
// the execution slots; a browser's GET changes nothing and a cross-site
// request is refused; /metrics answers keys only. Each test was seen
// failing on the code before its fix.

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// openConn dials the server from a loopback address of its own (Linux
// routes all of 127/8 to lo), so one test can play several addresses.
func openConn(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer tells whether the server closed c (a read sees EOF or a
// reset within wait).
func closedByServer(c net.Conn, wait time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue // a reply (a 503 before the close)
		}
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
}

// Idle keep-alive connections are closed after --http-idle-timeout, and one
// address holds at most --max-connections-per-address: the rest are closed
// at once, while other addresses are served as before.
func TestHostileIdleConnections(t *testing.T) {
	parallel(t)
	s := startServe(t, "--http-idle-timeout", "2s", "--max-connections-per-address", "20")
	addr := strings.TrimSuffix(strings.TrimPrefix(s.url, "http://"), "/mcp")
	// A keep-alive connection that made one request, then idles.
	c := openConn(t, "127.0.0.1", addr)
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	if n, err := c.Read(buf); err != nil || !bytes.Contains(buf[:n], []byte("200 OK")) {
		t.Fatalf("healthz on a keep-alive connection: %v %q", err, buf[:n])
	}
	if !closedByServer(c, 6*time.Second) {
		t.Errorf("an idle keep-alive connection was still open 6 s after its request (--http-idle-timeout 2s)")
	}
	// One address opens 40 connections and sends nothing.
	var conns []net.Conn
	for i := 0; i < 40; i++ {
		conns = append(conns, openConn(t, "127.0.0.2", addr))
	}
	time.Sleep(500 * time.Millisecond)
	open := 0
	for _, c := range conns {
		if !closedByServer(c, 100*time.Millisecond) {
			open++
		}
	}
	if open > 20 {
		t.Errorf("one address holds %d connections, more than --max-connections-per-address 20", open)
	}
	// Another address is served meanwhile.
	if code, _, _ := httpGet(t, strings.TrimSuffix(s.url, "/mcp")+"/healthz"); code != 200 {
		t.Errorf("another address while one holds its maximum: %d", code)
	}
}

// MCP sessions are bounded per key and per address (and in all), and what
// one holds is small: a key's 4th session past --max-mcp-sessions-per-caller
// 3 is refused with a message naming the flag (another key's is not), a
// closed session frees its place, and an initialize with a 1 MiB clientInfo
// is refused (each such session used to hold its megabyte).
func TestHostileMCPSessionBounds(t *testing.T) {
	parallel(t)
	s := startTenants(t, "--max-mcp-sessions-per-caller", "3")
	sids := aliceSessions(t, s, 3)
	code, hdr, body := rawMCP(t, s.url, aliceToken, "", initBody("alice-3"))
	if code < 400 || hdr.Get("Mcp-Session-Id") != "" || !strings.Contains(body, "max-mcp-sessions-per-caller") {
		t.Errorf("alice's 4th MCP session: %d %q (want a refusal naming --max-mcp-sessions-per-caller)", code, body)
	}
	if code, hdr, body := rawMCP(t, s.url, bobToken, "", initBody("bob")); code != 200 || hdr.Get("Mcp-Session-Id") == "" {
		t.Errorf("bob's first session while alice holds her maximum: %d %s", code, body)
	}
	req, _ := http.NewRequest("DELETE", s.url, nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set("Mcp-Session-Id", sids[0])
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode >= 300 {
		t.Fatalf("DELETE: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}
	if code, hdr, body := rawMCP(t, s.url, aliceToken, "", initBody("alice-again")); code != 200 || hdr.Get("Mcp-Session-Id") == "" {
		t.Errorf("alice's session after she closed one: %d %s", code, body)
	}
	huge := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"` +
		strings.Repeat("x", 1<<20) + `","version":"1"}}}`
	if code, hdr, body := rawMCP(t, s.url, bobToken, "", huge); code < 400 || hdr.Get("Mcp-Session-Id") != "" {
		t.Errorf("an initialize with a 1 MiB clientInfo: %d %.200s (want a refusal)", code, body)
	}
}

// A browser's GET changes nothing (an <img> tag sends no Origin): listing a
// playground conversation that does not exist creates no session; a
// cross-site request (Sec-Fetch-Site) is refused on every route but the
// signed downloads, which are links meant to be followed from anywhere.
func TestHostileBrowserRequests(t *testing.T) {
	parallel(t)
	s := startServe(t, "--backend", "native")
	base := strings.TrimSuffix(s.url, "/mcp")
	for i := 0; i < 15; i++ {
		if code, _, body := httpGet(t, fmt.Sprintf("%s/playground/api/files?conversation=img-%d", base, i)); code != 200 {
			t.Fatalf("listing a new conversation: %d %s", code, body)
		}
	}
	if n := healthzSessions(t, base); n != 0 {
		t.Errorf("15 GETs of new conversations left %d sessions (a GET must change nothing)", n)
	}
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/playground/api/runtimes", ""},
		{"GET", "/playground/api/files?conversation=c1", ""},
		{"POST", "/mcp", initBody("page")},
		{"GET", "/metrics", ""},
	} {
		code, b := request(t, tc.method, base+tc.path, tc.body, map[string]string{
			"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
		if code != http.StatusForbidden {
			t.Errorf("cross-site %s %s: %d %q (want 403)", tc.method, tc.path, code, firstLine(b))
		}
	}
	for _, site := range []string{"same-origin", "none"} {
		if code, _ := request(t, "GET", base+"/playground/api/runtimes", "", map[string]string{"Sec-Fetch-Site": site}); code != 200 {
			t.Errorf("Sec-Fetch-Site %s: %d", site, code)
		}
	}
}

// healthzSessions reads the open data sessions from /metrics.
func healthzSessions(t *testing.T, base string) int {
	t.Helper()
	_, _, raw := httpGet(t, base+"/metrics")
	m := regexp.MustCompile(`(?m)^srtmcp_sessions_active (\d+)`).FindSubmatch(raw)
	if m == nil {
		t.Fatalf("/metrics has no srtmcp_sessions_active: %.300s", raw)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// With API keys, /metrics answers only them (and --metrics-token), and a
// refused request's connection is closed (a refused caller holds nothing).
func TestHostileMetricsAndRefusals(t *testing.T) {
	parallel(t)
	s := startTenants(t)
	base := s.base()
	if code, _, _ := httpGet(t, base+"/metrics"); code != http.StatusUnauthorized {
		t.Errorf("/metrics without a key when keys are configured: %d (want 401)", code)
	}
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/metrics with a key: %d", resp.StatusCode)
	}
	for _, tc := range []struct{ what, token string }{{"no key", ""}, {"a wrong key", "wrong-token-0123456789"}} {
		req, _ := http.NewRequest("POST", s.url, strings.NewReader(initBody("x")))
		req.Header.Set("Content-Type", "application/json")
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || !resp.Close {
			t.Errorf("%s: %d, Connection: close %v (want 401 and the connection closed)", tc.what, resp.StatusCode, resp.Close)
		}
	}
}

// The output executions hold stays within --retained-output while they
// run (it grew to the sum of every running execution's cap): output past
// the budget is dropped and the execution says its events were cut.
func TestHostileRetainedOutputBudget(t *testing.T) {
	parallel(t)
	s := startServe(t, "--backend", "native", "--retained-output", "1M", "--max-output", "4M")
	cs := goSDK(t, s.url, "")
	var ids []string
	for i := 0; i < 3; i++ {
		v, isErr, text := sdkCall(t, cs, "execute_code_async", map[string]any{"command": "head -c 900000 /dev/zero | tr '\\0' x; sleep 30"})
		if isErr {
			t.Fatalf("execute_code_async: %s", text)
		}
		ids = append(ids, v["execution_id"].(string))
	}
	base := strings.TrimSuffix(s.url, "/mcp")
	re := regexp.MustCompile(`(?m)^srtmcp_retained_output_bytes (\S+)`)
	var held float64
	// Until the runs have printed all they print (their output reached the
	// budget, 2.7 MB being printed, and stopped growing), or the budget is
	// seen broken. (Stopping at the first pause took one run's output on a
	// loaded machine, the others not started yet, for all of it.)
	last := -1.0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		_, _, raw := httpGet(t, base+"/metrics")
		if m := re.FindSubmatch(raw); m != nil {
			held, _ = strconv.ParseFloat(string(m[1]), 64)
		}
		if held > 1.1*(1<<20) || (held >= 0.9*(1<<20) && held == last) {
			break
		}
		last = held
	}
	if held > 1.1*(1<<20) {
		t.Errorf("running executions hold %.0f bytes of output, more than --retained-output 1M", held)
	}
	cut := 0
	for _, id := range ids {
		v, _, _ := sdkCall(t, cs, "get_execution_status", map[string]any{"execution_id": id})
		if strings.Contains(fmt.Sprint(v["truncated"]), "events") {
			cut++
		}
		sdkCall(t, cs, "cancel_execution", map[string]any{"execution_id": id, "force": true})
	}
	if cut == 0 {
		t.Errorf("no execution says its output was cut for the budget")
	}
}

// With API keys, no key takes every execution slot: with --max-concurrent
// 4 alice runs at most her share (half), and bob still starts his.
func TestHostilePrincipalShares(t *testing.T) {
	parallel(t)
	s := startTenants(t, "--max-concurrent", "4")
	alice, bob := keyClient(t, s.url, aliceToken), keyClient(t, s.url, bobToken)
	started, refused := 0, ""
	for i := 0; i < 4; i++ {
		v, isErr, text := toolText(t, alice, "execute_code_async", map[string]any{"command": "sleep 20"})
		if isErr {
			refused = text
			break
		}
		started++
		defer toolText(t, alice, "cancel_execution", map[string]any{"execution_id": v["execution_id"], "force": true})
	}
	if started > 2 || !strings.Contains(refused, "too_many_executions") {
		t.Errorf("alice started %d of 4 slots (want her share, 2, then too_many_executions): %s", started, refused)
	}
	v, isErr, text := toolText(t, bob, "execute_code_async", map[string]any{"command": "sleep 1"})
	if isErr {
		t.Errorf("bob could not start a run while alice holds her share: %s", text)
	} else {
		toolText(t, bob, "cancel_execution", map[string]any{"execution_id": v["execution_id"], "force": true})
	}
}
