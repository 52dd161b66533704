package integration

// Data sessions (seed 000): the five tools through a real MCP client
// (mcp-go's Streamable HTTP client here; the marketing example runs through
// the MCP TypeScript SDK), against the built binary with real bubblewrap
// and Debian's Python data stack.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

const testFileSecret = "integration-test-file-secret-0123456789"

type dataServer struct {
	*mcpServer
	t     *testing.T
	state string
	c     *client.Client
}

// startData runs srt-mcp serve with a known state directory and file
// secret, and connects an MCP client to it.
func startData(t *testing.T, backend []string, extra ...string) *dataServer {
	t.Helper()
	requirePythonData(t)
	extra = append(append([]string(nil), backend...), extra...)
	state := filepath.Join(reachableTempDir(t), "state")
	for i, a := range extra {
		if a == "--state-dir" {
			state = extra[i+1]
		}
	}
	s := startServe(t, append([]string{"--state-dir", state, "--file-secret", testFileSecret}, extra...)...)
	return &dataServer{mcpServer: s, t: t, state: state, c: connect(t, s.url)}
}

const dockerImage = "srt-mcp-python:latest"

// dataBackends are the backends the shared data-session suite runs on: one
// suite, a factory (serve's flags) per backend. Docker runs when the engine
// and the image are there; SRT_MCP_DOCKER=1 (make test, as root) makes
// their absence a failure. The engine's socket is root's, so as another
// user the Docker half is skipped.
func dataBackends(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{"native": {"--backend", "native"}}
	if os.Geteuid() != 0 {
		return out
	}
	err := exec.Command("docker", "image", "inspect", dockerImage).Run()
	switch {
	case err == nil:
		out["docker"] = []string{"--backend", "docker", "--image", dockerImage}
	case os.Getenv("SRT_MCP_DOCKER") == "1":
		t.Fatalf("SRT_MCP_DOCKER=1 but the Docker engine or %s is not available (make docker-up image): %v", dockerImage, err)
	}
	return out
}

// forEachBackend runs f as a subtest per backend.
func forEachBackend(t *testing.T, f func(t *testing.T, backend []string)) {
	for _, name := range []string{"native", "docker"} {
		args, ok := dataBackends(t)[name]
		if !ok {
			t.Logf("%s backend: not available here", name)
			continue
		}
		t.Run(name, func(t *testing.T) { f(t, args) })
	}
}

