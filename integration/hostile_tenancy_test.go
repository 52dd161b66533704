package integration

// Hostile tenants: two named API keys (--token-file) on one server, one
// trying every door to reach the other's handles — conversations, MCP
// sessions, data sessions, LibreChat storage sessions, signed URLs, ids
// the server derives — and a sandbox naming files to attack the client
// that shows them. Each test was seen failing on the code before its fix.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-0123456789abc"
)

// tenants is a server with two named keys, alice and bob.
type tenants struct {
	*mcpServer
	t     *testing.T
	state string
}

func (s *tenants) base() string { return strings.TrimSuffix(s.url, "/mcp") }

// startTenants starts srt-mcp with named keys alice and bob.
func startTenants(t *testing.T, extra ...string) *tenants {
	t.Helper()
	requirePythonData(t)
	dir := reachableTempDir(t)
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte("alice "+aliceToken+"\nbob "+bobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	args := append([]string{"--backend", "native", "--token-file", keys, "--state-dir", state, "--file-secret", testFileSecret}, extra...)
	return &tenants{mcpServer: startServe(t, args...), t: t, state: state}
}

// keyClient is an MCP client (mcp-go, a 2025-11-25 session) with a key.
func keyClient(t *testing.T, endpoint, token string) *client.Client {
	return sessionClient(t, endpoint, token, false)
}

// toolText calls a tool and returns its structured content, whether it is
// an error, and its text (for asserting on either).
func toolText(t *testing.T, c *client.Client, name string, args map[string]any) (map[string]any, bool, string) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var v map[string]any
	_ = json.Unmarshal(b, &v)
	var text strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return v, res.IsError, text.String()
}

