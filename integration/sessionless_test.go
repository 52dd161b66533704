package integration

// MCP 2026-07-28 done right, through the official Go SDK (v1.8.0, which
// speaks 2026-07-28 by default: no MCP session): state lives in handles the
// server mints (session_id, execution_id) and the model passes back; two
// clients without a token never see each other's variables, executions or
// stdin; named API keys are principals of their own; the Mcp-Param-*
// headers the SDK sends are observed on the wire and checked against the
// body by the server.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// headerLog records the Mcp-* headers of every tools/call that passes a
// recording reverse proxy in front of the server.
type headerLog struct {
	mu    sync.Mutex
	calls []http.Header
}

func (l *headerLog) find(name, value string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.calls {
		if h.Get(name) == value {
			return true
		}
	}
	return false
}

// recordingProxy forwards to the server and logs the tools/call headers.
func recordingProxy(t *testing.T, target string) (string, *headerLog) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	log := &headerLog{}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/call" {
			log.mu.Lock()
			log.calls = append(log.calls, r.Header.Clone())
			log.mu.Unlock()
		}
		r.Host = u.Host // the server answers to loopback names only
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + u.Path, log
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// goSDK connects the official Go SDK to url (with a bearer token when
// given) at its default protocol version.
func goSDK(t *testing.T, endpoint, token string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Minute}
	if token != "" {
		hc.Transport = bearer{token, http.DefaultTransport}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "srt-mcp-go-sdk-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("the Go SDK negotiated %q, want 2026-07-28", v)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil { // the SDK mirrors x-mcp-header arguments of tools it has listed
		t.Fatal(err)
	}
	return cs
}

// sdkCall calls a tool and returns its structured content, isError, and its text.
func sdkCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, bool, string) {
	t.Helper()
	v, isErr, text, err := goCall(cs, name, args)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v, isErr, text
}

