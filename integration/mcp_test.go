package integration

// MCP tests: srt-mcp serve driven by unmodified third-party clients from
// npm (the MCP TypeScript SDK 1.32.x over Streamable HTTP and stdio, and
// the MCP Inspector 2.12 CLI, in both protocol eras), plus the HTTP door's
// own guards (bearer auth, Origin, body cap, refusing an open bind).
//
// The clients live in integration/mcpclient (npm ci there); point
// SRT_MCP_CLIENTS at a copy of that directory to run from elsewhere. With
// SRT_MCP_REQUIRE_CLIENTS=1 (set by make test) missing clients fail the
// test instead of skipping it.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func mcpClients(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SRT_MCP_CLIENTS")
	if dir == "" {
		dir, _ = filepath.Abs("mcpclient")
	}
	_, errNode := exec.LookPath("node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil || errNode != nil {
		msg := fmt.Sprintf("MCP clients are not installed in %s (run npm ci there; node must be on PATH)", dir)
		if os.Getenv("SRT_MCP_REQUIRE_CLIENTS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}

type mcpServer struct {
	url    string
	cmd    *exec.Cmd
	logs   *logBuffer
	exited chan error // cmd.Wait's result, put back by whoever reads it
}

// wait waits for the server to exit and returns how it did.
func (s *mcpServer) wait() error {
	err := <-s.exited
	s.exited <- err
	return err
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// parallel runs t alongside the suite's other parallel tests (after the
// serial ones; -test.parallel says how many at once). A test is parallel
// when it holds only what it made — its own server, state directory,
// ports, and containers found by its own session's label — and asserts
// nothing about wall-clock time or the whole machine. Serial stay: load,
// escapes (fork and memory bombs), faults (a full disk), drains,
// containers found across the engine, images, replicas, and the browser.
func parallel(t *testing.T) {
	t.Helper()
	t.Parallel()
}

// startServe runs srt-mcp serve on a free loopback port until the test ends.
func startServe(t *testing.T, extra ...string) *mcpServer {
	t.Helper()
	s, err := startServeMayRefuse(t, extra...)
	if err != nil {
		t.Fatalf("server did not come up: %v", err)
	}
	return s
}

// startServeMayRefuse is startServe for a server that may refuse what it
// is given: an error (its exit and its logs) if it exits before it
// answers /healthz; a server that does neither within 15 s fails the test.
func startServeMayRefuse(t *testing.T, extra ...string) (*mcpServer, error) {
	t.Helper()
	return startServeEnv(t, nil, extra...)
}

// startServeEnv is startServeMayRefuse with env added to the server's
// own environment.
func startServeEnv(t *testing.T, env []string, extra ...string) (*mcpServer, error) {
	t.Helper()
	port := freePort(t)
	home := reachableTempDir(t)
	args := append([]string{"serve", "--host", "127.0.0.1", "--port", strconv.Itoa(port)}, extra...)
	if !contains(extra, "--state-dir") {
		args = append(args, "--state-dir", filepath.Join(home, "state"))
	}
	if !contains(extra, "--warm-pool") {
		args = append(args, "--warm-pool", "0") // warm pools have their own test; elsewhere they only add load
	}
	cmd := exec.Command(nwBin(t), args...)
	cmd.Env = append(append(os.Environ(), "HOME="+home), env...)
	logs := &logBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-exited:
			exited <- err
		case <-time.After(10 * time.Second):
			// Gone before its directories go: until it has exited its
			// runners live, and a runner starting a sandbox recreates the
			// cache the test's clean-up is removing.
			_ = cmd.Process.Kill()
			exited <- <-exited
		}
	})
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			return nil, fmt.Errorf("exited: %v %s", err, logs.String())
		default:
		}
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err == nil {
			resp.Body.Close()
			return &mcpServer{url: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), cmd: cmd, logs: logs, exited: exited}, nil
		}
		if time.Now().After(deadline) {
			t.Fatalf("server neither up nor gone after 15 s: %s", logs.String())
		}
	}
}