// rawMCP posts one JSON-RPC message to /mcp with a key and, when given, an
// Mcp-Session-Id; it returns the status, headers and body.
func rawMCP(t *testing.T, endpoint, token, sid, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// aliceSessions opens n MCP sessions as alice (clients alice-0...): their ids.
func aliceSessions(t *testing.T, s *tenants, n int) []string {
	t.Helper()
	var sids []string
	for i := 0; i < n; i++ {
		code, hdr, body := rawMCP(t, s.url, aliceToken, "", initBody(fmt.Sprint("alice-", i)))
		if code != 200 || hdr.Get("Mcp-Session-Id") == "" {
			t.Fatalf("alice's session %d: %d %s", i, code, body)
		}
		sids = append(sids, hdr.Get("Mcp-Session-Id"))
	}
	return sids
}

// aliceSleeping opens an MCP session as alice and starts a 30 s sleep in
// it: her session's id and the execution's.
func aliceSleeping(t *testing.T, s *tenants) (sid, execID string) {
	t.Helper()
	code, hdr, body := rawMCP(t, s.url, aliceToken, "", initBody("alice"))
	sid = hdr.Get("Mcp-Session-Id")
	if code != 200 || sid == "" {
		t.Fatalf("alice's initialize: %d %s", code, body)
	}
	rawMCP(t, s.url, aliceToken, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	_, _, body = rawMCP(t, s.url, aliceToken, sid, callBody(2, "execute_code_async", map[string]any{"command": "sleep 30"}))
	execID = between(body, `"execution_id":"`, `"`)
	if execID == "" {
		t.Fatalf("alice's execute_code_async: %s", body)
	}
	return sid, execID
}

// request sends method url with body and the headers hdr (a "Host" entry
// sets the request's Host); the status and the body.
func request(t *testing.T, method, url, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func initBody(name string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"` + name + `","version":"1"}}}`
}

func callBody(id int, name string, args map[string]any) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": name, "arguments": args}})
	return string(b)
}

// playgroundCall is one playground API request with a key.
func playgroundCall(t *testing.T, method, u, token string, body io.Reader, contentType string) (int, string) {
	t.Helper()
	var b []byte
	if body != nil {
		b, _ = io.ReadAll(body)
	}
	hdr := map[string]string{}
	if contentType != "" {
		hdr["Content-Type"] = contentType
	}
	if token != "" {
		hdr["Authorization"] = "Bearer " + token
	}
	return request(t, method, u, string(b), hdr)
}

// playgroundRunAs runs code in a playground conversation with a key and
// returns the run's event stream as text.
func playgroundRunAs(t *testing.T, base, token, conv, code string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"language": "python", "code": code, "conversation": conv})
	_, out := playgroundCall(t, "POST", base+"/playground/api/run", token, bytes.NewReader(b), "application/json")
	return out
}

// The playground's conversations belong to the key that made them: another
// key naming the same conversation, or a name built like the id the server
// derives for another key's seed 003 conversation, reaches none of its
// files and plants nothing in it. (The playground hashed whatever
// conversation string it was given: bob listed, read and wrote alice's
// files, and a module he planted on her PYTHONPATH ran in her next run.)
func TestHostileTenancyPlaygroundConversations(t *testing.T) {
	parallel(t)
	s := startTenants(t)
	base := s.base()
	out := playgroundRunAs(t, base, aliceToken, "c1", `open("alice-secret.txt", "w").write("alice's data")`)
	if !strings.Contains(out, `"exit_code":0`) {
		t.Fatalf("alice's playground run: %s", out)
	}
	// bob, the same conversation name.
	code, body := playgroundCall(t, "GET", base+"/playground/api/files?conversation=c1", bobToken, nil, "")
	if strings.Contains(body, "alice-secret") {
		t.Errorf("bob lists alice's playground conversation: %d %s", code, body)
	}
	out = playgroundRunAs(t, base, bobToken, "c1", `import os; print(sorted(os.listdir(".")))`+"\n"+
		`open("sitecustomize.py", "w").write("print('PLANTED-BY-BOB')")`)
	if strings.Contains(out, "alice-secret") {
		t.Errorf("bob's run sees alice's files: %s", out)
	}
	out = playgroundRunAs(t, base, aliceToken, "c1", `import os; print(sorted(os.listdir(".")))`)
	if strings.Contains(out, "sitecustomize") || !strings.Contains(out, "alice-secret") {
		t.Errorf("alice's conversation after bob's run: %s", out)
	}
	// bob, a conversation name built like the id derived for alice's
	// sandbox.run_code conversation "c2".
	alice := keyClient(t, s.url, aliceToken)
	if v, isErr, text := toolText(t, alice, "sandbox.run_code", map[string]any{"conversationId": "c2", "language": "python",
		"code": `open("run-code-secret.txt", "w").write("alice's run_code data")`}); isErr || v["success"] != true {
		t.Fatalf("alice's run_code: %s", text)
	}
	for _, conv := range []string{"key:alice\x00c2", "c2"} {
		_, body := playgroundCall(t, "GET", base+"/playground/api/files?conversation="+url.QueryEscape(conv), bobToken, nil, "")
		if strings.Contains(body, "run-code-secret") {
			t.Errorf("bob's playground conversation %q lists alice's run_code conversation: %s", conv, body)
		}
		var mp bytes.Buffer
		mw := multipart.NewWriter(&mp)
		fw, _ := mw.CreateFormFile("file", "planted.txt")
		_, _ = fw.Write([]byte("bob was here"))
		mw.Close()
		playgroundCall(t, "POST", base+"/playground/api/upload?conversation="+url.QueryEscape(conv), bobToken, &mp, mw.FormDataContentType())
	}
	v, _, text := toolText(t, alice, "sandbox.run_code", map[string]any{"conversationId": "c2", "language": "bash", "code": "ls"})
	if strings.Contains(text, "planted") || !strings.Contains(fmt.Sprint(v["output"]), "run-code-secret") {
		t.Errorf("alice's run_code conversation after bob's uploads: %s", text)
	}
}

// An MCP session belongs to the key that opened it: another key presenting
// its Mcp-Session-Id (or the 2024-11-05 transport's sessionId) is told the
// session does not exist, and lists, cancels, runs and deletes nothing in
// it.
func TestHostileTenancyMCPSessions(t *testing.T) {
	parallel(t)
	s := startTenants(t)
	sid, execID := aliceSleeping(t, s)
	for _, tc := range []struct{ name, body string }{
		{"list_executions", callBody(3, "list_executions", map[string]any{})},
		{"cancel_execution", callBody(4, "cancel_execution", map[string]any{"execution_id": execID, "force": true})},
		{"execute_code", callBody(5, "execute_code", map[string]any{"code": "print('bob ran here')", "language": "python"})},
	} {
		code, _, body := rawMCP(t, s.url, bobToken, sid, tc.body)
		if code != http.StatusNotFound || strings.Contains(body, execID) || strings.Contains(body, "bob ran here") {
			t.Errorf("bob's %s with alice's Mcp-Session-Id: %d %.300s (want 404)", tc.name, code, body)
		}
	}
	req, _ := http.NewRequest("DELETE", s.url, nil)
	req.Header.Set("Authorization", "Bearer "+bobToken)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("bob's DELETE of alice's session: %d (want 404)", resp.StatusCode)
		}
	}
	_, _, body := rawMCP(t, s.url, aliceToken, sid, callBody(6, "get_execution_status", map[string]any{"execution_id": execID}))
	if !strings.Contains(body, `"status":"running"`) {
		t.Errorf("alice's execution after bob's attempts: %.300s", body)
	}
	rawMCP(t, s.url, aliceToken, sid, callBody(8, "cancel_execution", map[string]any{"execution_id": execID, "force": true})) // no drain to wait for

	// The 2024-11-05 transport: bob posts to alice's SSE session.
	req, _ = http.NewRequest("GET", s.base()+"/sse", nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set("Accept", "text/event-stream")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			events <- sc.Text()
		}
		close(events)
	}()
	endpoint := ""
	for line := range events {
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, "sessionId=") {
			endpoint = strings.TrimPrefix(line, "data: ")
			break
		}
	}
	if endpoint == "" {
		t.Fatal("no endpoint event on alice's SSE stream")
	}
	post := func(token, body string) int {
		req, _ := http.NewRequest("POST", s.base()+endpoint, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(bobToken, initBody("bob")); code < 400 {
		t.Errorf("bob's initialize on alice's SSE session: %d (want a refusal)", code)
	}
	if code := post(bobToken, callBody(7, "execute_code", map[string]any{"command": "echo BOB-IN-ALICE-SSE"})); code < 400 {
		t.Errorf("bob's tools/call on alice's SSE session: %d (want a refusal)", code)
	}
	timeout := time.After(3 * time.Second)
	for {
		select {
		case line, ok := <-events:
			if !ok {
				return
			}
			if strings.Contains(line, "BOB-IN-ALICE-SSE") || strings.Contains(line, `"id":7`) {
				t.Fatalf("bob's call ran in alice's SSE session: %s", line)
			}
		case <-timeout:
			return
		}
	}
}

func between(s, start, end string) string {
	i := strings.Index(s, start)
	if i < 0 {
		return ""
	}
	s = s[i+len(start):]
	j := strings.Index(s, end)
	if j < 0 {
		return ""
	}
	return s[:j]
}

// LibreChat storage sessions belong to the LibreChat principal that made
// them: an MCP key reading one by its id finds nothing (and does not adopt
// it: the LibreChat client still downloads its file), and one LibreChat
// user's files are not another's.
func TestHostileTenancyLibreChatStorage(t *testing.T) {
	parallel(t)
	pemFile, mint, priv := lcKeys(t)
	s := startTenants(t, "--librechat-api-key", lcKey, "--librechat-jwt-public-key", pemFile)
	lc := s.base() + "/v1/librechat"
	upload := func(hdr map[string]string, name, content string) (string, string) {
		code, b := lcUploadOne(lc, hdr, name, content)
		var v struct {
			SessionID string `json:"session_id"`
			Files     []struct {
				FileID string `json:"fileId"`
			} `json:"files"`
		}
		if json.Unmarshal([]byte(b), &v) != nil || v.SessionID == "" || len(v.Files) != 1 {
			t.Fatalf("librechat upload: %d %s", code, b)
		}
		return v.SessionID, v.Files[0].FileID
	}
	get := func(u string, hdr map[string]string) (int, string) {
		return request(t, "GET", u, "", hdr)
	}
	apiKey := map[string]string{"X-API-Key": lcKey}
	sid, fid := upload(apiKey, "lc-secret.txt", "librechat's data")
	alice := keyClient(t, s.url, aliceToken)
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"read_artifact", map[string]any{"session_id": sid, "path": "/mnt/data/lc-secret.txt"}},
		{"list_artifacts", map[string]any{"session_id": sid}},
		{"run_python", map[string]any{"session_id": sid, "code": "print(open('lc-secret.txt').read())"}},
		{"execute_code", map[string]any{"session_id": sid, "command": "cat lc-secret.txt"}},
	} {
		v, isErr, text := toolText(t, alice, tc.tool, tc.args)
		if !isErr || strings.Contains(text+fmt.Sprint(v), "librechat's data") || strings.Contains(text+fmt.Sprint(v), "lc-secret") {
			t.Errorf("alice's %s of a LibreChat storage session: %s %v", tc.tool, text, v)
		}
	}
	if code, body := get(lc+"/download/"+sid+"/"+fid, apiKey); code != 200 || body != "librechat's data" {
		t.Errorf("the LibreChat client's own download after alice's attempts: %d %q", code, body)
	}
	// Two LibreChat users (JWT subjects) are two principals.
	u1 := map[string]string{"Authorization": "Bearer " + mint("user-1", priv)}
	u2 := map[string]string{"Authorization": "Bearer " + mint("user-2", priv)}
	sid1, fid1 := upload(u1, "u1.txt", "user one's data")
	if code, body := get(lc+"/download/"+sid1+"/"+fid1, u2); code != 404 || strings.Contains(body, "user one") {
		t.Errorf("user-2 downloaded user-1's file: %d %q", code, body)
	}
	if code, body := get(lc+"/files/"+sid1, u2); code != 404 || strings.Contains(body, fid1) {
		t.Errorf("user-2 listed user-1's files: %d %q", code, body)
	}
	b, _ := json.Marshal(map[string]any{"lang": "py", "code": "import os; print(sorted(os.listdir('.')))",
		"files": []map[string]any{{"id": fid1, "session_id": sid1, "name": "u1.txt"}}})
	req, _ := http.NewRequest("POST", lc+"/exec", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", u2["Authorization"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(out), "'u1.txt'") {
		t.Errorf("user-2's exec copied in user-1's file: %s", out)
	}
	if code, body := get(lc+"/download/"+sid1+"/"+fid1, u1); code != 200 || body != "user one's data" {
		t.Errorf("user-1's own download: %d %q", code, body)
	}
}

// A signed download URL names one incarnation of one session: after the
// session closes, the same id opened again (by another key) serves nothing
// through the old URL.
func TestHostileTenancySignedURLIncarnation(t *testing.T) {
	parallel(t)
	s := startTenants(t)
	alice, bob := keyClient(t, s.url, aliceToken), keyClient(t, s.url, bobToken)
	const sid = "sess_0a1b2c3d4e5f"
	upload := func(c *client.Client, content string) map[string]any {
		v, isErr, text := toolText(t, c, "upload_file", map[string]any{"session_id": sid, "filename": "report.txt",
			"content_base64": base64.StdEncoding.EncodeToString([]byte(content))})
		if isErr {
			t.Fatalf("upload_file: %s", text)
		}
		return v
	}
	upload(alice, "alice's report")
	v, _, _ := toolText(t, alice, "list_artifacts", map[string]any{"session_id": sid})
	arts, _ := v["artifacts"].([]any)
	if len(arts) != 1 {
		t.Fatalf("list_artifacts: %v", v)
	}
	u := arts[0].(map[string]any)["download_url"].(string)
	if code, _, body := httpGet(t, u); code != 200 || string(body) != "alice's report" {
		t.Fatalf("alice's URL: %d %q", code, body)
	}
	if _, isErr, text := toolText(t, alice, "close_session", map[string]any{"session_id": sid}); isErr {
		t.Fatalf("close_session: %s", text)
	}
	upload(bob, "bob's private report")
	if code, _, body := httpGet(t, u); code == 200 || strings.Contains(string(body), "bob") {
		t.Errorf("alice's old URL opened bob's file in a new session under the same id: %d %q", code, body)
	}
}

// Ids the server derives for one key are not ids another key can take: bob
// opening a session under the id the server used to derive for alice's
// conversation does not lock alice out of it.
func TestHostileTenancyDerivedIDs(t *testing.T) {
	parallel(t)
	s := startTenants(t)
	alice, bob := keyClient(t, s.url, aliceToken), keyClient(t, s.url, bobToken)
	h := sha256.Sum256([]byte("srt-mcp conversation\x00" + "key:alice\x00c3"))
	derived := "sess_" + hex.EncodeToString(h[:6])
	if _, isErr, text := toolText(t, bob, "upload_file", map[string]any{"session_id": derived, "filename": "squat.txt",
		"content_base64": base64.StdEncoding.EncodeToString([]byte("squatted"))}); isErr {
		t.Logf("bob could not open %s: %s", derived, text)
	}
	v, isErr, text := toolText(t, alice, "sandbox.run_code", map[string]any{"conversationId": "c3", "language": "bash", "code": "ls; echo ok"})
	if isErr || v["success"] != true || strings.Contains(text, "squat") {
		t.Errorf("alice's conversation after bob took its derived id: %s", text)
	}
}

// A file a sandbox names with terminal escapes does not reach a client's
// text raw: run_python's and list_artifacts' replies show no control
// characters (a terminal printing them would retitle and clear itself).
func TestHostileSandboxNamedFiles(t *testing.T) {
	parallel(t)
	s := startTenants(t)
	alice := keyClient(t, s.url, aliceToken)
	v, _, text := toolText(t, alice, "run_python", map[string]any{"code": `open("rt\x1b]0;PWNED\x07\x1b[2J\u202e.txt", "w").write("x"); print("made")`})
	sid, _ := v["session_id"].(string)
	if sid == "" {
		t.Fatalf("run_python: %s", text)
	}
	check := func(what string, v map[string]any, text string) {
		b, _ := json.Marshal(v)
		var plain any
		_ = json.Unmarshal(b, &plain)
		flat := fmt.Sprint(plain)
		for _, bad := range []string{"\x1b", "\x07", "\u202e"} {
			if strings.Contains(text, bad) || strings.Contains(flat, bad) {
				t.Errorf("%s carries %q raw: text %q", what, bad, text)
			}
		}
		if !strings.Contains(text+flat, "PWNED") {
			t.Errorf("%s does not name the file at all (it should, made safe): %q %v", what, text, v)
		}
	}
	check("run_python", v, text)
	v, _, text = toolText(t, alice, "list_artifacts", map[string]any{"session_id": sid})
	check("list_artifacts", v, text)
	v, _, text = toolText(t, alice, "execute_code", map[string]any{"code": `open("k\x1b[31mred.txt", "w").write("x")`, "language": "python", "session_id": sid})
	if strings.Contains(text, "\x1b") || strings.Contains(fmt.Sprint(v["artifacts"]), "\x1b") {
		t.Errorf("execute_code's artifacts carry an escape raw: %q %v", text, v["artifacts"])
	}
}
