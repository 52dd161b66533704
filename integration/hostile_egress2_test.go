package integration

// Hostile tests of issue 27 (TLS interception CA, masked credentials)
// from outside the run that uses them: the next run of the same
// operator's settings, another caller, the operator's settings file.

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/srt-mcp/srt-mcp/tlsca"
)

// egMaskedFileSettings writes settings that mask one credential file for
// api.example.com (cleartext injection allowed, so no upstream is needed:
// the runs only look at the filesystem).
func egMaskedFileSettings(t *testing.T, dir, file string) string {
	t.Helper()
	s := map[string]any{
		"credentials": map[string]any{
			"files":                []any{map[string]any{"path": file, "mode": "mask", "injectHosts": []string{"api.example.com"}}},
			"allowPlaintextInject": true,
		},
	}
	b, _ := json.Marshal(s)
	path := filepath.Join(dir, "settings.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A masked credential file inside a writable root: the sandbox sees a
// stand-in bound over it, but the directories between the writable root
// and the file are not pinned (deny_read targets' are), so one run moves
// the directory away and writes a decoy at the masked name; the next run
// masks the decoy and reads the real value at the name it moved it to.
func TestHostileEgressMaskedFileMovedAway(t *testing.T) {
	parallel(t)
	const real = "REAL-NPM-TOKEN-0123456789"
	w := sbDir(t)
	write(t, filepath.Join(w, "cfg", "token"), real)
	// The user's own project (one uid for the user and the sandbox
	// without root; as root, the sandbox user's).
	handOver(t, filepath.Join(w, "cfg"))
	if err := os.Chmod(filepath.Join(w, "cfg", "token"), 0o600); err != nil {
		t.Fatal(err)
	}
	settings := egMaskedFileSettings(t, t.TempDir(), filepath.Join(w, "cfg", "token"))
	flags := append(pinned("api.example.com"), "--allow-domain", "api.example.com:1", "--allow-write", ".", "--settings", settings)

	// A masked file inside a path the run may write is refused: the run
	// could move it away (or replace it, and the proxy would send what
	// the sandbox chose as the credential).
	r := sh(t, w, flags, `cat cfg/token; echo; mv cfg cfg.moved && mkdir cfg && echo decoy > cfg/token && echo moved`)
	if strings.Contains(r.stdout, real) || strings.Contains(r.stdout, "moved") {
		t.Fatalf("a run with a masked file in a writable path ran: %q", r.stdout)
	}
	if msg := egErrorMessage(r); !strings.Contains(msg, "credentials.files") || !strings.Contains(msg, "may write") {
		t.Fatalf("the refusal must name the masked file and why: %q %q", r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(w, "cfg", "token")); err != nil || string(b) != real {
		t.Errorf("the masked file changed: %q %v", b, err)
	}
}

// tlsTerminate.extraCaCertPaths are roots the PROXY verifies upstreams
// with (and every sandbox's bundle carries). One inside a writable root
// is the sandbox's to choose: a run replaces it with its own CA, and the
// next run's proxy accepts an upstream whose certificate that CA signed,
// sending it the real credential. (The upstream here stands for whoever
// can answer for the injection host on the path: a hostile network, a
// captive DNS; the operator's roots were all that stood in its way.)
func TestHostileEgressExtraCAInWritableRoot(t *testing.T) {
	parallel(t)
	nwRequire(t, "curl")
	up := egStart(t, nil) // its certificate is httptest's, which the operator does not trust
	w := sbDir(t)
	corp, _, err := tlsca.NewCA() // the operator's own corporate root
	if err != nil {
		t.Fatal(err)
	}
	caPath := filepath.Join(w, "certs", "corp-ca.pem")
	write(t, caPath, string(corp))
	handOver(t, filepath.Join(w, "certs"))
	s := map[string]any{
		"network":     map[string]any{"tlsTerminate": map[string]any{"extraCaCertPaths": []string{caPath}}},
		"credentials": map[string]any{"envVars": []any{map[string]any{"name": "EG_TOKEN", "mode": "mask", "injectHosts": []string{"api.example.com"}}}},
	}
	b, _ := json.Marshal(s)
	settings := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(settings, b, 0o644); err != nil {
		t.Fatal(err)
	}
	host := "api.example.com:" + up.port
	flags := append(pinned("api.example.com"), "--allow-domain", host, "--allow-write", ".", "--settings", settings)
	curl := `curl -sS -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer $EG_TOKEN" https://` + host + `/echo`

	// A run that could write an extra CA the proxy trusts is refused.
	r := egRun(t, w, flags, "sh", "-c", `printf '%s' '`+string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw}))+`' > certs/corp-ca.pem && echo planted; `+curl)
	if strings.Contains(r.stdout, "planted") || up.sawSecret() {
		t.Fatalf("a run could replace an extraCaCertPaths file: %q %q", r.stdout, r.stderr)
	}
	if msg := egErrorMessage(r); !strings.Contains(msg, "extraCaCertPaths") {
		t.Fatalf("the refusal must name extraCaCertPaths: %q %q", r.stdout, r.stderr)
	}
}