func connect(t *testing.T, url string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25" // a session per client: workspaces are per MCP session
	init.Params.ClientInfo = mcp.Implementation{Name: "srt-mcp-data-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func requirePythonData(t *testing.T) {
	t.Helper()
	out, err := exec.Command("/usr/bin/python3", "-c", "import pandas, seaborn, reportlab, openpyxl, scipy").CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("the Python data profile is not installed (make deps): %v %s", err, out)
		if os.Getenv("SRT_MCP_REQUIRE_CLIENTS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// call runs a tool and returns its structured content and whether the
// result is an error.
func (d *dataServer) call(name string, args map[string]any) (map[string]any, bool) {
	d.t.Helper()
	return callTool(d.t, d.c, name, args)
}

func callTool(t *testing.T, c *client.Client, name string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	v, isErr, _ := toolText(t, c, name, args)
	return v, isErr
}

func (d *dataServer) wantError(name string, args map[string]any, code string) map[string]any {
	d.t.Helper()
	v, isErr := d.call(name, args)
	if !isErr || v["error"] != code || v["message"] == "" {
		d.t.Fatalf("%s %v: want error %s, got %v (isError %v)", name, args, code, v, isErr)
	}
	return v
}

func (d *dataServer) upload(sid, name, content string) string {
	d.t.Helper()
	args := map[string]any{"filename": name, "content_base64": base64.StdEncoding.EncodeToString([]byte(content))}
	if sid != "" {
		args["session_id"] = sid
	}
	v, isErr := d.call("upload_file", args)
	if isErr {
		d.t.Fatalf("upload_file %s: %v", name, v)
	}
	return v["session_id"].(string)
}

func (d *dataServer) python(sid, code string) map[string]any {
	d.t.Helper()
	v, isErr := d.call("run_python", map[string]any{"session_id": sid, "code": code})
	if isErr {
		d.t.Fatalf("run_python: %v", v)
	}
	return v
}

func artifactNames(v map[string]any) []string {
	var out []string
	arts, _ := v["artifacts"].([]any)
	for _, a := range arts {
		out = append(out, a.(map[string]any)["filename"].(string))
	}
	return out
}

// signedURL signs a download URL the way the server does, for name in
// the incarnation inc of session sid.
func signedURL(base, sid, inc, name string, exp int64) string {
	e := strconv.FormatInt(exp, 10)
	m := hmac.New(sha256.New, []byte(testFileSecret))
	m.Write([]byte(sid + "/" + name + "\n" + e + "\n" + inc))
	return fmt.Sprintf("%s/files/%s/%s?exp=%s&inc=%s&sig=%s", base, sid, (&url.URL{Path: name}).EscapedPath(), e, inc, hex.EncodeToString(m.Sum(nil)))
}

// incOf is the incarnation a download URL names.
func incOf(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil || p.Query().Get("inc") == "" {
		t.Fatalf("no incarnation in %q", u)
	}
	return p.Query().Get("inc")
}

// incarnation is session sid's incarnation, from a download URL the server
// signed for it (a probe file is uploaded when it has none).
func (d *dataServer) incarnation(sid string) string {
	d.t.Helper()
	v, _ := d.call("list_artifacts", map[string]any{"session_id": sid})
	arts, _ := v["artifacts"].([]any)
	if len(arts) == 0 {
		d.upload(sid, "inc-probe.txt", "x")
		v, _ = d.call("list_artifacts", map[string]any{"session_id": sid})
		arts, _ = v["artifacts"].([]any)
	}
	if len(arts) == 0 {
		d.t.Fatalf("no artifacts in %s: %v", sid, v)
	}
	return incOf(d.t, arts[0].(map[string]any)["download_url"].(string))
}

func (d *dataServer) base() string { return strings.TrimSuffix(d.url, "/mcp") }

func httpGet(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// TestDataMarketingExample runs examples/marketing-report through the
// unmodified MCP TypeScript SDK: CSV -> pandas -> an error, its traceback
// and the fix -> two seaborn charts -> a reportlab PDF -> read_artifact ->
// every download_url fetched over HTTP.
func TestDataMarketingExample(t *testing.T) {
	parallel(t)
	forEachBackend(t, testDataMarketingExample)
}

func testDataMarketingExample(t *testing.T, backend []string) {
	dir := mcpClients(t)
	requirePythonData(t)
	script := filepath.Join(dir, "example", "run.mjs")
	if _, err := os.Stat(script); err != nil {
		// Run from the source tree: put the example next to the clients'
		// node_modules (make test copies it there).
		if err := os.CopyFS(filepath.Join(dir, "example"), os.DirFS("../examples/marketing-report")); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(filepath.Join(dir, "example")) })
	}
	s := startServe(t, backend...)
	out := t.TempDir()
	cmd := exec.Command("node", script, "--url", s.url, "--out", out)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	checks := nodeChecks(t, "example", stdout)
	if err != nil || checks < 20 {
		t.Fatalf("run.mjs: %v (%d checks)\n%s\nstderr: %s\nserver: %s", err, checks, stdout, stderr.String(), s.logs.String())
	}
	for name, magic := range map[string]string{"marketing_report.pdf": "%PDF-", "revenue_by_channel.png": "\x89PNG", "weekly_roas.png": "\x89PNG"} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil || !strings.HasPrefix(string(b), magic) || len(b) < 5000 {
			t.Errorf("downloaded %s: %d bytes, %v", name, len(b), err)
		}
	}
}

// TestDataErrorCodes covers every error code and limit of seed 000 §2/§5.
func TestDataErrorCodes(t *testing.T) {
	// Serial: its runs time out after 2-3 s, a bound other tests' load would reach.
	forEachBackend(t, testDataErrorCodes)
}

func testDataErrorCodes(t *testing.T, backend []string) {
	d := startData(t, backend, "--max-sessions", "2", "--exec-timeout-seconds", "2", "--max-output-bytes", "1000",
		"--max-artifact-read-bytes", "2000", "--max-code-bytes", "5000", "--max-upload-bytes", "4096")
	sid := d.upload("", "a.csv", "x,y\n1,2\n")
	if len(sid) != 17 || !strings.HasPrefix(sid, "sess_") {
		t.Fatalf("generated session id %q", sid)
	}
	up := map[string]any{"session_id": sid, "filename": "a.csv", "content_base64": base64.StdEncoding.EncodeToString([]byte("new"))}
	d.wantError("upload_file", up, "file_exists")
	up["overwrite"] = true
	if v, isErr := d.call("upload_file", up); isErr || v["path"] != "/mnt/data/a.csv" {
		t.Fatalf("overwrite: %v", v)
	}
	d.wantError("upload_file", map[string]any{"session_id": sid, "filename": "big.bin", "content_base64": base64.StdEncoding.EncodeToString(make([]byte, 5000))}, "too_large")
	d.wantError("upload_file", map[string]any{"session_id": sid, "filename": "x", "content_base64": "%%%"}, "invalid_arguments")
	for _, bad := range []string{"../x.csv", "/etc/cron.d/x", "a\x00b.csv", "/mnt/data/../../x", "sub/../../x", ""} {
		d.wantError("upload_file", map[string]any{"session_id": sid, "filename": bad, "content_base64": "eA=="}, "invalid_path")
		d.wantError("read_artifact", map[string]any{"session_id": sid, "path": bad}, "invalid_path")
	}
	v, _ := d.call("list_artifacts", map[string]any{"session_id": sid})
	if fmt.Sprint(artifactNames(v)) != "[a.csv]" {
		t.Fatalf("rejected uploads wrote something: %v", v)
	}
	d.wantError("read_artifact", map[string]any{"session_id": sid, "path": "/mnt/data/missing.png"}, "not_found")
	d.wantError("read_artifact", map[string]any{"session_id": "sess_000000000000", "path": "/mnt/data/a.csv"}, "session_not_found")
	d.wantError("list_artifacts", map[string]any{"session_id": "not-a-session"}, "session_not_found")
	d.wantError("run_python", map[string]any{"session_id": sid, "code": strings.Repeat("#", 6000)}, "code_too_large")

	// Output truncation, a failed run (no artifacts), and the artifact diff.
	r := d.python(sid, "print('x' * 5000)\nimport sys; sys.stderr.write('e' * 50)")
	if r["stdout_truncated"] != true || r["stderr_truncated"] != false || len(r["stdout"].(string)) > 1000 || r["exit_code"].(float64) != 0 {
		t.Fatalf("truncation: %v %v %d (%v)", r["stdout_truncated"], r["stderr_truncated"], len(r["stdout"].(string)), r)
	}
	r = d.python(sid, "open('/mnt/data/fail.txt', 'w').write('x')\nraise SystemExit(3)")
	if r["exit_code"].(float64) != 3 || len(artifactNames(r)) != 0 {
		t.Fatalf("a failed run: %v", r)
	}
	r = d.python(sid, "open('/mnt/data/big.bin', 'wb').write(b'\\0' * 3000)\nopen('/mnt/data/a.csv', 'a').write('3,4\\n')")
	if got := fmt.Sprint(artifactNames(r)); got != "[a.csv big.bin]" {
		t.Fatalf("artifacts = %s, want [a.csv big.bin] (new and changed; fail.txt and the truncation run's nothing unchanged)", got)
	}
	for _, a := range r["artifacts"].([]any) {
		a := a.(map[string]any)
		if !strings.HasPrefix(a["download_url"].(string), d.base()+"/files/"+sid+"/") {
			t.Errorf("download_url %v", a["download_url"])
		}
	}
	tl := d.wantError("read_artifact", map[string]any{"session_id": sid, "path": "/mnt/data/big.bin"}, "artifact_too_large")
	if tl["size_bytes"].(float64) != 3000 || !strings.Contains(fmt.Sprint(tl["download_url"]), "/files/"+sid+"/big.bin?") {
		t.Fatalf("artifact_too_large must carry size_bytes and download_url: %v", tl)
	}
	if code, _, body := httpGet(t, tl["download_url"].(string)); code != 200 || len(body) != 3000 {
		t.Fatalf("the too-large file downloads: %d %d", code, len(body))
	}

	// Timeout: exit_code -1, seed 000's message, nothing reported.
	r = d.python(sid, "open('/mnt/data/late.txt', 'w').write('x')\nwhile True: pass")
	if r["exit_code"].(float64) != -1 || r["stderr"] != "Execution timed out after 2 seconds" || len(artifactNames(r)) != 0 || r["duration_ms"].(float64) < 2000 {
		t.Fatalf("timeout: %v", r)
	}

	// session_busy: one run at a time; uploads wait their turn too.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		callTool(t, d.c, "run_python", map[string]any{"session_id": sid, "code": "import time; time.sleep(1.5)"})
	}()
	time.Sleep(500 * time.Millisecond)
	d.wantError("run_python", map[string]any{"session_id": sid, "code": "print(1)"}, "session_busy")
	d.wantError("upload_file", map[string]any{"session_id": sid, "filename": "b.csv", "content_base64": "eA=="}, "session_busy")
	wg.Wait()
	if r := d.python(sid, "print(1)"); r["stdout"] != "1\n" {
		t.Fatalf("after the busy run: %v", r)
	}

	// max_sessions, and close_session.
	sid2 := d.upload("", "x.txt", "x")
	d.wantError("upload_file", map[string]any{"filename": "y.txt", "content_base64": "eA=="}, "max_sessions")
	d.wantError("run_python", map[string]any{"code": "print(1)"}, "max_sessions")
	if v, isErr := d.call("close_session", map[string]any{"session_id": sid2}); isErr || v["status"] != "closed" {
		t.Fatalf("close_session: %v", v)
	}
	d.wantError("close_session", map[string]any{"session_id": sid2}, "session_not_found")
	d.wantError("list_artifacts", map[string]any{"session_id": sid2}, "session_not_found")
	d.upload("", "y.txt", "y") // the slot is free again

	// Logs: one JSON line per run with the seed's fields.
	found := false
	for _, line := range strings.Split(d.logs.String(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) == nil && l["msg"] == "run_python" && l["session_id"] == sid &&
			l["run_id"] != nil && l["duration_ms"] != nil && l["exit_code"] != nil {
			found = true
		}
	}
	if !found {
		t.Errorf("no JSON log line for run_python with session_id, run_id, duration_ms, exit_code:\n%s", d.logs.String())
	}
	// The audit log, read by the operator with srt-mcp audit.
	out, err := exec.Command(nwBin(t), "audit", "--state-dir", d.state, sid).Output()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("print(1)"))
	for _, want := range []string{`"op":"upload_file"`, `"op":"run_python"`, `"code_sha256":"` + hex.EncodeToString(sum[:]) + `"`, `"op":"read_artifact"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("audit log lacks %s:\n%s", want, out)
		}
	}
	list, _ := exec.Command(nwBin(t), "audit", "--state-dir", d.state).Output()
	if !strings.Contains(string(list), sid2) {
		t.Errorf("the closed session's audit log must remain: %s", list)
	}
}

// TestDataDownloads: signed, expiring URLs; 403 for a bad or expired
// signature, 404 for a missing file, headers for the browser.
func TestDataDownloads(t *testing.T) {
	parallel(t)
	forEachBackend(t, testDataDownloads)
}

func testDataDownloads(t *testing.T, backend []string) {
	d := startData(t, backend)
	sid := d.upload("", "report data.csv", "a,b\n")
	r := d.python(sid, "open('/mnt/data/chart.svg', 'w').write('<svg xmlns=\"http://www.w3.org/2000/svg\"/>')")
	u := r["artifacts"].([]any)[0].(map[string]any)["download_url"].(string)
	code, h, body := httpGet(t, u)
	if code != 200 || h.Get("Content-Type") != "image/svg+xml" || h.Get("X-Content-Type-Options") != "nosniff" ||
		h.Get("Content-Disposition") != `attachment; filename=chart.svg` || !strings.HasPrefix(string(body), "<svg") {
		t.Fatalf("download: %d %v %q", code, h, body)
	}
	future := time.Now().Add(time.Hour).Unix()
	inc := incOf(t, u)
	if code, h, _ := httpGet(t, signedURL(d.base(), sid, inc, "report data.csv", future)); code != 200 || h.Get("Content-Type") != "text/csv" {
		t.Fatalf("an escaped name: %d", code)
	}
	for name, url := range map[string]string{
		"expired":           signedURL(d.base(), sid, inc, "chart.svg", time.Now().Add(-time.Minute).Unix()),
		"tampered sig":      strings.Replace(u, "sig=", "sig=00", 1),
		"no sig":            d.base() + "/files/" + sid + "/chart.svg",
		"other file":        strings.Replace(u, "chart.svg", "report%20data.csv", 1),
		"exp moved":         strings.Replace(u, "exp=", "exp=9", 1),
		"other session":     strings.Replace(u, sid, "sess_000000000000", 1),
		"traversal sig'd":   signedURL(d.base(), sid, inc, "../../etc/passwd", future),
		"other incarnation": signedURL(d.base(), sid, "0123456789abcdef", "chart.svg", future) + "&x",
	} {
		if code, _, body := httpGet(t, url); code != 403 && !(name == "traversal sig'd" && code >= 400) && !(name == "other incarnation" && code == 404) {
			t.Errorf("%s: want 403, got %d %s", name, code, body)
		}
	}
	if code, _, _ := httpGet(t, signedURL(d.base(), sid, inc, "missing.csv", future)); code != 404 {
		t.Errorf("missing file: want 404, got %d", code)
	}
	if code, _, _ := httpGet(t, signedURL(d.base(), "sess_000000000000", inc, "chart.svg", future)); code != 404 {
		t.Errorf("missing session: want 404, got %d", code)
	}
	// The secret is generated and kept 0600 when none is configured.
	plain := startServe(t)
	var secret string
	for i, a := range plain.cmd.Args {
		if a == "--state-dir" {
			secret = filepath.Join(plain.cmd.Args[i+1], "file-secret")
		}
	}
	fi, err := os.Stat(secret)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() < 32 {
		t.Fatalf("generated secret %s: %v %v", secret, fi, err)
	}
}

// TestDataIsolation: a session sees its own workspace and nothing else of
// the state directory: not by path, not through a planted symlink, not
// through /proc; and a data session has no network.
func TestDataIsolation(t *testing.T) {
	parallel(t)
	// The state directory lies inside a directory the operator lets
	// sandboxes read: it must stay hidden all the same.
	visible := reachableTempDir(t)
	d := startData(t, nil, "--state-dir", filepath.Join(visible, "state"), "--allow-read", visible)
	victim := d.upload("", "secret.txt", "victim's data")
	attacker := d.upload("", "mine.txt", "x")
	var victimHost string
	_ = filepath.WalkDir(d.state, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Name() == "secret.txt" {
			victimHost = p
		}
		return nil
	})
	if victimHost == "" {
		t.Fatalf("victim's file not found under %s", d.state)
	}
	if strings.Contains(victimHost, victim) {
		t.Errorf("the workspace's host path names its session: %s", victimHost)
	}
	// A long-running process of the victim's session, to look for in /proc.
	marker := fmt.Sprintf("victim-marker-%d", time.Now().UnixNano())
	v, isErr := d.call("execute_code_async", map[string]any{"session_id": victim, "command": "exec -a " + marker + " sleep 30"})
	if isErr {
		t.Fatalf("execute_code_async: %v", v)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(processesWith(marker)) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	outside := t.TempDir()
	code := fmt.Sprintf(`
import os, glob, socket
found = []
for p in [%q, %q, %q]:
    try:
        open(p).read(); found.append("read " + p)
    except OSError:
        pass
    if os.path.exists(p):
        found.append("exists " + p)
for p in glob.glob("/proc/[0-9]*/cmdline"):
    try:
        if "victim-" + %q in open(p).read():
            found.append("proc " + p)
    except OSError:
        pass
for p in glob.glob("/proc/[0-9]*/root/mnt/data/secret.txt") + glob.glob("/proc/[0-9]*/cwd/secret.txt"):
    found.append("proc root " + p)
try:
    socket.create_connection(("127.0.0.1", %d), timeout=2); found.append("network")
except OSError:
    pass
os.symlink(%q, "/mnt/data/leak.txt")
os.symlink(%q, "/mnt/data/out")
os.symlink("/", "/mnt/data/root")
print("FOUND", found)
`, victimHost, d.state, filepath.Dir(victimHost), strings.TrimPrefix(marker, "victim-"), ln.Addr().(*net.TCPAddr).Port, victimHost, outside)
	r := d.python(attacker, code)
	if r["exit_code"].(float64) != 0 || !strings.Contains(r["stdout"].(string), "FOUND []") {
		t.Fatalf("the attacker's session reached outside its workspace: %v %v", r["stdout"], r["stderr"])
	}
	// The planted symlinks lead the server nowhere.
	for _, p := range []string{"/mnt/data/leak.txt", "/mnt/data/root/etc/passwd", "/mnt/data/out/x"} {
		d.wantError("read_artifact", map[string]any{"session_id": attacker, "path": p}, "invalid_path")
	}
	for _, p := range []string{"leak.txt", "out/new.txt", "root/tmp/pwned"} {
		d.wantError("upload_file", map[string]any{"session_id": attacker, "filename": p, "content_base64": "cHduZWQ=", "overwrite": true}, "invalid_path")
	}
	if b, _ := os.ReadFile(victimHost); string(b) != "victim's data" {
		t.Fatalf("the victim's file changed: %q", b)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("an upload landed outside the workspace: %v", ents)
	}
	if _, err := os.Stat("/tmp/pwned"); err == nil {
		t.Fatal("/tmp/pwned was written")
	}
	future := time.Now().Add(time.Hour).Unix()
	attackerInc := d.incarnation(attacker)
	for _, name := range []string{"leak.txt", "root/etc/passwd"} {
		if code, _, body := httpGet(t, signedURL(d.base(), attacker, attackerInc, name, future)); code != 404 {
			t.Errorf("download of %s through a symlink: %d %q", name, code, body)
		}
	}
	// The same from execute_code, asking for the readable parent, and for
	// the state directory itself (refused by name).
	v, isErr = d.call("execute_code", map[string]any{"session_id": attacker, "command": "ls " + visible + "; cat " + victimHost + " && echo LEAKED",
		"sandbox_config": map[string]any{"filesystem": map[string]any{"allow_read": []string{visible}}}})
	if isErr || strings.Contains(fmt.Sprint(v["output"]), "LEAKED") || strings.Contains(fmt.Sprint(v["output"]), "victim's data") {
		t.Fatalf("execute_code with allow_read of the state dir's parent: %v", v)
	}
	v, isErr = d.call("execute_code", map[string]any{"session_id": attacker, "command": "cat " + victimHost,
		"sandbox_config": map[string]any{"filesystem": map[string]any{"allow_read": []string{filepath.Dir(victimHost)}}}})
	if !isErr && strings.Contains(fmt.Sprint(v), "victim's data") {
		t.Fatalf("allow_read inside the state dir: %v", v)
	}
	if !strings.Contains(fmt.Sprint(v), "srt-mcp keeps out of every sandbox") {
		t.Errorf("allow_read inside the state dir must be refused by name: %v", v)
	}
	l, _ := d.call("list_artifacts", map[string]any{"session_id": attacker})
	if fmt.Sprint(artifactNames(map[string]any{"artifacts": l["artifacts"]})) != "[mine.txt]" {
		t.Errorf("list_artifacts shows symlinks: %v", l)
	}
	// One session's signature does not open another's file.
	u := signedURL(d.base(), attacker, attackerInc, "secret.txt", future)
	if code, _, _ := httpGet(t, strings.Replace(u, attacker, victim, 1)); code != 403 {
		t.Errorf("a signature of one session opened another's file: %d", code)
	}
	d.call("close_session", map[string]any{"session_id": victim})
	markerGone(t, marker)
}

// TestDataExecuteCodeSharesTheSession: execute_code with a session_id works
// in the same /mnt/data as run_python.
func TestDataExecuteCodeSharesTheSession(t *testing.T) {
	parallel(t)
	forEachBackend(t, testDataExecuteCodeSharesTheSession)
}

func testDataExecuteCodeSharesTheSession(t *testing.T, backend []string) {
	d := startData(t, backend)
	sid := d.upload("", "in.csv", "n\n1\n2\n")
	v, isErr := d.call("execute_code", map[string]any{"session_id": sid, "command": "pwd; cat in.csv | wc -l; echo shell > from_shell.txt"})
	out := fmt.Sprint(v["output"])
	if isErr || v["status"] != "completed" || !strings.Contains(out, "/mnt/data") || !strings.Contains(out, "3") {
		t.Fatalf("execute_code in the session: %v", v)
	}
	if r := d.python(sid, "print(open('from_shell.txt').read().strip())"); r["stdout"] != "shell\n" {
		t.Fatalf("run_python does not see execute_code's file: %v", r)
	}
	v, isErr = d.call("execute_code", map[string]any{"session_id": "sess_nothex", "command": "true"})
	if !isErr || !strings.Contains(fmt.Sprint(v), "invalid_session_id") {
		t.Fatalf("a malformed session_id: %v", v)
	}
}

// TestDataTTLAndRestart: idle sessions expire; a server killed with -9
// leaves workspaces that the next server on the same state dir removes,
// and no sandbox process survives.
func TestDataTTLAndRestart(t *testing.T) {
	// Serial: its session's TTL is 1.2 s, a pause other tests' load could make.
	forEachBackend(t, testDataTTLAndRestart)
}

func testDataTTLAndRestart(t *testing.T, backend []string) {
	d := startData(t, backend, "--data-session-ttl-minutes", "0.02") // 1.2 s
	sid := d.upload("", "a.txt", "x")
	// Watch the workspace, not the session: every tool call counts as use.
	workspace := filepath.Join(d.state, "workspaces", "*", "data", "a.txt")
	if workspaceFS(t, d.url) == "filesystem" {
		workspace = filepath.Join(d.state, "workspaces", "*", "fs", "data", "a.txt")
	}
	if ents, _ := filepath.Glob(workspace); len(ents) != 1 {
		t.Fatalf("the session's workspace: %v", ents)
	}
	deadline := time.Now().Add(8 * time.Second)
	for {
		if ents, _ := filepath.Glob(workspace); len(ents) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle session did not expire")
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.wantError("list_artifacts", map[string]any{"session_id": sid}, "session_not_found")

	state := filepath.Join(reachableTempDir(t), "state")
	port := freePort(t)
	cmd := exec.Command(nwBin(t), append([]string{"serve", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--state-dir", state}, backend...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	for i := 0; ; i++ {
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err == nil {
			resp.Body.Close()
			break
		}
		if i > 200 {
			t.Fatal("server did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	c := connect(t, url)
	v, _ := callTool(t, c, "upload_file", map[string]any{"filename": "left.txt", "content_base64": "eA=="})
	old := v["session_id"].(string)
	marker := fmt.Sprintf("%d", time.Now().UnixNano()%1000000+100000)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "run_python", map[string]any{"session_id": old, "code": "import time; time.sleep(300." + marker + ")"}
		_, _ = c.CallTool(context.Background(), req)
	}()
	deadline = time.Now().Add(10 * time.Second)
	for len(processesWith("300."+marker)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the run never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	docker := contains(backend, "docker")
	if !docker {
		waitNoProcesses(t, "300."+marker, 5*time.Second) // a native sandbox dies with its server
	}
	leftover := filepath.Join(state, "workspaces", "*", "data", "left.txt")
	if strings.HasSuffix(workspace, filepath.Join("fs", "data", "a.txt")) {
		leftover = filepath.Join(state, "workspaces", "*", "fs", "data", "left.txt") // its volume stays mounted
	}
	if ents, _ := filepath.Glob(leftover); len(ents) != 1 {
		t.Fatalf("expected the killed server's workspace to be left behind: %v", ents)
	}
	s2 := startServe(t, append([]string{"--state-dir", state}, backend...)...)
	if docker {
		// The container outlived its server; the next one removes it.
		waitNoProcesses(t, "300."+marker, 10*time.Second)
		if out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=session_id="+old).Output(); len(strings.TrimSpace(string(out))) > 0 {
			t.Fatalf("a container of the killed server survived the restart: %s", out)
		}
	}
	// The cleanup runs in the background (nothing a dead server left holds
	// a start-up): on a loaded machine it may end after /healthz answers.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ents, _ := filepath.Glob(leftover)
		if len(ents) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the next server did not remove the leftovers in 10 s: %v", ents)
		}
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); bytes.Contains(b, []byte(" "+state+"/workspaces/")) {
		// Only the next server's own ready volume may be mounted there.
		n := bytes.Count(b, []byte(" "+state+"/workspaces/"))
		if n > 1 {
			t.Errorf("the killed server's volumes are still mounted (%d mounts under the workspaces):\n%s", n, b)
		}
	}
	// It logs once it is done: the leftovers can be gone a moment before
	// the line is written.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(s2.logs.String(), "removed the workspaces a previous server left behind"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("start-up cleanup not logged: %s", s2.logs.String())
			break
		}
	}
	c2 := connect(t, s2.url)
	if v, isErr := callTool(t, c2, "list_artifacts", map[string]any{"session_id": old}); !isErr || v["error"] != "session_not_found" {
		t.Fatalf("a dead server's session came back: %v", v)
	}
}

// TestDataMissingPython: a clear error naming what to install.
func TestDataMissingPython(t *testing.T) {
	parallel(t)
	forEachBackend(t, testDataMissingPython)
}

func testDataMissingPython(t *testing.T, backend []string) {
	d := startData(t, backend, "--python", "/nonexistent/python3")
	v := d.wantError("run_python", map[string]any{"code": "print(1)"}, "command_not_found")
	if !strings.Contains(v["message"].(string), "apt-get install -y python3 python3-pandas") {
		t.Fatalf("the message must say what to install: %v", v)
	}
	d2 := startData(t, backend)
	r := d2.python("", "import surely_not_a_module_xyz")
	if r["exit_code"].(float64) != 1 || !strings.Contains(fmt.Sprint(r["hint"]), "surely_not_a_module_xyz is not available") {
		t.Fatalf("a missing module: %v", r)
	}
}

// TestDataDockerContainer: what only the Docker backend has: the
// container's hardening and labels, no network (a loopback server on the
// host stays unreachable), the memory limit reported as OOM, a timeout that
// kills the run's whole process tree, and the container removed with its
// session.
func TestDataDockerContainer(t *testing.T) {
	// Serial: its runs time out after 2-3 s, a bound other tests' load would reach.
	args, ok := dataBackends(t)["docker"]
	if !ok {
		t.Skip("the Docker backend is not available here")
	}
	d := startData(t, args, "--container-memory", "128M", "--exec-timeout-seconds", "3")
	sid := d.upload("", "a.txt", "x")
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	hits := make(chan struct{}, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hits <- struct{}{}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	r := d.python(sid, fmt.Sprintf(`
import socket, os
res = []
for host in ["127.0.0.1", "172.17.0.1", "10.0.2.2", "8.8.8.8"]:
    try:
        socket.create_connection((host, %d), timeout=1); res.append("reached " + host)
    except OSError as e:
        pass
print("NET", res, sorted(os.listdir("/sys/class/net")))
print("UID", os.getuid())
`, port))
	if out := r["stdout"].(string); !strings.Contains(out, "NET [] ['lo']") || strings.Contains(out, "UID 0") {
		t.Fatalf("the container reached the network or runs as root: %v %v", r["stdout"], r["stderr"])
	}
	select {
	case <-hits:
		t.Fatal("the loopback server was hit from the container")
	default:
	}
	// Hardening and labels.
	out, err := exec.Command("docker", "ps", "-q", "--filter", "label=session_id="+sid, "--filter", "label=app=srt-mcp").Output()
	cid := strings.TrimSpace(string(out))
	if err != nil || cid == "" || strings.Contains(cid, "\n") {
		t.Fatalf("want one labelled container for %s, got %q %v", sid, out, err)
	}
	insp, err := exec.Command("docker", "inspect", "--format",
		"{{.HostConfig.NetworkMode}} {{.HostConfig.CapDrop}} {{.HostConfig.ReadonlyRootfs}} {{.HostConfig.SecurityOpt}} {{.HostConfig.Memory}} {{.HostConfig.NanoCpus}} {{.HostConfig.PidsLimit}} {{.Config.User}}", cid).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(strings.TrimSpace(string(insp)))
	if want := "none [ALL] true [no-new-privileges] 134217728 1000000000 256"; strings.Join(got[:len(got)-1], " ") != want {
		t.Errorf("container settings %q, want %q", strings.TrimSpace(string(insp)), want)
	}
	// As root, the container user is the session's own uid.
	if u, g, _ := strings.Cut(got[len(got)-1], ":"); u != g || atoi(u) < 2000000 {
		t.Errorf("container user %q: want the session's own uid, from 2000000 up", got[len(got)-1])
	}
	// A timeout kills the run and what it started in the background.
	marker := fmt.Sprintf("%d", time.Now().UnixNano()%1000000+100000)
	r = d.python(sid, "import subprocess, time\nsubprocess.Popen(['sleep', '300."+marker+"'], start_new_session=False)\ntime.sleep(60)")
	if r["exit_code"].(float64) != -1 || r["stderr"] != "Execution timed out after 3 seconds" {
		t.Fatalf("timeout: %v", r)
	}
	waitNoProcesses(t, "300."+marker, 5*time.Second)
	// Over the memory limit: reported as such, with the limit.
	v := d.wantError("run_python", map[string]any{"session_id": sid, "code": "x = bytearray(400 << 20)\nx[::4096] = b'y' * len(x[::4096])\nprint('survived')"}, "oom_killed")
	if !strings.Contains(v["message"].(string), "128M") {
		t.Errorf("the OOM message must name the limit: %v", v)
	}
	if r := d.python(sid, "print('after oom')"); r["stdout"] != "after oom\n" {
		t.Fatalf("the session does not work after an OOM kill: %v", r)
	}
	// The container goes with its session.
	d.call("close_session", map[string]any{"session_id": sid})
	if out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=session_id="+sid).Output(); strings.TrimSpace(string(out)) != "" {
		t.Fatalf("the closed session's container remains: %s", out)
	}
}

// TestDataDockerNetworkThroughProxy: in Docker mode an allow-listed name is
// reached only through srt-mcp's proxy, whose ports live in the container's
// own (loopback-only) network namespace; anything else stays unreachable.
func TestDataDockerNetworkThroughProxy(t *testing.T) {
	parallel(t)
	args, ok := dataBackends(t)["docker"]
	if !ok {
		t.Skip("the Docker backend is not available here")
	}
	srv := nwStart(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello-from-host") }), false)
	d := startData(t, args, append(pinned("pkgs.test", "other.test"), "--allow-domain", "pkgs.test:"+srv.port)...)
	sid := d.upload("", "a.txt", "x")
	code := fmt.Sprintf(`
import urllib.request, socket
def get(url):
    try:
        return urllib.request.urlopen(url, timeout=5).read().decode()
    except Exception as e:
        return "ERR " + str(e)
print("allowed:", get("http://pkgs.test:%[1]s/"))
print("other:", get("http://other.test:%[1]s/"))
try:
    socket.create_connection(("127.0.0.1", %[1]s), timeout=2); print("direct: reached")
except OSError:
    print("direct: refused")
`, srv.port)
	v, isErr := d.call("execute_code", map[string]any{"session_id": sid, "command": "python3 -c '" + strings.ReplaceAll(code, "'", `'"'"'`) + "'",
		"sandbox_config": map[string]any{"network": map[string]any{"allowed_domains": []string{"pkgs.test:" + srv.port}}}})
	out := fmt.Sprint(v["output"])
	if isErr || !strings.Contains(out, "allowed: hello-from-host") || !strings.Contains(out, "other: ERR") || !strings.Contains(out, "direct: refused") {
		t.Fatalf("docker egress through the proxy: %v", v)
	}
	if !strings.Contains(out, "decision:allow") || !strings.Contains(out, "decision:deny") {
		t.Errorf("the proxy's decisions must stream as violation events: %v", out)
	}
	// With an empty allow-list the same run has no way out at all.
	v, _ = d.call("execute_code", map[string]any{"session_id": sid, "command": "python3 -c '" + strings.ReplaceAll(code, "'", `'"'"'`) + "'",
		"sandbox_config": map[string]any{"network": map[string]any{"allowed_domains": []string{}}}})
	if out := fmt.Sprint(v["output"]); !strings.Contains(out, "allowed: ERR") {
		t.Fatalf("no allow-list, yet: %v", out)
	}
}

