package integration

// Hostile keys: a remote caller holding one API key (or a LibreChat JWT
// subject, or none) against the bounds and bindings of the tenant model —
// the places MCP sessions and event streams hold, the per-caller rate
// limit, the LibreChat Code API's stored sessions, the retained output —
// and a sandbox naming things (hosts, variables) a client or the operator
// is shown. The first tests are findings (each failed on the code it was
// written against); the ones after "Attacks that held" pin refusals that
// worked, for their regression value.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// hkUUIDSession is an Mcp-Session-Id of the server's form that no
// initialize minted.
func hkUUIDSession() string {
	h := randHex(16)
	return "mcp-session-" + h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:32]
}

// hkModernMeta is the _meta a 2026-07-28 request carries.
var hkModernMeta = map[string]any{
	"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
	"io.modelcontextprotocol/clientCapabilities": map[string]any{},
	"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "srt-mcp-hostile-keys", "version": "1"},
}

// hkModern posts one 2026-07-28 request (with its standard headers) with a
// key and, when given, an Mcp-Session-Id; the status and body (-1 and the
// error when there was no reply). Safe in a goroutine.
func hkModern(client *http.Client, endpoint, token, sid, method string, params map[string]any) (int, string) {
	p := map[string]any{"_meta": hkModernMeta}
	for k, v := range params {
		p[k] = v
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": p})
	req, _ := http.NewRequest("POST", endpoint, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := client.Do(req)
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// hkSSEStatus opens GET /sse with a key and returns its status; a stream
// that opened is closed again at once unless keep is set (then it stays
// open until the test ends).
func hkSSEStatus(t *testing.T, base, token string, keep bool) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/sse", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !keep {
		resp.Body.Close()
		cancel()
	} else {
		t.Cleanup(func() { cancel(); resp.Body.Close() })
	}
	return resp.StatusCode
}

// hkPost posts body to an SSE stream's message endpoint as token's
// principal; the status.
func hkPost(t *testing.T, base, endpoint, token, body string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", base+endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// hkSSEReply is the line of an SSE stream that answers request id ("" when
// none came within d).
func hkSSEReply(s *sseStream, id int, d time.Duration) string {
	re := regexp.MustCompile(fmt.Sprintf(`"id":%d[,}]`, id))
	for deadline := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		s.mu.Lock()
		for _, l := range s.lines {
			if re.MatchString(l) {
				s.mu.Unlock()
				return l
			}
		}
		s.mu.Unlock()
		if time.Now().After(deadline) {
			return ""
		}
	}
}

// hkRaw reports the control and direction-changing characters in s, for
// messages.
func hkRaw(s string) []string {
	var bad []string
	for _, c := range []string{"\x1b", "\x07", "\u202e"} {
		if strings.Contains(s, c) {
			bad = append(bad, fmt.Sprintf("%q", c))
		}
	}
	return bad
}

// An initialize that carries an Mcp-Session-Id header (a made-up one, or
// the caller's own live session's) skips the place an initialize must
// hold: mcpFilter takes the place only when the header is absent, while
// mcp-go mints a new session for every initialize whatever the header
// says. A key at --max-mcp-sessions-per-caller keeps minting sessions, and
// the 8 KiB clientInfo bound (and the drain's refusal) is skipped the same
// way: each such session keeps megabytes of clientInfo until --session-ttl.
func TestHostileKeysInitializeWithSessionHeader(t *testing.T) {
	parallel(t)
	s := startTenants(t, "--max-mcp-sessions-per-caller", "3")
	sids := aliceSessions(t, s, 3)
	if code, hdr, _ := rawMCP(t, s.url, aliceToken, "", initBody("alice-3")); code < 400 || hdr.Get("Mcp-Session-Id") != "" {
		t.Fatalf("alice's 4th initialize was not refused (%d): the bound this test attacks is not in force", code)
	}
	for _, sid := range []string{hkUUIDSession(), "anything", sids[0]} {
		code, hdr, body := rawMCP(t, s.url, aliceToken, sid, initBody("alice-with-header"))
		if minted := hdr.Get("Mcp-Session-Id"); minted != "" {
			t.Errorf("alice at her bound (3 MCP sessions) sent initialize with Mcp-Session-Id %q and was given session %s (%d %.120s): the header skips the place an initialize holds",
				sid, minted, code, body)
		}
	}
	// The method spelt with a JSON escape is the same initialize to mcp-go.
	escaped := strings.Replace(initBody("alice-escaped"), `"initialize"`, `"\u0069nitialize"`, 1)
	if code, hdr, body := rawMCP(t, s.url, aliceToken, sids[0], escaped); hdr.Get("Mcp-Session-Id") != "" {
		t.Errorf("alice at her bound sent initialize spelt \\u0069nitialize with her session's id and was given session %s (%d %.120s)",
			hdr.Get("Mcp-Session-Id"), code, body)
	}
	huge := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"` +
		strings.Repeat("x", 1<<20) + `","version":"1"}}}`
	if code, hdr, _ := rawMCP(t, s.url, bobToken, "made-up", huge); code < 400 || hdr.Get("Mcp-Session-Id") != "" {
		t.Errorf("an initialize with a 1 MiB clientInfo and a made-up Mcp-Session-Id: %d, session %q (want the refusal the same initialize gets without the header)",
			code, hdr.Get("Mcp-Session-Id"))
	}
}

// mcpFilter decides whether a POST is an initialize by decoding the body
// into a struct with params._meta as an object; when that fails (params is
// not an object, or _meta is a number) it takes no place and checks no
// clientInfo, but mcp-go, decoding only the method, still mints (and keeps)
// a session for it.
func TestHostileKeysInitializeBodyShapes(t *testing.T) {
	parallel(t)
	s := startTenants(t, "--max-mcp-sessions-per-caller", "1")
	if code, hdr, body := rawMCP(t, s.url, aliceToken, "", initBody("alice")); code != 200 || hdr.Get("Mcp-Session-Id") == "" {
		t.Fatalf("alice's first session: %d %s", code, body)
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"_meta":1,"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"_meta":"x","protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":[]}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":"x"}`,
	} {
		code, hdr, reply := rawMCP(t, s.url, aliceToken, "", body)
		if minted := hdr.Get("Mcp-Session-Id"); minted != "" {
			t.Errorf("alice at her bound (1 MCP session) was given session %s for %s (%d %.120s)", minted, body, code, reply)
		}
	}
	huge := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"_meta":1,"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"` +
		strings.Repeat("x", 1<<20) + `","version":"1"}}}`
	if code, hdr, _ := rawMCP(t, s.url, bobToken, "", huge); code < 400 || hdr.Get("Mcp-Session-Id") != "" {
		t.Errorf(`an initialize with a 1 MiB clientInfo and "_meta":1: %d, session %q (want a refusal)`, code, hdr.Get("Mcp-Session-Id"))
	}
}

// The per-caller rate limit keys an MCP request by its Mcp-Session-Id
// whatever that id is: a caller that invents a new id for every request
// gets a fresh bucket each time. A 2026-07-28 request is served whatever
// Mcp-Session-Id it carries (the header means nothing to it), so a key
// runs tools at any rate (and a legacy initialize with an invented id is
// unlimited the same way).
func TestHostileKeysRateLimitInventedSessionIDs(t *testing.T) {
	parallel(t)
	s := startTenants(t, "--rate-limit", "1")
	client := &http.Client{Timeout: 30 * time.Second}
	flood := func(token string, invent bool) (ok, limited int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 25; i++ {
					sid := ""
					if invent {
						sid = hkUUIDSession()
					}
					code, body := hkModern(client, s.url, token, sid, "tools/list", nil)
					mu.Lock()
					switch {
					case code == http.StatusTooManyRequests:
						limited++
					case code == 200 && strings.Contains(body, "execute_code"):
						ok++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return ok, limited
	}
	if ok, limited := flood(bobToken, false); limited == 0 {
		t.Fatalf("200 requests of one key at --rate-limit 1 were all served (%d): the limit this test attacks is not in force", ok)
	}
	if ok, limited := flood(aliceToken, true); limited == 0 {
		t.Errorf("200 requests of one key at --rate-limit 1 (burst 100), each with a new made-up Mcp-Session-Id: %d served, none refused (the limit is keyed by the header's value)", ok)
	}
}

// DELETE /mcp with the id of a 2024-11-05 SSE session (the same id space)
// frees the place the SSE stream holds and unbinds the id from its key,
// while the stream goes on serving calls: a key opens SSE streams past
// --max-mcp-sessions-per-caller, and after the DELETE another key posting
// to the stream's /message is served in it.
func TestHostileKeysSSEDeleteFreesPlace(t *testing.T) {
	parallel(t)
	s := startTenants(t, "--max-mcp-sessions-per-caller", "2")
	base := s.base()
	a1, _ := openSSE(t, base, aliceToken), openSSE(t, base, aliceToken)
	if code := hkSSEStatus(t, base, aliceToken, false); code != http.StatusTooManyRequests {
		t.Fatalf("alice's third SSE stream: %d (want 429: the bound this test attacks)", code)
	}
	sid := a1.endpoint[strings.Index(a1.endpoint, "sessionId=")+len("sessionId="):]
	req, _ := http.NewRequest("DELETE", s.url, nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	third := hkSSEStatus(t, base, aliceToken, true)
	hkPost(t, base, a1.endpoint, aliceToken, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"a1","version":"1"}}}`)
	hkPost(t, base, a1.endpoint, aliceToken, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	hkPost(t, base, a1.endpoint, aliceToken, callBody(2, "execute_code", map[string]any{"command": "echo ALICE-STREAM-SERVED"}))
	served := strings.Contains(hkSSEReply(a1, 2, 20*time.Second), "ALICE-STREAM-SERVED")
	if third == 200 && served {
		t.Errorf("DELETE /mcp of alice's SSE session (%d) freed its place (a third stream opened past --max-mcp-sessions-per-caller 2) while the stream still serves calls", resp.StatusCode)
	}
	code := hkPost(t, base, a1.endpoint, bobToken, callBody(3, "execute_code", map[string]any{"command": "echo BOB-IN-ALICE-STREAM"}))
	if line := hkSSEReply(a1, 3, 5*time.Second); strings.Contains(line, "BOB-IN-ALICE-STREAM") {
		t.Errorf("after alice's DELETE of her SSE session's id, bob's post to its /message (%d) ran in her stream: %.200s", code, line)
	}
}

// The 8 KiB bound on initialize's clientInfo holds on /mcp only: the
// 2024-11-05 transport's POST /message initialize keeps a clientInfo as
// large as the body cap (4 MiB) for the stream's life, in every one of a
// key's SSE sessions.
func TestHostileKeysSSEClientInfo(t *testing.T) {
	parallel(t)
	s := startTenants(t)
	base := s.base()
	st := openSSE(t, base, aliceToken)
	huge := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"` +
		strings.Repeat("x", 1<<20) + `","version":"1"}}}`
	code := hkPost(t, base, st.endpoint, aliceToken, huge)
	if code >= 400 {
		return // refused before it made anything
	}
	if line := hkSSEReply(st, 1, 10*time.Second); strings.Contains(line, `"result"`) {
		t.Errorf("an SSE session's initialize with a 1 MiB clientInfo was accepted (%d, %.120s): /mcp refuses it (8 KiB at most)", code, line)
	}
}

// lcUploadOne uploads one file to the LibreChat Code API with hdr; the
// status and body (-1 and the error when there was no reply). Safe in a
// goroutine.
func lcUploadOne(lc string, hdr map[string]string, name, content string) (int, string) {
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	fw, _ := mw.CreateFormFile("file", name)
	_, _ = fw.Write([]byte(content))
	mw.Close()
	req, _ := http.NewRequest("POST", lc+"/upload", &mp)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The LibreChat Code API's stored sessions (one per upload and per exec,
// kept a day) have a server-wide cap (1000) and no share per principal:
// one LibreChat user (a JWT subject) takes all of them, and every other
// user's uploads and execs are refused for a day. (Stored sessions count
// against neither --max-sessions nor the principal's share of it, and each
// may hold --workspace-quota on disk.)
func TestHostileKeysLibreChatStoredSessionsShare(t *testing.T) {
	parallel(t)
	pemFile, mint, priv := lcKeys(t)
	s := startTenants(t, "--librechat-jwt-public-key", pemFile, "--librechat-rate-scale", "40")
	lc := s.base() + "/v1/librechat"
	u1 := map[string]string{"Authorization": "Bearer " + mint("user-1", priv)}
	u2 := map[string]string{"Authorization": "Bearer " + mint("user-2", priv)}
	var mu sync.Mutex
	stored, refusal := 0, ""
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 130; i++ {
				code, body := lcUploadOne(lc, u1, fmt.Sprintf("f-%d-%d.txt", w, i), "data")
				mu.Lock()
				if code == 200 {
					stored++
				} else if refusal == "" {
					refusal = fmt.Sprintf("%d %s", code, strings.TrimSpace(body))
				}
				done := refusal != ""
				mu.Unlock()
				if done {
					return
				}
			}
		}(w)
	}
	wg.Wait()
	t.Logf("user-1 stored %d sessions, then: %s", stored, refusal)
	if code, body := lcUploadOne(lc, u2, "u2.txt", "data"); code != 200 {
		t.Errorf("user-2's first upload after user-1 stored %d sessions: %d %s (one LibreChat user took every stored session)", stored, code, strings.TrimSpace(body))
	}
}

// The retained-output budget is one pool for all keys: output one key's
// run produces frees another key's finished executions (the oldest go
// first), so bob, by printing past --retained-output, makes alice's
// results answer expired minutes before --retention.
func TestHostileKeysRetainedOutputEviction(t *testing.T) {
	parallel(t)
	s := startTenants(t, "--retained-output", "1M", "--max-output", "4M")
	alice, bob := keyClient(t, s.url, aliceToken), keyClient(t, s.url, bobToken)
	v, isErr, text := toolText(t, alice, "execute_code", map[string]any{"command": "echo ALICE-RESULT"})
	id, _ := v["execution_id"].(string)
	if isErr || id == "" {
		t.Fatalf("alice's execute_code: %s", text)
	}
	if v, _, text := toolText(t, alice, "get_execution_output", map[string]any{"execution_id": id}); !strings.Contains(text+fmt.Sprint(v), "ALICE-RESULT") {
		t.Fatalf("alice's own result before bob's run: %s %v", text, v)
	}
	if _, isErr, text := toolText(t, bob, "execute_code", map[string]any{"command": "head -c 3000000 /dev/zero | tr '\\0' x"}); isErr {
		t.Fatalf("bob's execute_code: %.300s", text)
	}
	if v, _, text := toolText(t, alice, "get_execution_output", map[string]any{"execution_id": id}); !strings.Contains(text+fmt.Sprint(v), "ALICE-RESULT") {
		t.Errorf("alice's finished execution after bob's 3 MB of output (--retained-output 1M): %.300s (bob's output freed alice's result)", text)
	}
}

// A host name a sandbox asks the proxy for is a name the sandbox made: it
// reaches execute_code's text and structured output, and the session's
// audit log (which srt-mcp audit prints as it is), raw — terminal escapes
// and direction overrides included. (SOCKS5 carries any bytes as a
// domain name; the proxy reports it "as requested".)
func TestHostileKeysSandboxNamedHosts(t *testing.T) {
	parallel(t)
	s := startTenants(t, "--allow-domain", "example.com")
	alice := keyClient(t, s.url, aliceToken)
	v, isErr, text := toolText(t, alice, "upload_file", map[string]any{"filename": "probe.txt", "content_base64": base64.StdEncoding.EncodeToString([]byte("x"))})
	sid, _ := v["session_id"].(string)
	if isErr || sid == "" {
		t.Fatalf("upload_file: %s", text)
	}
	socks := `import os, socket, struct, urllib.parse
u = urllib.parse.urlparse(os.environ["ALL_PROXY"])
s = socket.create_connection((u.hostname, u.port))
s.sendall(b"\x05\x01\x02"); s.recv(2)
un, pw = urllib.parse.unquote(u.username).encode(), urllib.parse.unquote(u.password or "").encode()
s.sendall(b"\x01" + bytes([len(un)]) + un + bytes([len(pw)]) + pw); s.recv(2)
host = "evil\x1b]0;PWNED\x07\u202egpj.exe".encode()
s.sendall(b"\x05\x01\x00\x03" + bytes([len(host)]) + host + struct.pack(">H", 443))
print("reply", s.recv(10))
`
	v, _, text = toolText(t, alice, "execute_code", map[string]any{"session_id": sid, "command": "python3 /dev/stdin <<'PY'\n" + socks + "PY\n",
		"sandbox_config": map[string]any{"network": map[string]any{"allowed_domains": []string{"example.com"}}}})
	if !strings.Contains(text, "PWNED") {
		t.Fatalf("the proxy did not report the sandbox's host at all: %.600s", text)
	}
	b, _ := json.Marshal(v)
	var plain any
	_ = json.Unmarshal(b, &plain)
	if bad := hkRaw(text); bad != nil {
		t.Errorf("execute_code's text carries %v raw from a host name the sandbox made: %q", bad, text)
	}
	if bad := hkRaw(fmt.Sprint(plain)); bad != nil {
		t.Errorf("execute_code's structured output carries %v raw from a host name the sandbox made", bad)
	}
	audit, err := os.ReadFile(filepath.Join(s.state, "audit", sid+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(audit), "\n") {
		if bad := hkRaw(line); bad != nil {
			t.Errorf("the audit log (printed as it is by srt-mcp audit) carries %v raw from a host name the sandbox made: %q", bad, line)
		}
	}
}

// Variable and module names come from the interpreter inside the sandbox
// (any string can be a key of globals(), any string a module's __name__):
// get_workspace_info shows them raw in its text and structured content.
func TestHostileKeysWorkspaceInfoNames(t *testing.T) {
	parallel(t)
	s := startTenants(t)
	alice := keyClient(t, s.url, aliceToken)
	code := `globals()["v\x1b]0;PWNED\x07\u202egpj.exe"] = 1` + "\n" +
		`import types` + "\n" + `m = types.ModuleType("mod\x1b[2J\u202eMOD")` + "\n" + `print("set")`
	if _, isErr, text := toolText(t, alice, "execute_code", map[string]any{"language": "python", "code": code}); isErr || !strings.Contains(text, "set") {
		t.Fatalf("execute_code: %s", text)
	}
	v, _, text := toolText(t, alice, "get_workspace_info", map[string]any{})
	b, _ := json.Marshal(v)
	var plain any
	_ = json.Unmarshal(b, &plain)
	flat := fmt.Sprint(plain)
	if !strings.Contains(text+flat, "PWNED") {
		t.Fatalf("get_workspace_info does not name the variable at all: %q %v", text, v)
	}
	if bad := hkRaw(text); bad != nil {
		t.Errorf("get_workspace_info's text carries %v raw from names the sandbox made: %q", bad, text)
	}
	if bad := hkRaw(flat); bad != nil {
		t.Errorf("get_workspace_info's structured content carries %v raw from names the sandbox made: %q", bad, flat)
	}
}

// ---- Attacks that held ----

// A signed download URL serves exactly the file it was made for: its
// query on another file, a changed exp, inc or sig (upper-cased, a
// second inc first), another spelling of its session, a trailing slash or
// a ;param are refused; only the same name spelled another way (%61) is
// the same file.
func TestHostileKeysSignedURLTricks(t *testing.T) {
	parallel(t)
	s := startTenants(t)
	alice := keyClient(t, s.url, aliceToken)
	up := func(sid, name, content string) string {
		v, isErr, text := toolText(t, alice, "upload_file", map[string]any{"session_id": sid, "filename": name, "content_base64": base64.StdEncoding.EncodeToString([]byte(content))})
		if isErr {
			t.Fatalf("upload_file: %s", text)
		}
		return v["session_id"].(string)
	}
	sid := up("", "a.txt", "alice-a")
	up(sid, "b.txt", "alice-b")
	v, _, _ := toolText(t, alice, "list_artifacts", map[string]any{"session_id": sid})
	urls := map[string]string{}
	arts, _ := v["artifacts"].([]any)
	for _, a := range arts {
		m := a.(map[string]any)
		urls[fmt.Sprint(m["filename"])] = fmt.Sprint(m["download_url"])
	}
	u := urls["a.txt"]
	if code, _, body := httpGet(t, u); code != 200 || string(body) != "alice-a" {
		t.Fatalf("the URL itself: %d %q", code, body)
	}
	q := u[strings.Index(u, "?")+1:]
	files := s.base() + "/files/" + sid
	pq, _ := url.ParseQuery(q)
	with := func(k, v string) string {
		c := url.Values{}
		for kk, vv := range pq {
			c[kk] = vv
		}
		c.Set(k, v)
		return c.Encode()
	}
	for _, tc := range []struct{ name, u string }{
		{"another file, same query", files + "/b.txt?" + q},
		{"a second inc first", files + "/a.txt?inc=0000000000000000&" + q},
		{"no inc", files + "/a.txt?" + with("inc", "")},
		{"a later exp", files + "/a.txt?" + with("exp", fmt.Sprint(time.Now().Add(48*time.Hour).Unix()))},
		{"exp with a plus sign", files + "/a.txt?" + with("exp", "+"+pq.Get("exp"))},
		{"sig upper-cased", files + "/a.txt?" + with("sig", strings.ToUpper(pq.Get("sig")))},
		{"session upper-cased", s.base() + "/files/" + strings.ToUpper(sid) + "/a.txt?" + q},
		{"a trailing slash", files + "/a.txt/?" + q},
		{"a ;param", files + "/a.txt;x?" + q},
		{"the session's audit log", files + "/../audit/" + sid + ".jsonl?" + q},
	} {
		code, _, body := httpGet(t, tc.u)
		if code == 200 {
			t.Errorf("%s: %d %q (want a refusal)", tc.name, code, body)
		}
	}
	if code, _, body := httpGet(t, files+"/%61.txt?"+q); code != 200 || string(body) != "alice-a" {
		t.Errorf("the same name percent-encoded: %d %q", code, body)
	}
}

// Alice's Mcp-Session-Id in other spellings (upper case, braces, urn:uuid:,
// a space), or after a made-up one in a second header, and her SSE
// session's id second in /message's query: bob reaches nothing of hers.
func TestHostileKeysSessionIDSpellings(t *testing.T) {
	parallel(t)
	s := startTenants(t)
	sid, execID := aliceSleeping(t, s)
	defer rawMCP(t, s.url, aliceToken, sid, callBody(9, "cancel_execution", map[string]any{"execution_id": execID, "force": true}))
	uuidPart := strings.TrimPrefix(sid, "mcp-session-")
	for _, other := range []string{
		strings.ToUpper(sid), "mcp-session-" + strings.ToUpper(uuidPart), "mcp-session-{" + uuidPart + "}",
		"mcp-session-urn:uuid:" + uuidPart, sid + " ", " " + sid,
	} {
		code, _, body := rawMCP(t, s.url, bobToken, other, callBody(3, "list_executions", map[string]any{}))
		if code == 200 || strings.Contains(body, execID) {
			t.Errorf("bob with Mcp-Session-Id %q: %d %.200s", other, code, body)
		}
	}
	req, _ := http.NewRequest("POST", s.url, strings.NewReader(callBody(4, "list_executions", map[string]any{})))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("Authorization", "Bearer "+bobToken)
	req.Header.Add("Mcp-Session-Id", hkUUIDSession())
	req.Header.Add("Mcp-Session-Id", sid)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 || strings.Contains(string(b), execID) {
			t.Errorf("bob with a made-up Mcp-Session-Id and alice's second: %d %.200s", resp.StatusCode, b)
		}
	}
	st := openSSE(t, s.base(), aliceToken)
	asid := st.endpoint[strings.Index(st.endpoint, "sessionId=")+len("sessionId="):]
	hkPost(t, s.base(), st.endpoint, aliceToken, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"a","version":"1"}}}`)
	hkPost(t, s.base(), st.endpoint, aliceToken, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, q := range []string{"sessionId=" + hkUUIDSession() + "&sessionId=" + asid, "sessionId=" + strings.ToUpper(asid), "sessionid=" + asid + "&sessionId=" + asid} {
		hkPost(t, s.base(), "/message?"+q, bobToken, callBody(5, "execute_code", map[string]any{"command": "echo BOB-IN-ALICE-SSE"}))
	}
	if line := hkSSEReply(st, 5, 3*time.Second); strings.Contains(line, "BOB-IN-ALICE-SSE") {
		t.Errorf("bob's call ran in alice's SSE session: %s", line)
	}
}

// A refused initialize (past the bound, a clientInfo too large) holds no
// place: after 20 refusals and closing her sessions, alice opens as many
// as her bound again, and not one more.
func TestHostileKeysRefusedInitializeHoldsNothing(t *testing.T) {
	parallel(t)
	s := startTenants(t, "--max-mcp-sessions-per-caller", "2")
	var sids []string
	for i := 0; i < 2; i++ {
		_, hdr, _ := rawMCP(t, s.url, aliceToken, "", initBody("alice"))
		sids = append(sids, hdr.Get("Mcp-Session-Id"))
	}
	huge := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"` +
		strings.Repeat("x", 64<<10) + `","version":"1"}}}`
	for i := 0; i < 20; i++ {
		body := initBody("alice-refused")
		if i%2 == 1 {
			body = huge
		}
		if code, hdr, _ := rawMCP(t, s.url, aliceToken, "", body); code < 400 || hdr.Get("Mcp-Session-Id") != "" {
			t.Fatalf("initialize %d past the bound: %d", i, code)
		}
	}
	for _, sid := range sids {
		req, _ := http.NewRequest("DELETE", s.url, nil)
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	for i := 0; i < 2; i++ {
		if code, hdr, body := rawMCP(t, s.url, aliceToken, "", initBody("alice-again")); code != 200 || hdr.Get("Mcp-Session-Id") == "" {
			t.Errorf("alice's session %d after closing hers: %d %.200s (refused initializes held places)", i, code, body)
		}
	}
	if code, hdr, _ := rawMCP(t, s.url, aliceToken, "", initBody("alice-3")); code < 400 || hdr.Get("Mcp-Session-Id") != "" {
		t.Errorf("alice's third session: %d (want the bound)", code)
	}
}

