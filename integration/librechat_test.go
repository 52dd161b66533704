package integration

// The LibreChat Code API, driven by the real LibreChat clients from npm
// (integration/mcpclient/librechat.cjs) and checked on the wire.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const lcKey = "lc-test-api-key"

// lcServer starts srt-mcp with the Code API accepting an API key and
// Bearer JWTs signed by a fresh Ed25519 key; it returns the base URL and a
// token for user sub.
func lcServer(t *testing.T, extra ...string) (string, func(sub string, key ed25519.PrivateKey) string, ed25519.PrivateKey) {
	t.Helper()
	pemFile, mint, priv := lcKeys(t)
	d := startData(t, []string{"--backend", "native"}, append([]string{"--librechat-api-key", lcKey, "--librechat-jwt-public-key", pemFile}, extra...)...)
	return d.base() + "/v1/librechat", mint, priv
}

// lcKeys makes a fresh Ed25519 key: the public key's PEM file (for
// --librechat-jwt-public-key), a minter of LibreChat's Code API tokens,
// and the private key.
func lcKeys(t *testing.T) (string, func(sub string, key ed25519.PrivateKey) string, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(pub)
	pemFile := filepath.Join(reachableTempDir(t), "codeapi.pub.pem")
	if err := os.WriteFile(pemFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	mint := func(sub string, key ed25519.PrivateKey) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"iss": "librechat", "aud": "codeapi", "sub": sub,
			"iat": time.Now().Unix(), "exp": time.Now().Add(5 * time.Minute).Unix(), "jti": "t1", "tenant_id": "legacy"})
		tok.Header["kid"] = "lc-codeapi-2026-05"
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return pemFile, mint, priv
}

func TestLibreChatRealClients(t *testing.T) {
	parallel(t)
	dir := mcpClients(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "lc-modern")); err != nil {
		if os.Getenv("SRT_MCP_REQUIRE_CLIENTS") == "1" {
			t.Fatal("the LibreChat clients are not installed (npm ci in integration/mcpclient)")
		}
		t.Skip("no LibreChat clients")
	}
	base, mint, priv := lcServer(t)
	for _, gen := range []struct{ name, version string }{{"modern", "3.9.2"}, {"legacy", "3.1.63"}} {
		t.Run(gen.name+"-"+gen.version, func(t *testing.T) {
			runLibreChatClient(t, dir, gen.name, base, mint("65f0c0ffee0000000000user", priv))
		})
	}
}

