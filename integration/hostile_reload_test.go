package integration

// A narrowed ceiling (the settings file reloaded) reaches everything that
// runs afterwards: the interpreters the warm pool started under the old
// ceiling, and a running workspace's interpreter at its next cell (which
// says it restarted). Seen failing before the fix: both read a path the
// new ceiling denies.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHostileReloadReachesInterpreters(t *testing.T) {
	parallel(t)
	requirePythonData(t)
	dir := reachableTempDir(t)
	// A host path inside what data sandboxes see (the system view: /usr,
	// /etc, ...), which only root may create.
	if os.Geteuid() != 0 {
		t.Skip("needs root to place a file in the sandboxes' system view")
	}
	secretDir, err := os.MkdirTemp("/usr/local/share", "srt-mcp-test-secrets-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(secretDir) })
	if err := os.Chmod(secretDir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(secretDir, "secret.txt")
	if err := os.WriteFile(secret, []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "srt-mcp.json")
	write := func(body string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"max-timeout": 120}`)
	s := startServe(t, "--backend", "native", "--config", path, "--warm-pool", "1")
	d := &dataServer{mcpServer: s, t: t, c: connect(t, s.url)}
	sid := d.wantErrorless("create_session", map[string]any{"language": "python"})["session_id"].(string)
	read := fmt.Sprintf("try:\n    print(open(%q).read())\nexcept OSError as e:\n    print('DENIED', type(e).__name__)", secret)
	v := d.wantErrorless("execute_code", map[string]any{"code": read, "language": "python", "session_id": sid})
	if !strings.Contains(fmt.Sprint(v["stdout"]), "host secret") {
		t.Fatalf("the path is readable before the narrowing (the test's premise): %v", v)
	}
	base := strings.TrimSuffix(s.url, "/mcp")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, _, raw := httpGet(t, base+"/healthz")
		if strings.Contains(string(raw), `"warm_pool_ready":1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the warm pool did not fill: %s", raw)
		}
	}

	write(fmt.Sprintf(`{"max-timeout": 120, "filesystem": {"denyRead": [%q]}}`, secretDir))
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(s.logs.String(), "settings file reloaded"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no reload in 10 s:\n%s", s.logs.String())
		}
	}
	// The running workspace: its next cell runs under the new ceiling, and
	// says the interpreter restarted.
	v = d.wantErrorless("execute_code", map[string]any{"code": read, "language": "python", "session_id": sid})
	if strings.Contains(fmt.Sprint(v["stdout"]), "host secret") {
		t.Errorf("a workspace's interpreter started before the narrowing read a path it now denies: %v", v["stdout"])
	}
	if !strings.Contains(fmt.Sprint(v["note"]), "settings") {
		t.Errorf("the reply does not say the interpreter restarted for the new settings: note %q", v["note"])
	}
	// A new workspace (from the warm pool, filled before the narrowing).
	other := connect(t, s.url)
	v2, _ := callTool(t, other, "execute_code", map[string]any{"code": read, "language": "python"})
	if strings.Contains(fmt.Sprint(v2["stdout"]), "host secret") {
		t.Errorf("a warm-pool interpreter started before the narrowing read a path it now denies: %v", v2["stdout"])
	}
}