// runClient runs client.mjs and returns its checks by name.
func runClient(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("node", append([]string{"client.mjs"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	checks := nodeChecks(t, "client", out)
	if err != nil || checks < 15 {
		t.Fatalf("client.mjs %v: %v (%d checks)\nstderr: %s", args, err, checks, stderr.String())
	}
}

// nodeChecks reads the JSON check lines a client script prints
// ({"check", "ok", "detail"}), fails the test for each failed one, and
// returns how many there were.
// runNode runs a Node client script to its end, killing it after limit:
// what it printed (its checks), what it wrote to stderr, and how it ended.
func runNode(t *testing.T, cmd *exec.Cmd, limit time.Duration) ([]byte, string, error) {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.Output(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s did not finish in %s\n%s", strings.Join(cmd.Args, " "), limit, stderr.String())
	}
	return out, stderr.String(), err
}

func nodeChecks(t *testing.T, what string, out []byte) int {
	t.Helper()
	checks := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var c struct {
			Check  string          `json:"check"`
			OK     bool            `json:"ok"`
			Detail json.RawMessage `json:"detail"`
		}
		if json.Unmarshal(sc.Bytes(), &c) != nil {
			continue
		}
		checks++
		if !c.OK {
			t.Errorf("%s check %q failed: %s", what, c.Check, c.Detail)
		}
	}
	return checks
}

func markerGone(t *testing.T, marker string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		found := false
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if err == nil && bytes.Contains(b, []byte(marker)) && !bytes.Contains(b, []byte("client.mjs")) {
				found = true
			}
		}
		if !found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a process with %q survived its session", marker)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestMCPTypeScriptClientHTTP(t *testing.T) {
	parallel(t)
	dir := mcpClients(t)
	s := startServe(t)
	marker := fmt.Sprintf("srtmcp-http-%d", time.Now().UnixNano())
	runClient(t, dir, "--url", s.url, "--marker", marker)
	markerGone(t, marker) // session DELETE cancelled the session's sleep
}

func TestMCPTypeScriptClientStdio(t *testing.T) {
	parallel(t)
	dir := mcpClients(t)
	marker := fmt.Sprintf("srtmcp-stdio-%d", time.Now().UnixNano())
	runClient(t, dir, "--stdio", nwBin(t), "--marker", marker)
	markerGone(t, marker)
}

func TestMCPTokenAuth(t *testing.T) {
	parallel(t)
	dir := mcpClients(t)
	s := startServe(t, "--token", "s3cret-token")
	resp, err := http.Post(s.url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("no token: want 401 with WWW-Authenticate, got %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	runClient(t, dir, "--url", s.url, "--token", "s3cret-token")
}

func TestMCPInspectorCLI(t *testing.T) {
	parallel(t)
	dir := mcpClients(t)
	s := startServe(t)
	home := t.TempDir() // the Inspector writes ~/.mcp-inspector
	inspect := func(args ...string) map[string]any {
		t.Helper()
		cmd := exec.Command(filepath.Join(dir, "node_modules", ".bin", "mcp-inspector"), append([]string{"--cli", s.url, "--transport", "http"}, append(args, "--format", "json")...)...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "HOME="+home)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("inspector %v: %v\n%s", args, err, out)
		}
		var v map[string]any
		// The JSON result comes first; the Inspector may add notes after it.
		if err := json.NewDecoder(bytes.NewReader(out[bytes.IndexByte(out, '{'):])).Decode(&v); err != nil {
			t.Fatalf("inspector %v: %v\n%s", args, err, out)
		}
		return v
	}
	tools := inspect("--method", "tools/list")["result"].(map[string]any)["tools"].([]any)
	if len(tools) != 26 {
		t.Fatalf("inspector sees %d tools", len(tools))
	}
	for _, era := range [][]string{nil, {"--protocol-era", "modern"}} {
		res := inspect(append(era, "--method", "tools/call", "--tool-name", "execute_code", "--tool-args-json", `{"command":"echo via-inspector"}`)...)
		sc := res["result"].(map[string]any)["structuredContent"].(map[string]any)
		if sc["status"] != "completed" || !strings.Contains(fmt.Sprint(sc["output"]), "via-inspector") {
			t.Fatalf("inspector %v execute_code: %v", era, sc)
		}
	}
}

func TestMCPHTTPGuards(t *testing.T) {
	parallel(t)
	s := startServe(t, "--max-body", "64K")
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	post := func(body string, hdr map[string]string) *http.Response {
		req, _ := http.NewRequest("POST", s.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if r := post(init, map[string]string{"Origin": "http://evil.example"}); r.StatusCode != 403 {
		t.Fatalf("foreign Origin: want 403, got %d", r.StatusCode)
	}
	if r := post(init, map[string]string{"Origin": "http://localhost:3000"}); r.StatusCode != 200 {
		t.Fatalf("loopback Origin: want 200, got %d", r.StatusCode)
	}
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", 200<<10) + `"}}`
	if r := post(big, nil); r.StatusCode < 400 {
		t.Fatalf("oversized body: want an error status, got %d", r.StatusCode)
	}
	// An open bind without a token is refused.
	cmd := exec.Command(nwBin(t), "serve", "--host", "0.0.0.0", "--port", strconv.Itoa(freePort(t)))
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--token") {
		t.Fatalf("0.0.0.0 without a token: want exit 2 naming --token, got %v %s", err, out)
	}
}

// TestMCPSessionlessCancelCannotHitOthers: mcp-go keys in-flight requests by
// session id and request id, and 2026-07-28 requests have no session, so a
// sessionless notifications/cancelled could cancel another client's call
// with the same id. srt-mcp drops such notifications (a modern client
// cancels by disconnecting).
func TestMCPSessionlessCancelCannotHitOthers(t *testing.T) {
	parallel(t)
	s := startServe(t)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"a","version":"1"}}`
	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"execute_code","arguments":{"command":"sleep 1.5; echo finished"},` + meta + `}}`
	done := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("POST", s.url, strings.NewReader(call))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "execute_code")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- string(b)
	}()
	time.Sleep(500 * time.Millisecond)
	req, _ := http.NewRequest("POST", s.url, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"attack"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("sessionless cancel: want 202, got %d", resp.StatusCode)
	}
	out := <-done
	if !strings.Contains(out, "finished") || !strings.Contains(out, `"status":"completed"`) {
		t.Fatalf("another client's sessionless cancel reached the call: %s", out)
	}
}

// logBuffer is a server's output, written by os/exec's copying goroutine
// while a test reads it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A simple command runs without bash (runner.Spec.Direct), as bash -c
// would have run it: the program sees the environment bash would have
// given it, and a missing program still gets bash's own error and 127.
func TestCommandWithoutShell(t *testing.T) {
	parallel(t)
	s := startServe(t, "--backend", "native")
	cs := goSDK(t, s.url, "")
	run := func(cmd string) (string, string, float64) {
		t.Helper()
		v, isErr, text := sdkCall(t, cs, "execute_code", map[string]any{"command": cmd})
		if isErr {
			t.Fatalf("%s: %s", cmd, text)
		}
		var out, errs strings.Builder
		evs, _ := v["output"].([]any)
		for _, e := range evs {
			m, _ := e.(map[string]any)
			d, _ := m["data"].(string)
			switch m["type"] {
			case "stdout":
				out.WriteString(d)
			case "stderr":
				errs.WriteString(d)
			}
		}
		code, _ := v["exit_code"].(float64)
		return out.String(), errs.String(), code
	}
	token := regexp.MustCompile(`srt:[0-9a-f]+@`) // each execution's proxy token
	lines := func(s string) []string {
		l := strings.Split(strings.TrimSpace(token.ReplaceAllString(s, "srt:TOKEN@")), "\n")
		sort.Strings(l)
		return l
	}
	direct, _, _ := run("env")
	viaBash, _, _ := run("env; true") // a list: bash runs it, forking env (SHLVL one higher)
	want := strings.Replace(strings.Join(lines(viaBash), "\n"), "SHLVL=1", "SHLVL=0", 1)
	if got := strings.Join(lines(direct), "\n"); got != want {
		t.Errorf("env without the shell:\n%s\nwant bash's (SHLVL as when bash execs it):\n%s", got, want)
	}
	// And it ran without bash: the order is the runner's (sorted, then
	// what bash would add), not bash's own.
	if l := strings.Split(strings.TrimSpace(direct), "\n"); len(l) < 4 || !sort.StringsAreSorted(l[:len(l)-3]) ||
		!strings.HasPrefix(l[len(l)-3], "PWD=") || l[len(l)-2] != "SHLVL=0" || l[len(l)-1] != "_=/usr/bin/env" {
		t.Errorf("env was not run directly (its environment is in bash's order): %s", direct)
	}
	if !strings.Contains(direct, "SHLVL=0\n") || !strings.Contains(direct, "_=/usr/bin/env\n") || !strings.Contains(direct, "PWD=/") {
		t.Errorf("env lacks what bash adds: %s", direct)
	}
	if out, errs, code := run("no-such-program-srt --x"); code != 127 || out != "" || !strings.Contains(errs, "no-such-program-srt: command not found") {
		t.Errorf("a missing program: exit %v stdout %q stderr %q; want bash's error and 127", code, out, errs)
	}
}