// runLibreChatClient runs librechat.cjs of generation gen ("modern": with
// the JWT jwt; "legacy": with the API key lcKey) against the Code API at
// base, and fails the test unless every check passed.
func runLibreChatClient(t *testing.T, dir, gen, base, jwt string) {
	t.Helper()
	cmd := exec.Command("node", "librechat.cjs", gen)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LIBRECHAT_CODE_BASEURL="+base)
	if gen == "modern" {
		cmd.Env = append(cmd.Env, "CODE_JWT="+jwt)
	} else {
		cmd.Env = append(cmd.Env, "LIBRECHAT_CODE_API_KEY="+lcKey)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if checks := nodeChecks(t, "librechat "+gen, out); err != nil || checks < 7 {
		t.Fatalf("librechat.cjs %s against %s: %v (%d checks)\n%s\nstderr: %s", gen, base, err, checks, out, stderr.String())
	}
}

func TestLibreChatWire(t *testing.T) {
	parallel(t)
	base, mint, priv := lcServer(t, "--librechat-rate-scale", "0.1", "--max-upload-bytes", "1000")
	do := func(method, url string, body io.Reader, hdr map[string]string) (int, map[string]any, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, url, body)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v, resp.Header
	}
	key := map[string]string{"X-API-Key": lcKey, "Content-Type": "application/json"}
	execBody := func(lang, code string) io.Reader {
		b, _ := json.Marshal(map[string]any{"lang": lang, "code": code, "user_id": "u1", "LIBRECHAT_CODE_API_KEY": lcKey, "codeSessionKey": "x"})
		return bytes.NewReader(b)
	}
	// Credentials.
	if c, _, _ := do("POST", base+"/exec", execBody("py", "print(1)"), map[string]string{"Content-Type": "application/json"}); c != 401 {
		t.Fatalf("no credentials: %d", c)
	}
	if c, _, _ := do("POST", base+"/exec", execBody("py", "print(1)"), map[string]string{"X-API-Key": "wrong"}); c != 401 {
		t.Fatalf("a wrong key: %d", c)
	}
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	if c, _, _ := do("POST", base+"/exec", execBody("py", "print(1)"), map[string]string{"Authorization": "Bearer " + mint("u1", other)}); c != 401 {
		t.Fatalf("a JWT signed by another key: %d", c)
	}
	// A doubled slash (a base URL ending in /) still reaches exec, and the
	// API key in the body is ignored.
	c, v, _ := do("POST", strings.Replace(base, "/v1/librechat", "/v1/librechat/", 1)+"/exec", execBody("py", "print(6*7)"), map[string]string{"Authorization": "Bearer " + mint("u1", priv), "Content-Type": "application/json"})
	if c != 200 || v["stdout"] != "42\n" || v["session_id"] == "" {
		t.Fatalf("//exec with a JWT: %d %v", c, v)
	}
	if st, _ := v["stats"].(map[string]any); st == nil || st["wall_time_ms"] == nil || st["cpu_ms"] == nil || st["memory_bytes"].(float64) < 1<<20 {
		t.Errorf("exec stats (cpu, memory, wall time): %v", v["stats"])
	}
	if c, v, _ := do("POST", base+"/exec", execBody("cobol", "x"), key); c != 400 || v["error"] != "Unsupported language: cobol" {
		t.Fatalf("an unsupported language: %d %v", c, v)
	}
	// Upload over the limit: 413.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "big.bin")
	_, _ = fw.Write(make([]byte, 2000))
	mw.Close()
	if c, v, _ := do("POST", base+"/upload", &buf, map[string]string{"X-API-Key": lcKey, "Content-Type": mw.FormDataContentType()}); c != 413 || v["error"] != "File size limit exceeded" {
		t.Fatalf("an oversized upload: %d %v", c, v)
	}
	// Missing objects: 404 with a JSON error.
	if c, v, _ := do("GET", base+"/download/sess_000000000000/abc", nil, key); c != 404 || v["error"] == nil {
		t.Fatalf("a missing download: %d %v", c, v)
	}
	if c, v, _ := do("GET", base+"/health", nil, nil); c != 200 || v["status"] != "ok" {
		t.Fatalf("health: %d %v", c, v)
	}
	// Rate limit (scaled to 2 execs per 30 s): 429 with retry_after_seconds.
	var last int
	var lastV map[string]any
	var hdr http.Header
	for i := 0; i < 4; i++ {
		last, lastV, hdr = do("POST", base+"/exec", execBody("py", "print(1)"), key)
	}
	if last != 429 || lastV["error"] != "rate_limited" || lastV["retry_after_seconds"] == nil || hdr.Get("Retry-After") == "" {
		t.Fatalf("rate limit: %d %v", last, lastV)
	}
}

// TestLibreChatNoAuthNeedsLoopback: unauthenticated access is refused on
// an open bind unless asked for twice.
func TestLibreChatNoAuthNeedsLoopback(t *testing.T) {
	parallel(t)
	cmd := exec.Command(nwBin(t), "serve", "--host", "0.0.0.0", "--port", "0", "--token", "x", "--librechat-no-auth", "--state-dir", filepath.Join(reachableTempDir(t), "s"))
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--librechat-no-auth") {
		t.Fatalf("want exit 2 naming --librechat-no-auth, got %v %s", err, out)
	}
}