// The operator's own interception CA (tlsTerminate.caCertPath and
// caKeyPath): its key is what every sandbox's trust rests on, yet a run
// whose view holds it (an allow_read directory the operator also keeps
// the CA in; without root, the key is the user's and so the sandbox's)
// reads it. The CA srt-mcp makes is hidden (state and cache directories);
// the operator's key, and its credential files in deny mode, are not
// treated alike.
func TestHostileEgressOperatorCAKeyInView(t *testing.T) {
	parallel(t)
	certPEM, keyPEM, err := tlsca.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(reachableTempDir(t), "pki")
	write(t, filepath.Join(dir, "ca.pem"), string(certPEM))
	write(t, filepath.Join(dir, "ca-key.pem"), string(keyPEM))
	if err := os.Chmod(filepath.Join(dir, "ca-key.pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// Without root the key is the user's, and the sandbox is the user.
		if err := os.Chown(filepath.Join(dir, "ca-key.pem"), defaultSandboxUID, defaultSandboxUID); err != nil {
			t.Fatal(err)
		}
	}
	s := map[string]any{"network": map[string]any{"tlsTerminate": map[string]any{
		"caCertPath": filepath.Join(dir, "ca.pem"), "caKeyPath": filepath.Join(dir, "ca-key.pem")}}}
	b, _ := json.Marshal(s)
	settings := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(settings, b, 0o644); err != nil {
		t.Fatal(err)
	}
	w := sbDir(t)
	flags := append(pinned("api.example.com"), "--allow-domain", "api.example.com:443", "--allow-read", dir, "--settings", settings)
	r := sh(t, w, flags, `cat `+filepath.Join(dir, "ca-key.pem")+` 2>&1; true`)
	if os.Geteuid() == 0 {
		// As root the key belongs to another uid than srt-mcp's (the
		// sandbox's): one who could replace it. It is not used at all.
		if r.code == 0 || !strings.Contains(r.stderr, "belongs to uid") {
			t.Fatalf("a CA key of another uid: code %d %q %q", r.code, r.stdout, r.stderr)
		}
		return
	}
	if r.code != 0 && !strings.Contains(r.stdout, "PRIVATE KEY") {
		t.Fatalf("run: code %d %q %q", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "PRIVATE KEY") {
		t.Errorf("the sandbox read the interception CA's private key its own proxy uses (and every sandbox trusts): %.60q", r.stdout)
	}
}

// srt-mcp exec keeps its CA in its private cache directory, hiding that
// one directory from the sandbox. The cache is $XDG_RUNTIME_DIR/srt-mcp
// when the variable is set and ~/.cache/srt-mcp otherwise, so a user who
// runs srt-mcp exec both ways (a desktop terminal, then ssh or cron) has
// two CAs, and a run of one kind reads the other's private key in its
// view of the home directory. Likewise the key a non-root srt-mcp serve
// keeps in its default state directory (~/.local/state/srt-mcp).
func TestHostileEgressOtherCAKeysInView(t *testing.T) {
	parallel(t)
	if os.Geteuid() != 0 {
		t.Skip("runs srt-mcp exec as another user (setpriv)")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv is not installed")
	}
	const nobody = "65534"
	base := reachableTempDir(t)
	home, rt := filepath.Join(base, "home"), filepath.Join(base, "run")
	for _, d := range []string{home, rt} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	settings := filepath.Join(base, "settings.json")
	if err := os.WriteFile(settings, []byte(`{"network":{"tlsTerminate":{}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(env []string, script string) string {
		t.Helper()
		args := append([]string{"--reuid=" + nobody, "--regid=" + nobody, "--clear-groups", "env", "-i", "PATH=/usr/bin:/bin", "HOME=" + home},
			env...)
		args = append(args, nwBin(t), "exec", "--cwd", home, "--settings", settings, "--allow-domain", "example.com", "--", "sh", "-c", script)
		out, err := exec.Command("setpriv", args...).CombinedOutput()
		if err != nil {
			t.Logf("run: %v", err)
		}
		return string(out)
	}
	// An ssh session: no XDG_RUNTIME_DIR, the CA goes to ~/.cache.
	out := run(nil, "true")
	cacheKey := filepath.Join(home, ".cache", "srt-mcp", "egress-ca", "egress-ca-key.pem")
	if _, err := os.Stat(cacheKey); err != nil {
		t.Fatalf("setup: no CA in ~/.cache after a run without XDG_RUNTIME_DIR: %v %s", err, out)
	}
	// The user's own srt-mcp serve (default state directory).
	stateCA := filepath.Join(home, ".local", "state", "srt-mcp", "egress-ca")
	if _, _, err := tlsca.LoadOrCreateCA(stateCA); err != nil {
		t.Fatal(err)
	}
	handOverTo := func(dir string) {
		_ = filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
			if err == nil {
				err = os.Lchown(p, 65534, 65534)
			}
			return err
		})
	}
	handOverTo(filepath.Join(home, ".local"))
	// A desktop terminal: XDG_RUNTIME_DIR set, its own cache and CA.
	out = run([]string{"XDG_RUNTIME_DIR=" + rt}, `cat `+cacheKey+` 2>/dev/null | head -1; echo; cat `+filepath.Join(stateCA, "egress-ca-key.pem")+` 2>/dev/null | head -1; echo ran`)
	if !strings.Contains(out, "ran") {
		t.Fatalf("run: %s", out)
	}
	if n := strings.Count(out, "PRIVATE KEY"); n > 0 {
		t.Errorf("a sandbox read %d interception CA key(s) of srt-mcp's other caches or state directory in its view of the home directory: %q", n, out)
	}
}

// egAuditFlood is Python that sends n requests to the run's proxy, each
// with a method of methodLen bytes (a token: any length the request head
// allows) and an ambiguous target, which the proxy refuses without an
// upstream; each refusal is a request record.
func egAuditFlood(host string, n, methodLen int) string {
	return fmt.Sprintf(`python3 -c '
import os, socket, base64, urllib.parse as p
u = p.urlsplit(os.environ["HTTP_PROXY"])
auth = base64.b64encode((p.unquote(u.username) + ":" + p.unquote(u.password)).encode()).decode()
m = "M" * %d
for i in range(%d):
    s = socket.create_connection((u.hostname, u.port))
    s.sendall((m + " http://%s/a/../b HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nProxy-Authorization: Basic " + auth + "\r\n\r\n").encode())
    while s.recv(65536):
        pass
    s.close()
print("sent")
'`, methodLen, n, host, host)
}

// Every request a session's run makes through its proxy is a line of the
// session's audit log, which lives in the state directory beside every
// quota and is kept after the session ends. The line carries the method
// as the sandbox spelled it, of any length the request head allows
// (256 KiB), and nothing bounds how many lines a run writes: a caller
// fills the host's disk from inside one session, at the proxy's speed,
// with requests that never leave the host.
func TestHostileEgressAuditFlood(t *testing.T) {
	parallel(t)
	up := nwStart(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }), false)
	host := "api.example.com:" + up.port
	state := filepath.Join(reachableTempDir(t), "state")
	srv, err := startServeEnv(t, nil, append(pinned("api.example.com"), "--allow-domain", host, "--state-dir", state)...)
	if err != nil {
		t.Fatal(err)
	}
	c := connect(t, srv.url)
	sv, isErr := callTool(t, c, "create_session", map[string]any{"language": "python"})
	sid, _ := sv["session_id"].(string)
	if isErr || sid == "" {
		t.Fatalf("create_session: %v", sv)
	}
	audit := filepath.Join(state, "audit", sid+".jsonl")
	size := func() int64 {
		fi, err := os.Stat(audit)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	t.Run("long-methods", func(t *testing.T) {
		before := size()
		v, _ := callTool(t, c, "execute_code", map[string]any{"session_id": sid, "command": egAuditFlood(host, 32, 200_000)})
		if v["exit_code"] != float64(0) {
			t.Fatalf("flood: %.400v", v)
		}
		if grew := size() - before; grew > 1<<20 {
			t.Errorf("32 refused requests grew the session's audit log by %d bytes: a request's method is recorded at any length", grew)
		}
	})
	t.Run("sessionless-server-log", func(t *testing.T) {
		// A run without a session writes its records to the server's log.
		before := len(srv.logs.String())
		v, _ := callTool(t, c, "execute_code", map[string]any{"command": egAuditFlood(host, 32, 200_000)})
		if v["exit_code"] != float64(0) {
			t.Fatalf("flood: %.400v", v)
		}
		if grew := len(srv.logs.String()) - before; grew > 1<<20 {
			t.Errorf("32 refused requests of a run without a session grew the server's log by %d bytes", grew)
		}
	})
	t.Run("many-requests", func(t *testing.T) {
		before := size()
		v, _ := callTool(t, c, "execute_code", map[string]any{"session_id": sid, "command": egAuditFlood(host, 20_000, 8)})
		if v["exit_code"] != float64(0) {
			t.Fatalf("flood: %.400v", v)
		}
		if grew := size() - before; grew > 4<<20 {
			t.Errorf("one run grew the session's audit log by %d bytes with refused requests that never left the host: nothing bounds it", grew)
		}
	})
}

// egErrorMessage is the message of a run's error event ("" if none).
func egErrorMessage(r nwResult) string {
	for _, e := range r.events {
		if e["type"] == "error" {
			return fmt.Sprint(e["message"])
		}
	}
	return ""
}