// hkFrom is an HTTP client whose connections come from a loopback address
// of its own.
func hkFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// Without keys every MCP caller is anonymous, and the bound is per address:
// one address at --max-mcp-sessions-per-caller is refused, another is not.
func TestHostileKeysAnonymousPerAddress(t *testing.T) {
	parallel(t)
	s := startServe(t, "--max-mcp-sessions-per-caller", "2")
	init := func(from string) (int, string) {
		req, _ := http.NewRequest("POST", s.url, strings.NewReader(initBody("anon")))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := hkFrom(from).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
	}
	for i := 0; i < 2; i++ {
		if code, sid := init("127.0.0.2"); code != 200 || sid == "" {
			t.Fatalf("127.0.0.2's session %d: %d", i, code)
		}
	}
	if code, sid := init("127.0.0.2"); code < 400 || sid != "" {
		t.Errorf("127.0.0.2's third session: %d %q (want the per-address bound)", code, sid)
	}
	if code, sid := init("127.0.0.3"); code != 200 || sid == "" {
		t.Errorf("127.0.0.3's first session while 127.0.0.2 holds its bound: %d", code)
	}
}

// Two requests at once naming the same new playground conversation make
// one workspace, not one each (or one per request of ten).
func TestHostileKeysConversationRace(t *testing.T) {
	parallel(t)
	s := startTenants(t)
	base := s.base()
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var mp bytes.Buffer
			mw := multipart.NewWriter(&mp)
			fw, _ := mw.CreateFormFile("file", fmt.Sprintf("f%d.txt", i))
			_, _ = fw.Write([]byte("x"))
			mw.Close()
			req, _ := http.NewRequest("POST", base+"/playground/api/upload?conversation=race", &mp)
			req.Header.Set("Content-Type", mw.FormDataContentType())
			req.Header.Set("Authorization", "Bearer "+aliceToken)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}(i)
	}
	wg.Wait()
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`(?m)^srtmcp_sessions_active (\d+)`).FindSubmatch(raw)
	if m == nil || string(m[1]) != "1" {
		t.Errorf("10 uploads at once to one new conversation left %s sessions (want 1)", m)
	}
}