func TestSessionlessHandlesGoSDK(t *testing.T) {
	parallel(t)
	requirePythonData(t)
	s := startServe(t, "--backend", "native")
	endpoint, headers := recordingProxy(t, s.url)
	a, b := goSDK(t, endpoint, ""), goSDK(t, endpoint, "")

	// A cell without session_id mints a workspace and says to pass it back.
	v, isErr, text := sdkCall(t, a, "execute_code", map[string]any{"code": "secret = 'from A'", "language": "python"})
	sidA, _ := v["session_id"].(string)
	if isErr || !strings.HasPrefix(sidA, "sess_") || !strings.Contains(fmt.Sprint(v["note"]), `pass session_id "`+sidA+`"`) {
		t.Fatalf("first cell: want a minted session_id and a sentence naming it, got isError=%v %v\n%s", isErr, v, text)
	}
	// The handle round-trip keeps the variables, and travels in a header.
	if v, _, _ := sdkCall(t, a, "execute_code", map[string]any{"code": "secret", "language": "python", "session_id": sidA}); v["stdout"] != "'from A'\n" {
		t.Fatalf("with the handle: %v", v)
	}
	if !headers.find("Mcp-Param-Session-Id", sidA) {
		t.Errorf("the Go SDK did not send Mcp-Param-Session-Id: %s", sidA)
	}
	// Another client without the handle has its own, empty workspace.
	v, _, _ = sdkCall(t, b, "execute_code", map[string]any{"code": "print('secret' in dir())", "language": "python"})
	if v["stdout"] != "False\n" || v["session_id"] == sidA {
		t.Fatalf("a second client saw the first one's workspace: %v", v)
	}
	// Executions: A's async run is A's; B lists nothing of it.
	v, _, _ = sdkCall(t, a, "execute_code_async", map[string]any{"command": "read line; echo got:$line"})
	execA, _ := v["execution_id"].(string)
	if execA == "" {
		t.Fatalf("async: %v", v)
	}
	if v, _, text := sdkCall(t, b, "list_executions", map[string]any{}); strings.Contains(fmt.Sprint(v), execA) || !strings.Contains(text, "pass the session_id") {
		t.Fatalf("B listed A's executions: %v %s", v, text)
	}
	if v, _, _ := sdkCall(t, b, "list_executions", map[string]any{"session_id": sidA}); strings.Contains(fmt.Sprint(v), execA) {
		t.Fatalf("a workspace handle listed an execution of no workspace: %v", v)
	}
	if v, _, _ := sdkCall(t, a, "list_executions", map[string]any{"session_id": sidA}); !strings.Contains(fmt.Sprint(v), "secret") {
		t.Fatalf("A's workspace lists its cells: %v", v)
	}
	// Strict arguments through the SDK: the misspelling is named.
	if _, isErr, text := sdkCall(t, a, "send_stdin", map[string]any{"execution_id": execA, "input": "x\n"}); !isErr || !strings.Contains(text, "did you mean input_data?") {
		t.Fatalf("send_stdin with input: isError=%v %s", isErr, text)
	}
	sdkCall(t, a, "send_stdin", map[string]any{"execution_id": execA, "input_data": "x\n"})
	if !headers.find("Mcp-Param-Execution-Id", execA) {
		t.Errorf("the Go SDK did not send Mcp-Param-Execution-Id: %s", execA)
	}
	if v, _, _ := sdkCall(t, a, "get_execution_output", map[string]any{"execution_id": execA, "wait": true}); !strings.Contains(fmt.Sprint(v["output"]), "got:x") {
		t.Fatalf("the run did not get its line: %v", v)
	}

	// The server checks the header against the body (SEP-2243): a caller
	// whose Mcp-Param-Session-Id names another workspace is refused, -32020.
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"secret","language":"python","session_id":%q},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}}}`, sidA)
	req, _ := http.NewRequest("POST", s.url, strings.NewReader(body))
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
		"Mcp-Method": "tools/call", "Mcp-Name": "execute_code", "Mcp-Param-Session-Id": "sess_000000000000"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(out), "-32020") || strings.Contains(string(out), "from A") {
		t.Fatalf("a mismatched Mcp-Param-Session-Id: %d %s", resp.StatusCode, out)
	}
}

// Named keys (--token-file): each key is a principal; one never lists,
// polls or uses another's executions and workspaces, even holding their
// handles; the single --token still works.
func TestNamedKeysGoSDK(t *testing.T) {
	parallel(t)
	requirePythonData(t)
	dir := reachableTempDir(t)
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte("# test keys\nalice alice-token-0123456789\nbob   bob-token-0123456789abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	s := startServe(t, "--backend", "native", "--token-file", keys, "--token", "single-token-0123456789", "--state-dir", state)
	alice, bob := goSDK(t, s.url, "alice-token-0123456789"), goSDK(t, s.url, "bob-token-0123456789abc")
	v, _, _ := sdkCall(t, alice, "execute_code_async", map[string]any{"command": "sleep 20"})
	execA, _ := v["execution_id"].(string)
	v, _, _ = sdkCall(t, alice, "execute_code", map[string]any{"code": "k = 'alice'", "language": "python"})
	sidA, _ := v["session_id"].(string)
	if execA == "" || sidA == "" {
		t.Fatalf("alice: %v", v)
	}
	if v, _, _ := sdkCall(t, alice, "list_executions", map[string]any{}); !strings.Contains(fmt.Sprint(v), execA) {
		t.Fatalf("alice does not list her own execution: %v", v)
	}
	if v, _, _ := sdkCall(t, bob, "list_executions", map[string]any{}); strings.Contains(fmt.Sprint(v), execA) || strings.Contains(fmt.Sprint(v), "alice") {
		t.Fatalf("bob lists alice's executions: %v", v)
	}
	if _, isErr, text := sdkCall(t, bob, "get_execution_output", map[string]any{"execution_id": execA}); !isErr || !strings.Contains(text, "not_found") {
		t.Fatalf("bob polled alice's execution by its id: %s", text)
	}
	if _, isErr, text := sdkCall(t, bob, "cancel_execution", map[string]any{"execution_id": execA}); !isErr || !strings.Contains(text, "not_found") {
		t.Fatalf("bob cancelled alice's execution: %s", text)
	}
	if _, isErr, text := sdkCall(t, bob, "execute_code", map[string]any{"code": "k", "language": "python", "session_id": sidA}); !isErr || !strings.Contains(text, "session_not_found") {
		t.Fatalf("bob used alice's workspace handle: %s", text)
	}
	if v, _, _ := sdkCall(t, alice, "execute_code", map[string]any{"code": "k", "language": "python", "session_id": sidA}); v["stdout"] != "'alice'\n" {
		t.Fatalf("alice's handle: %v", v)
	}
	// The workspace's audit lines name the key that ran each cell.
	if out, err := exec.Command(nwBin(t), "audit", "--state-dir", state, sidA).CombinedOutput(); err != nil || !strings.Contains(string(out), `"principal":"key:alice"`) {
		t.Fatalf("alice's audit lines do not name her key: %v %s", err, out)
	}
	// The single --token keeps working, as a principal of its own.
	single := goSDK(t, s.url, "single-token-0123456789")
	if v, _, _ := sdkCall(t, single, "list_executions", map[string]any{}); strings.Contains(fmt.Sprint(v), execA) {
		t.Fatalf("the --token principal lists alice's executions: %v", v)
	}
	// A wrong key is refused before any tool runs.
	resp, err := http.Post(s.url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no key: %d", resp.StatusCode)
	}
}

// Seed 003's callers, exactly as its §7.1 and §10 write them, with curl and
// no MCP library: one JSON-RPC tools/call POSTed with a bearer token (no
// initialize, no session, no protocol version) and GET /mcp/events.
func TestSeed003PlainJSONRPCCurl(t *testing.T) {
	parallel(t)
	requirePythonData(t)
	s := startServe(t, "--backend", "native", "--token", "seed003-token-0123456789")
	curl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("curl", append([]string{"-sS", "--max-time", "60"}, args...)...).CombinedOutput()
		if err != nil && !strings.Contains(err.Error(), "exit status 28") { // 28: the events stream timed out, as meant
			t.Fatalf("curl %v: %v %s", args, err, out)
		}
		return string(out)
	}
	auth := "Authorization: Bearer seed003-token-0123456789"
	call := `{"jsonrpc": "2.0", "id": "some-id", "method": "tools/call", "params": {"name": "sandbox.run_code", "arguments": {"conversationId": "abc123", "language": "python", "code": "print('hello')\nopen('result.csv', 'w').write('a,b\\n1,2\\n')"}}}`
	out := curl("-X", "POST", s.url, "-H", "Content-Type: application/json", "-H", auth, "-d", call)
	var rpc struct {
		ID     string `json:"id"`
		Result struct {
			Structured struct {
				Success bool   `json:"success"`
				Output  string `json:"output"`
				Files   []struct {
					Name string `json:"name"`
					URL  string `json:"url"`
				} `json:"files"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(out), &rpc); err != nil || rpc.ID != "some-id" || !rpc.Result.Structured.Success ||
		rpc.Result.Structured.Output != "hello\n" || len(rpc.Result.Structured.Files) != 1 || rpc.Result.Structured.Files[0].Name != "result.csv" {
		t.Fatalf("seed 003 tools/call with curl: %v\n%s", err, out)
	}
	if got := curl(rpc.Result.Structured.Files[0].URL); got != "a,b\n1,2\n" {
		t.Fatalf("the file's signed URL: %q", got)
	}
	// The conversation's files persist between its calls.
	again := strings.Replace(call, `print('hello')\nopen('result.csv', 'w').write('a,b\\n1,2\\n')`, `print(open('result.csv').read())`, 1)
	if out := curl("-X", "POST", s.url, "-H", "Content-Type: application/json", "-H", auth, "-d", again); !strings.Contains(out, `a,b\n1,2`) {
		t.Fatalf("the conversation's file in a second call: %s", out)
	}
	if out := curl("-X", "POST", s.url, "-H", "Content-Type: application/json", "-H", auth, "-d", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sandbox.list_runners","arguments":{}}}`); !strings.Contains(out, "python") {
		t.Fatalf("sandbox.list_runners: %s", out)
	}
	if out := curl("-X", "POST", s.url, "-H", "Content-Type: application/json", "-H", auth, "-d", `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); !strings.Contains(out, `"sandbox_run_code"`) || strings.Contains(out, `"sandbox.run_code"`) {
		t.Fatalf("tools/list: %s", out)
	}
	// Without the token: 401, nothing runs.
	if out := curl("-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", s.url, "-H", "Content-Type: application/json", "-d", call); out != "401" {
		t.Fatalf("no token: %s", out)
	}
	// GET /mcp/events: an SSE stream that says it is alive.
	events := strings.TrimSuffix(s.url, "/mcp") + "/mcp/events"
	if out := curl("-N", "--max-time", "2", "-D", "-", events, "-H", auth); !strings.Contains(out, "text/event-stream") || !strings.Contains(out, ": srt-mcp events") {
		t.Fatalf("GET /mcp/events: %s", out)
	}
	if out := curl("-o", "/dev/null", "-w", "%{http_code}", events); out != "401" {
		t.Fatalf("GET /mcp/events without the token: %s", out)
	}
}

// MCP's 2024-11-05 HTTP+SSE transport, through the TypeScript SDK's
// SSEClientTransport, behind the same guard: execute_code (a command and
// cells that keep their state) and sandbox.run_code.
func TestSSETransportTypeScript(t *testing.T) {
	parallel(t)
	dir := mcpClients(t)
	requirePythonData(t)
	s := startServe(t, "--backend", "native", "--token", "sse-token-0123456789")
	sse := strings.TrimSuffix(s.url, "/mcp") + "/sse"
	cmd := exec.Command("node", "sse.mjs", "--url", sse, "--token", "sse-token-0123456789")
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if n := nodeChecks(t, "sse", out); n < 5 || err != nil {
		t.Fatalf("sse.mjs: %d checks, %v\n%s\n%s", n, err, out, stderr.String())
	}
	// The same guard: no token, no stream; a foreign Origin, 403.
	resp, err := http.Get(sse)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /sse without the token: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", sse, nil)
	req.Header.Set("Authorization", "Bearer sse-token-0123456789")
	req.Header.Set("Origin", "https://evil.example")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("GET /sse from a foreign Origin: %d", resp.StatusCode)
	}
}

// --replica-id: every handle this server mints names it (workspace,
// execution and MCP session ids), so a stock proxy can route on the
// Mcp-Param-* or Mcp-Session-Id header; a handle naming another replica is
// refused with a message saying where it belongs.
func TestReplicaNamedHandles(t *testing.T) {
	parallel(t)
	requirePythonData(t)
	if out, err := exec.Command(nwBin(t), "serve", "--replica-id", "Bad_Name", "--port", "1").CombinedOutput(); err == nil || !strings.Contains(string(out), "--replica-id") {
		t.Fatalf("a bad --replica-id: %v %s", err, out)
	}
	s := startServe(t, "--backend", "native", "--replica-id", "srt-7")
	cs := goSDK(t, s.url, "")
	v, _, _ := sdkCall(t, cs, "execute_code", map[string]any{"code": "y = 1", "language": "python"})
	if sid, _ := v["session_id"].(string); !strings.HasPrefix(sid, "sess_srt-7_") {
		t.Fatalf("a minted workspace handle does not name the replica: %v", v)
	}
	if id, _ := v["execution_id"].(string); !strings.HasPrefix(id, "exec_srt-7_") {
		t.Fatalf("an execution id does not name the replica: %v", v)
	}
	if v, isErr, text := sdkCall(t, cs, "execute_code", map[string]any{"code": "y", "language": "python", "session_id": "sess_srt-3_0123456789ab"}); !isErr || !strings.Contains(fmt.Sprint(v["error"]), `belongs to replica "srt-3"`) {
		t.Fatalf("another replica's handle: %s", text)
	}
	// A 2025-11-25 client's Mcp-Session-Id names the replica too.
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, _ := http.NewRequest("POST", s.url, strings.NewReader(init))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); !strings.HasPrefix(sid, "mcp-session-srt-7-") {
		t.Fatalf("Mcp-Session-Id %q does not name the replica", sid)
	}
}

// The MCP TypeScript SDK (v2, @modelcontextprotocol/client) pinned to
// 2026-07-28: two clients, handles only (modern.mjs).
func TestSessionlessHandlesTypeScript(t *testing.T) {
	parallel(t)
	dir := mcpClients(t)
	requirePythonData(t)
	s := startServe(t, "--backend", "native")
	cmd := exec.Command("node", "modern.mjs", "--url", s.url)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if n := nodeChecks(t, "modern", out); n < 6 || err != nil {
		t.Fatalf("modern.mjs: %d checks, %v\n%s\n%s", n, err, out, stderr.String())
	}
}

// mcp-remote 0.15.1 (from npm) bridging a 2026-07-28 host to the server:
// it forwards tool calls without their Mcp-Param-* headers, which the
// server serves from the body (it refused them with -32020, and no handle
// worked through the bridge); a header that contradicts the body is still
// refused (TestSessionlessHandlesGoSDK). With a key, through the bridge's
// --header.
func TestMCPRemoteBridge(t *testing.T) {
	parallel(t)
	requirePythonData(t)
	dir := mcpClients(t)
	s := startServe(t, "--backend", "native", "--token", "bridge-token-0123456789")
	cmd := exec.Command("node", "remote.mjs", "--url", s.url, "--token", "bridge-token-0123456789")
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if n := nodeChecks(t, "remote.mjs", out); err != nil || n < 3 {
		t.Fatalf("remote.mjs: %d checks, %v\n%s\n%s", n, err, out, stderr.String())
	}
}