// TestDataDockerErrors: each failure of the engine says what to do.
func TestDataDockerErrors(t *testing.T) {
	parallel(t)
	args, ok := dataBackends(t)["docker"]
	if !ok {
		t.Skip("the Docker backend is not available here")
	}
	serve := func(env []string, extra ...string) string {
		cmd := exec.Command(nwBin(t), append([]string{"serve", "--port", strconv.Itoa(freePort(t)), "--state-dir", filepath.Join(reachableTempDir(t), "s")}, extra...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("serve %v: want exit 1, got %v\n%s", extra, err, out)
		}
		return string(out)
	}
	if out := serve(nil, "--backend", "docker", "--image", "srt-mcp-no-such-image:v0"); !strings.Contains(out, "srt-mcp image build --tag srt-mcp-no-such-image:v0") {
		t.Errorf("a missing image must name the build command: %s", out)
	}
	if out := serve([]string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}, args...); !strings.Contains(out, "not reachable") || !strings.Contains(out, "--backend native") {
		t.Errorf("an unreachable engine must say so and what to do: %s", out)
	}
	// The container removed under a run.
	d := startData(t, args)
	sid := d.upload("", "a.txt", "x")
	d.python(sid, "print(1)")
	go func() {
		time.Sleep(time.Second)
		_ = exec.Command("docker", "rm", "-f", strings.TrimSpace(func() string {
			out, _ := exec.Command("docker", "ps", "-q", "--filter", "label=session_id="+sid).Output()
			return string(out)
		}())).Run()
	}()
	v := d.wantError("run_python", map[string]any{"session_id": sid, "code": "import time; time.sleep(30)"}, "container_died")
	if !strings.Contains(v["message"].(string), "next call starts a new one") {
		t.Errorf("container_died: %v", v)
	}
	if r := d.python(sid, "print(open('a.txt').read())"); r["stdout"] != "x\n" {
		t.Fatalf("the next call must work in a new container with the same files: %v", r)
	}
}