// A web page against a loopback server with no keys, the playground and
// --librechat-no-auth: a request from an opaque origin (Origin: null: a
// sandboxed iframe, a data: URL) and a cross-site request in any letter
// case are refused on the routes that run code or hold a stream.
func TestHostileKeysBrowserOddOrigins(t *testing.T) {
	parallel(t)
	s := startServe(t, "--librechat-no-auth")
	base := strings.TrimSuffix(s.url, "/mcp")
	for _, rt := range []struct{ method, path, body string }{
		{"POST", "/playground/api/run", `{"language":"python","code":"print(1)","conversation":"c1"}`},
		{"POST", "/v1/librechat/exec", `{"lang":"py","code":"print(1)"}`},
		{"POST", "/mcp", initBody("page")},
		{"GET", "/sse", ""},
		{"GET", "/mcp/events", ""},
		{"POST", "/message?sessionId=" + hkUUIDSession(), initBody("page")},
	} {
		for _, h := range []map[string]string{{"Origin": "null"}, {"Sec-Fetch-Site": "Cross-Site"}, {"Sec-Fetch-Site": "CROSS-SITE"}} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			req, _ := http.NewRequestWithContext(ctx, rt.method, base+rt.path, strings.NewReader(rt.body))
			req.Header.Set("Content-Type", "text/plain")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range h {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			line, _ := bufio.NewReader(resp.Body).ReadString('\n')
			resp.Body.Close()
			cancel()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s %s with %v: %d %q (want 403)", rt.method, rt.path, h, resp.StatusCode, firstLine(line))
			}
		}
	}
}
