package integration

// Hostile callers of the HTTP listener: a web page in the operator's
// browser (simple cross-origin requests, DNS rebinding of its own name to
// the server's address) and a remote caller (rates, sizes). Each test was
// seen failing on the code before its fix.

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// doorRoutes are one request per kind of route of a server started with
// the playground and the LibreChat Code API without credentials (the
// configuration a local LibreChat uses).
func doorRoutes(base string) []struct{ method, url, body string } {
	return []struct{ method, url, body string }{
		{"POST", base + "/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"page","version":"1"}}}`},
		{"POST", base + "/playground/api/run", `{"language":"python","code":"print(1)","conversation":"c1"}`},
		{"GET", base + "/playground/api/files?conversation=c1", ""},
		{"GET", base + "/playground/api/runtimes", ""},
		{"GET", base + "/", ""},
		{"POST", base + "/v1/librechat/exec", `{"lang":"py","code":"print(1)"}`},
		{"GET", base + "/v1/librechat/files/sess_0123456789ab", ""},
		{"GET", base + "/files/sess_0123456789ab/a.txt?exp=1&sig=00", ""},
		{"GET", base + "/metrics", ""},
	}
}

// Every route refuses a foreign Origin (a page's simple text/plain POST)
// and a Host that is not the server's (a rebinding page): the playground
// and --librechat-no-auth routes used to take both and run code.
func TestHostileForeignOriginAndHost(t *testing.T) {
	parallel(t)
	s := startData(t, []string{"--backend", "native"}, "--librechat-no-auth")
	base := s.base()
	port := base[strings.LastIndex(base, ":")+1:]
	for _, rt := range doorRoutes(base) {
		for _, tc := range []struct{ name, origin, host string }{
			{"foreign Origin", "https://evil.example", ""},
			{"rebinding Host", "", "evil.example:" + port},
			{"rebinding Host and its own Origin", "http://evil.example:" + port, "evil.example:" + port},
		} {
			hdr := map[string]string{"Content-Type": "text/plain", "Accept": "application/json, text/event-stream"}
			if tc.origin != "" {
				hdr["Origin"] = tc.origin
			}
			if tc.host != "" {
				hdr["Host"] = tc.host
			}
			if code, b := request(t, rt.method, rt.url, rt.body, hdr); code != http.StatusForbidden {
				t.Errorf("%s %s with %s: %d %q, want 403", rt.method, rt.url, tc.name, code, firstLine(b))
			}
		}
	}
	// The server's own page still works: same origin, its own Host.
	if code, _ := request(t, "GET", base+"/playground/api/runtimes", "", map[string]string{"Origin": base}); code != 200 {
		t.Errorf("the playground's own request: %d", code)
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}

// Rate limits are per caller: 60 MCP clients on the default limits, each
// in its own session, never see a 429 (they used to share one bucket of
// 50 requests per second).
func TestHostileRateLimitPerCaller(t *testing.T) {
	parallel(t)
	s := startServe(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := 0; i < 60; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			post := func(sid, body string) (*http.Response, error) {
				req, _ := http.NewRequest("POST", s.url, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				if sid != "" {
					req.Header.Set("Mcp-Session-Id", sid)
				}
				return http.DefaultClient.Do(req)
			}
			resp, err := post("", fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"agent-%d","version":"1"}}}`, i))
			if err != nil {
				return
			}
			sid := resp.Header.Get("Mcp-Session-Id")
			resp.Body.Close()
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
			for j := 0; j < 8; j++ {
				resp, err := post(sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, j+2))
				if err != nil {
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	if codes[429] > 0 || codes[200] != 60*9 {
		t.Errorf("60 agents in their own sessions: %v (want %d x 200, no 429)", codes, 60*9)
	}
}
