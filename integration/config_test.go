package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The settings file (--config) sets serve's flags; narrowing its allow-list
// applies to the next execution without a restart; a broken file is logged
// and refused, and the settings in force stay.
func TestSettingsFileReload(t *testing.T) {
	parallel(t)
	nwRequire(t, "curl")
	srv := nwStart(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello-from-host") }), false)
	dir := reachableTempDir(t)
	path := filepath.Join(dir, "srt-mcp.json")
	write := func(body string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil { // as editors and ConfigMap volumes replace files
			t.Fatal(err)
		}
	}
	settings := func(domains ...string) string {
		return fmt.Sprintf(`{"allow-ip-range": ["127.0.0.0/8"], "resolve": ["a.test=127.0.0.1", "b.test=127.0.0.1"],
 "allow-domain": [%s], "max-timeout": 120, "filesystem": {"denyWrite": ["~/.ssh"]}}`, `"`+strings.Join(domains, `", "`)+`"`)
	}
	a, b := "a.test:"+srv.port, "b.test:"+srv.port
	write(settings(a, b))
	s := startServe(t, "--backend", "native", "--config", path)
	cs := goSDK(t, s.url, "")
	fetch := func(hostport string) string {
		v, _, _ := sdkCall(t, cs, "execute_code", map[string]any{"command": "curl -sS -o /dev/stdout -w ' %{http_code}' http://" + hostport + "/"})
		return stdoutOf(v)
	}
	if out := fetch(b); !strings.Contains(out, "hello-from-host 200") {
		t.Fatalf("b.test with the first settings: %s", out)
	}
	// The key that is a flag took effect: a call may not ask for more.
	if _, isErr, text := sdkCall(t, cs, "execute_code", map[string]any{"command": "true", "timeout_seconds": 300}); !isErr || !strings.Contains(text, "120") {
		t.Fatalf("max-timeout from the file: isError=%v %s", isErr, text)
	}

	// Narrowed: the next execution is denied, with no restart.
	write(settings(a))
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := fetch(b)
		if strings.Contains(out, "403") && strings.Contains(out, "blocked") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b.test still reachable 10 s after the settings file narrowed: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out := fetch(a); !strings.Contains(out, "hello-from-host 200") {
		t.Fatalf("a.test after narrowing: %s", out)
	}

	// Broken files are refused; the narrowed settings stay in force.
	for _, broken := range []string{`{"allow-domain": [`, `{"allow-domian": ["` + b + `"]}`, `{"allow-domain": ["*"]}`} {
		write(broken)
		time.Sleep(600 * time.Millisecond)
		if out := fetch(b); !strings.Contains(out, "403") {
			t.Fatalf("after the broken file %s, b.test: %s", broken, out)
		}
		if out := fetch(a); !strings.Contains(out, "hello-from-host 200") {
			t.Fatalf("after the broken file %s, a.test: %s", broken, out)
		}
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.wait()
	logs := s.logs.String()
	for _, want := range []string{"settings file reloaded", "settings file refused", "is not one JSON object", `unknown key \"allow-domian\"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %q:\n%s", want, logs)
		}
	}
}

// A settings file that is wrong at start-up stops serve with a usage error
// naming the problem.
func TestSettingsFileInvalidAtStart(t *testing.T) {
	parallel(t)
	dir := reachableTempDir(t)
	path := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(path, []byte(`{"max-timeout": 60, "prot": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(nwBin(t), "serve", "--port", "0", "--state-dir", filepath.Join(dir, "state"), "--config", path).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), `unknown key "prot"`) {
		t.Fatalf("want exit 2 naming the key, got %v: %s", err, out)
	}
}

// A settings file (--config, or srt's --settings) that someone else may
// write is refused: whoever can edit it could widen the ceiling, and the
// server reloads it by itself.
func TestSettingsFileOthersMayWrite(t *testing.T) {
	parallel(t)
	dir := reachableTempDir(t)
	for _, flag := range []string{"--config", "--settings"} {
		path := filepath.Join(dir, "open"+flag+".json")
		body := `{"allow-domain": ["example.com"]}`
		if flag == "--settings" {
			body = `{"network": {"allowedDomains": ["example.com"]}}`
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, 0o666); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second) // a server that accepts it runs on
		out, err := exec.CommandContext(ctx, nwBin(t), "serve", "--port", "0", "--state-dir", filepath.Join(dir, "state"), flag, path).CombinedOutput()
		cancel()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "chmod go-w") {
			t.Errorf("%s with a world-writable file: want exit 2 saying chmod go-w, got %v: %s", flag, err, out)
		}
	}
}