// TestDataInteractiveInSession: stdin on a pipe and on a PTY, answered with
// send_stdin, in a session's sandbox, on each backend.
func TestDataInteractiveInSession(t *testing.T) {
	parallel(t)
	forEachBackend(t, testDataInteractiveInSession)
}

func testDataInteractiveInSession(t *testing.T, backend []string) {
	d := startData(t, backend)
	sid := d.upload("", "a.txt", "x")
	for _, interactive := range []bool{false, true} {
		v, isErr := d.call("execute_code_async", map[string]any{"session_id": sid, "interactive": interactive,
			"command": `read -r n; if [ -t 0 ]; then t=tty; else t=pipe; fi; echo "hello $n on $t"`})
		if isErr {
			t.Fatalf("execute_code_async: %v", v)
		}
		id := v["execution_id"].(string)
		time.Sleep(300 * time.Millisecond)
		if v, isErr := d.call("send_stdin", map[string]any{"execution_id": id, "input_data": "world\n"}); isErr {
			out, _ := d.call("get_execution_output", map[string]any{"execution_id": id})
			t.Fatalf("send_stdin: %v\n%v", v, out)
		}
		done, _ := d.call("get_execution_output", map[string]any{"execution_id": id, "wait": true})
		want := "hello world on pipe"
		if interactive {
			want = "hello world on tty"
		}
		if out := fmt.Sprint(done["output"]); !strings.Contains(out, want) || fmt.Sprint(done["exit_code"]) != "0" {
			t.Fatalf("interactive=%v: want %q, got %v", interactive, want, done)
		}
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}
