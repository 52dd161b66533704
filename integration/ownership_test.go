package integration

// Ownership, one table (threat model rules 8-10, issue 25 item 8): every
// door that takes a handle, for every kind of handle it takes, called by
// the handle's owner, by another key (another LibreChat subject), and with
// no key at all, on one server with two named keys (alice, bob), the
// LibreChat Code API (an API key and JWT keys) and the playground.
//
//   - the owner's call succeeds;
//   - another key gets the door's not-found (session_not_found, not_found,
//     HTTP 404, "Session not found"; a conversation is a name in each
//     key's own namespace, so another key naming it gets a workspace of its
//     own) and nothing of the owner's appears anywhere in its reply;
//   - no key gets 401 (the keys are configured);
//   - the owner's state is intact after the others' attempts: nothing
//     adopted, closed, cancelled or written.
//
// A signed download URL is the one handle that is its own credential:
// anyone holding it downloads while the session lives, nobody after it
// closes, not even once another key opens a session under the same id.
//
// Subtests read as the table: door/handle/caller. The others' and the
// keyless calls run first, then the checks that the owner's state is
// intact, then the owner's calls (those that end a handle last), then the
// signed URL after its session ended.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ownRow is one row of the table: a door taking one kind of handle.
type ownRow struct {
	door, handle string
	// same is the owner's call (nil: no caller of this door can own the
	// handle, e.g. an MCP key and a LibreChat storage session).
	same func(t *testing.T)
	// other is another key's call; none the call without a key.
	other, none func(t *testing.T)
	// ends: the owner's call ends or changes the handle, so it runs after
	// every other owner call.
	ends bool
}

// toolFn calls an MCP tool as one caller: structured content, isError,
// text.
type toolFn func(t *testing.T, tool string, args map[string]any) (map[string]any, bool, string)

// readFn reads an MCP resource as one caller: its content.
type readFn func(t *testing.T, uri string) (string, error)

// ownDoor is an MCP door (a 2025-11-25 session through mcp-go, or a
// sessionless 2026-07-28 client through the official Go SDK) as alice,
// bob and a caller without a key see it.
type ownDoor struct {
	name               string
	alice, bob         toolFn
	aliceRead, bobRead readFn
	// noKey posts one JSON-RPC message without a key; the status.
	noKey func(t *testing.T, body string) int
}

// ownFixture is what the owners made, and what must not leak.
type ownFixture struct {
	mark    string   // in every name and content of the owners' data
	secrets []string // handles and ids of the owners' that a reply may only echo
	mu      sync.Mutex
}

func (o *ownFixture) secret(s ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, x := range s {
		if x != "" {
			o.secrets = append(o.secrets, x)
		}
	}
}

// replyStrings is every string in a reply: raw, its JSON's keys and
// values, and each value base64-decoded (read_artifact's content).
func replyStrings(reply any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
			if b, err := base64.StdEncoding.DecodeString(x); err == nil && len(b) > 0 {
				out = append(out, string(b))
			}
			var inner any
			if (strings.HasPrefix(x, "{") || strings.HasPrefix(x, "[")) && json.Unmarshal([]byte(x), &inner) == nil {
				walk(inner)
			}
		case []byte:
			walk(string(x))
		case map[string]any:
			for k, y := range x {
				out = append(out, k)
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		case nil, bool, float64:
		default: // a struct or typed value: as its JSON
			b, _ := json.Marshal(x)
			var plain any
			switch json.Unmarshal(b, &plain); plain.(type) {
			case map[string]any, []any, string:
				walk(plain)
			default:
				out = append(out, fmt.Sprint(x))
			}
		}
	}
	walk(reply)
	return out
}

// noLeak fails when the reply holds anything of the owners' that the
// request did not itself name (an error may echo the handle it was given).
func (o *ownFixture) noLeak(t *testing.T, what string, request any, reply ...any) {
	t.Helper()
	req, _ := json.Marshal(request)
	reqS := string(req) + fmt.Sprint(request)
	o.mu.Lock()
	secrets := append([]string{o.mark}, o.secrets...)
	o.mu.Unlock()
	for _, s := range replyStrings(reply) {
		for _, sec := range secrets {
			if strings.Contains(s, sec) && !strings.Contains(reqS, sec) {
				t.Errorf("LEAK: %s: the reply carries the owner's %q:\n%.600s", what, sec, s)
			}
		}
	}
}

// refused checks another key's MCP tool reply: an error with code, and
// nothing of the owners'.
func (o *ownFixture) refused(t *testing.T, what, code string, args map[string]any, v map[string]any, isErr bool, text string) {
	t.Helper()
	if !isErr || !strings.Contains(text+fmt.Sprint(v), code) {
		t.Errorf("%s: want an error %s, got isError=%v %.400s %v", what, code, isErr, text, v)
	}
	o.noLeak(t, what, args, v, text)
}

// ownHTTP sends one request with headers; the status and the body.
func ownHTTP(t *testing.T, method, u string, hdr map[string]string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func bearerHdr(token string) map[string]string {
	if token == "" {
		return map[string]string{}
	}
	return map[string]string{"Authorization": "Bearer " + token}
}

// modernPost posts one JSON-RPC message the way a 2026-07-28 client does,
// with a key when given.
func modernPost(t *testing.T, endpoint, token, method, body string) (int, string) {
	t.Helper()
	hdr := bearerHdr(token)
	hdr["Content-Type"] = "application/json"
	hdr["Accept"] = "application/json, text/event-stream"
	hdr["MCP-Protocol-Version"] = "2026-07-28"
	hdr["Mcp-Method"] = method
	return ownHTTP(t, "POST", endpoint, hdr, strings.NewReader(body))
}

func resourceBody(uri string) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "resources/read", "params": map[string]any{"uri": uri}})
	return string(b)
}

// artifactFiles is the file names a list_artifacts reply names.
func artifactFiles(v map[string]any) []string {
	var out []string
	arts, _ := v["artifacts"].([]any)
	for _, a := range arts {
		if m, ok := a.(map[string]any); ok {
			out = append(out, fmt.Sprint(m["filename"]))
		}
	}
	sort.Strings(out)
	return out
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// sseStream is an open 2024-11-05 SSE stream: its message endpoint and
// every line it has sent.
type sseStream struct {
	endpoint string
	mu       sync.Mutex
	lines    []string
}

func (s *sseStream) saw(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

func (s *sseStream) wait(sub string, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if s.saw(sub) {
			return true
		}
	}
	return s.saw(sub)
}

func openSSE(t *testing.T, base, token string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/sse", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		t.Fatalf("GET /sse: %d", resp.StatusCode)
	}
	s := &sseStream{}
	endpoint := make(chan string, 1)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "data: ") && strings.Contains(line, "sessionId=") {
				select {
				case endpoint <- strings.TrimPrefix(line, "data: "):
				default:
				}
			}
			s.mu.Lock()
			s.lines = append(s.lines, line)
			s.mu.Unlock()
		}
	}()
	select {
	case s.endpoint = <-endpoint:
	case <-time.After(10 * time.Second):
		t.Fatal("no endpoint event on the SSE stream")
	}
	return s
}

// lcUpload uploads files (name -> content) in one batch to the LibreChat
// Code API as hdr's principal: the storage session and the file ids by
// name.
func lcUpload(t *testing.T, lc string, hdr map[string]string, files map[string]string) (string, map[string]string) {
	t.Helper()
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fw, _ := mw.CreateFormFile("file", n)
		_, _ = fw.Write([]byte(files[n]))
	}
	mw.Close()
	h := map[string]string{"Content-Type": mw.FormDataContentType()}
	for k, v := range hdr {
		h[k] = v
	}
	code, body := ownHTTP(t, "POST", lc+"/upload/batch", h, &mp)
	var v struct {
		SessionID string `json:"session_id"`
		Files     []struct {
			FileID   string `json:"fileId"`
			Filename string `json:"filename"`
		} `json:"files"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &v) != nil || v.SessionID == "" || len(v.Files) != len(files) {
		t.Fatalf("librechat upload: %d %s", code, body)
	}
	ids := map[string]string{}
	for _, f := range v.Files {
		ids[f.Filename] = f.FileID
	}
	return v.SessionID, ids
}

func lcJSONBody(v any) io.Reader {
	b, _ := json.Marshal(v)
	return bytes.NewReader(b)
}

func TestOwnership(t *testing.T) {
	parallel(t)
	start := time.Now()
	pemFile, mint, priv := lcKeys(t)
	// One server for the whole table: bounds raised so that every owner's
	// handles fit at once; an allowed but unreachable package index, so
	// that install_package gets past its index check to the workspace
	// lookup (the owner's install then fails inside her own workspace).
	s := startTenants(t, "--librechat-api-key", lcKey, "--librechat-jwt-public-key", pemFile, "--librechat-rate-scale", "10",
		"--rate-limit", "1000", "--max-sessions", "64", "--max-sessions-per-caller", "32", "--max-concurrent", "32",
		"--drain-timeout", "2s", "--allow-domain", "pypi.invalid", "--pip-index-url", "http://pypi.invalid/simple")
	base, lc := s.base(), s.base()+"/v1/librechat"
	o := &ownFixture{mark: "OWNED" + randHex(6)}
	mark := o.mark

	// ---- The owners' handles. ----
	aliceC, bobC := keyClient(t, s.url, aliceToken), keyClient(t, s.url, bobToken)
	aliceS, bobS := goSDK(t, s.url, aliceToken), goSDK(t, s.url, bobToken)
	mustTool := func(f toolFn, tool string, args map[string]any) map[string]any {
		t.Helper()
		v, isErr, text := f(t, tool, args)
		if isErr {
			t.Fatalf("setup: %s %v: %s", tool, args, text)
		}
		return v
	}
	aliceMCP := func(t *testing.T, tool string, args map[string]any) (map[string]any, bool, string) {
		t.Helper()
		return toolText(t, aliceC, tool, args)
	}
	bobMCP := func(t *testing.T, tool string, args map[string]any) (map[string]any, bool, string) {
		t.Helper()
		return toolText(t, bobC, tool, args)
	}
	aliceSDK := func(t *testing.T, tool string, args map[string]any) (map[string]any, bool, string) {
		t.Helper()
		return sdkCall(t, aliceS, tool, args)
	}
	bobSDK := func(t *testing.T, tool string, args map[string]any) (map[string]any, bool, string) {
		t.Helper()
		return sdkCall(t, bobS, tool, args)
	}
	readGo := func(c *client.Client) readFn {
		return func(t *testing.T, uri string) (string, error) {
			req := mcpgo.ReadResourceRequest{}
			req.Params.URI = uri
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := c.ReadResource(ctx, req)
			if err != nil {
				return "", err
			}
			var out strings.Builder
			for _, c := range res.Contents {
				switch x := c.(type) {
				case mcpgo.BlobResourceContents:
					b, _ := base64.StdEncoding.DecodeString(x.Blob)
					out.Write(b)
				case mcpgo.TextResourceContents:
					out.WriteString(x.Text)
				}
			}
			return out.String(), nil
		}
	}
	readSDK := func(cs *sdk.ClientSession) readFn {
		return func(t *testing.T, uri string) (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
			if err != nil {
				return "", err
			}
			var out strings.Builder
			for _, c := range res.Contents {
				out.Write(c.Blob)
				out.WriteString(c.Text)
			}
			return out.String(), nil
		}
	}
	aliceMCPSession := aliceC.GetSessionId()
	mcpDoors := []ownDoor{
		{name: "mcp", alice: aliceMCP, bob: bobMCP, aliceRead: readGo(aliceC), bobRead: readGo(bobC),
			noKey: func(t *testing.T, body string) int {
				code, _, _ := rawMCP(t, s.url, "", aliceMCPSession, body)
				return code
			}},
		{name: "sessionless", alice: aliceSDK, bob: bobSDK, aliceRead: readSDK(aliceS), bobRead: readSDK(bobS),
			noKey: func(t *testing.T, body string) int {
				var m struct {
					Method string `json:"method"`
				}
				_ = json.Unmarshal([]byte(body), &m)
				code, _ := modernPost(t, s.url, "", m.Method, body)
				return code
			}},
	}

	// A data session of alice's: a file, an interpreter with a variable,
	// a cell run in it through each MCP door (list_executions by workspace).
	secretName, secretData := "own-"+mark+".txt", "alice's data "+mark
	sid := mustTool(aliceMCP, "upload_file", map[string]any{"filename": secretName, "content_base64": b64(secretData)})["session_id"].(string)
	cellMCP := mustTool(aliceMCP, "execute_code", map[string]any{"code": "alice_var_" + mark + " = '" + mark + "'", "language": "python", "session_id": sid})
	cellSDK := mustTool(aliceSDK, "execute_code", map[string]any{"code": "print(1)", "language": "python", "session_id": sid})
	cells := map[string]string{"mcp": fmt.Sprint(cellMCP["execution_id"]), "sessionless": fmt.Sprint(cellSDK["execution_id"])}
	o.secret(sid, cells["mcp"], cells["sessionless"])
	// Sessions each door's owner closes or destroys.
	ending := map[string]string{}
	for _, d := range mcpDoors {
		for _, tool := range []string{"close_session", "destroy_session"} {
			k := d.name + "/" + tool
			ending[k] = mustTool(aliceMCP, "upload_file", map[string]any{"filename": "end-" + mark + ".txt", "content_base64": b64("to end " + mark)})["session_id"].(string)
			o.secret(ending[k])
		}
	}
	// Executions: one that waits for a line of stdin, one that sleeps, in
	// each door (an execution belongs to the MCP session that started it,
	// or sessionless to the key).
	type execPair struct{ stdin, sleep string }
	execs := map[string]execPair{}
	for _, d := range mcpDoors {
		a := mustTool(d.alice, "execute_code_async", map[string]any{"command": "read line; echo got:$line # " + mark})
		b := mustTool(d.alice, "execute_code_async", map[string]any{"command": "sleep 120 # " + mark})
		execs[d.name] = execPair{fmt.Sprint(a["execution_id"]), fmt.Sprint(b["execution_id"])}
		o.secret(execs[d.name].stdin, execs[d.name].sleep)
	}
	// An MCP session (Mcp-Session-Id) with a running execution.
	code, hdr, body := rawMCP(t, s.url, aliceToken, "", initBody("alice-owner"))
	mcpSID := hdr.Get("Mcp-Session-Id")
	if code != 200 || mcpSID == "" {
		t.Fatalf("alice's initialize: %d %s", code, body)
	}
	rawMCP(t, s.url, aliceToken, mcpSID, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	_, _, body = rawMCP(t, s.url, aliceToken, mcpSID, callBody(2, "execute_code_async", map[string]any{"command": "sleep 120 # " + mark}))
	mcpExec := between(body, `"execution_id":"`, `"`)
	if mcpExec == "" {
		t.Fatalf("execute_code_async in alice's MCP session: %s", body)
	}
	o.secret(mcpSID, mcpExec)
	// An SSE session (2024-11-05 transport).
	sse := openSSE(t, base, aliceToken)
	sseSID := strings.TrimPrefix(sse.endpoint[strings.Index(sse.endpoint, "sessionId="):], "sessionId=")
	o.secret(sseSID)
	ssePost := func(t *testing.T, token, body string) (int, string) {
		h := bearerHdr(token)
		h["Content-Type"] = "application/json"
		return ownHTTP(t, "POST", base+sse.endpoint, h, strings.NewReader(body))
	}
	if code, b := ssePost(t, aliceToken, initBody("alice-sse")); code != http.StatusAccepted || !sse.wait(`"id":1`, 10*time.Second) {
		t.Fatalf("alice's SSE initialize: %d %s", code, b)
	}
	ssePost(t, aliceToken, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	// Conversations: seed 003's and the playground's; their workspaces'
	// ids are data-session handles too.
	rcConv, pgConv := "rc-conv-"+randHex(4), "pg-conv-"+randHex(4)
	rc := mustTool(aliceMCP, "sandbox.run_code", map[string]any{"conversationId": rcConv, "language": "python",
		"code": `open("rc-` + mark + `.txt", "w").write("run_code data ` + mark + `")`})
	rcSID, _ := rc["session_id"].(string)
	if rc["success"] != true || rcSID == "" {
		t.Fatalf("alice's sandbox.run_code: %v", rc)
	}
	pgOut := playgroundRunAs(t, base, aliceToken, pgConv, `open("pg-`+mark+`.txt", "w").write("playground data `+mark+`")`)
	pgSID := between(pgOut, `"session_id":"`, `"`)
	if !strings.Contains(pgOut, `"exit_code":0`) || pgSID == "" {
		t.Fatalf("alice's playground run: %s", pgOut)
	}
	o.secret(rcSID, pgSID)
	// A LibreChat storage session of user-1's (a JWT subject) with two
	// files.
	user1 := map[string]string{"Authorization": "Bearer " + mint("user-1", priv)}
	lcOthers := map[string]map[string]string{"user-2": {"Authorization": "Bearer " + mint("user-2", priv)}, "api-key": {"X-API-Key": lcKey}}
	lcName, lcName2 := "lc-"+mark+".txt", "lc2-"+mark+".txt"
	lcData := "librechat data " + mark
	lcSID, lcIDs := lcUpload(t, lc, user1, map[string]string{lcName: lcData, lcName2: "second " + mark})
	lcFID, lcFID2 := lcIDs[lcName], lcIDs[lcName2]
	o.secret(lcSID, lcFID, lcFID2)
	// A session whose files have signed download URLs.
	urlName, urlData := "url-"+mark+".txt", "signed data "+mark
	urlSID := mustTool(aliceMCP, "upload_file", map[string]any{"filename": urlName, "content_base64": b64(urlData)})["session_id"].(string)
	mustTool(aliceMCP, "upload_file", map[string]any{"session_id": urlSID, "filename": "url2-" + mark + ".txt", "content_base64": b64("other file " + mark)})
	var fileURL string
	for _, a := range mustTool(aliceMCP, "list_artifacts", map[string]any{"session_id": urlSID})["artifacts"].([]any) {
		if m := a.(map[string]any); m["filename"] == urlName {
			fileURL, _ = m["download_url"].(string)
		}
	}
	if fileURL == "" {
		t.Fatal("no download_url for the signed-URL session's file")
	}
	o.secret(urlSID)
	t.Logf("setup: %v", time.Since(start).Round(time.Millisecond))

	// ---- The table. ----
	var rows []ownRow
	add := func(r ownRow) { rows = append(rows, r) }
	want401 := func(t *testing.T, what string, code int) {
		t.Helper()
		if code != http.StatusUnauthorized {
			t.Errorf("%s without a key: %d, want 401", what, code)
		}
	}

	// Data sessions (sess_…) through every MCP tool that takes one, in
	// both MCP doors.
	for _, d := range mcpDoors {
		d := d
		type dataTool struct {
			tool       string
			same       map[string]any // the owner's arguments
			other      map[string]any // another key's
			check      func(t *testing.T, v map[string]any, isErr bool, text string)
			code       string
			ends       bool
			sessionArg string
		}
		okWith := func(sub string) func(t *testing.T, v map[string]any, isErr bool, text string) {
			return func(t *testing.T, v map[string]any, isErr bool, text string) {
				t.Helper()
				if isErr || !strings.Contains(text+" "+fmt.Sprint(v), sub) {
					t.Errorf("the owner's call: want %q, got isError=%v %.500s %v", sub, isErr, text, v)
				}
			}
		}
		readOwn := `import os` + "\n" + `for n in sorted(os.listdir(".")):` + "\n" + `    print(n, open(n).read() if os.path.isfile(n) else "")`
		tools := []dataTool{
			{tool: "upload_file", same: map[string]any{"session_id": sid, "filename": d.name + "-own.txt", "content_base64": b64("x")},
				other: map[string]any{"session_id": sid, "filename": secretName, "content_base64": b64("bob overwrote it"), "overwrite": true},
				check: okWith(sid), code: "session_not_found"},
			{tool: "run_python", same: map[string]any{"session_id": sid, "code": "print(open('" + secretName + "').read())"},
				other: map[string]any{"session_id": sid, "code": readOwn}, check: okWith(secretData), code: "session_not_found"},
			{tool: "read_artifact", same: map[string]any{"session_id": sid, "path": "/mnt/data/" + secretName},
				other: map[string]any{"session_id": sid, "path": "/mnt/data/" + secretName},
				check: func(t *testing.T, v map[string]any, isErr bool, text string) {
					if b, _ := base64.StdEncoding.DecodeString(fmt.Sprint(v["content_base64"])); isErr || string(b) != secretData {
						t.Errorf("the owner's read_artifact: %v %s", isErr, text)
					}
				}, code: "session_not_found"},
			{tool: "list_artifacts", same: map[string]any{"session_id": sid}, other: map[string]any{"session_id": sid}, check: okWith(secretName), code: "session_not_found"},
			{tool: "execute_code(command)", same: map[string]any{"session_id": sid, "command": "cat " + secretName},
				other: map[string]any{"session_id": sid, "command": "ls -la; cat * 2>/dev/null; echo bob > bob-planted.txt"}, check: okWith(secretData), code: "session_not_found"},
			{tool: "execute_code(code)", same: map[string]any{"session_id": sid, "code": "print(alice_var_" + mark + ")", "language": "python"},
				other: map[string]any{"session_id": sid, "code": "print({k: v for k, v in globals().items() if not k.startswith('__')})", "language": "python"},
				check: okWith(mark), code: "session_not_found"},
			{tool: "get_workspace_info", same: map[string]any{"session_id": sid}, other: map[string]any{"session_id": sid}, check: okWith("alice_var_" + mark), code: "session_not_found"},
			{tool: "install_package", same: map[string]any{"session_id": sid, "package": "srt-mcp-no-such-package"},
				other: map[string]any{"session_id": sid, "package": "srt-mcp-no-such-package"},
				check: func(t *testing.T, v map[string]any, isErr bool, text string) {
					// A refusal (no index is reachable), but one that reached
					// the owner's own workspace.
					if !isErr || v["error"] != "install_failed" || v["session_id"] != sid {
						t.Errorf("the owner's install_package: want install_failed in %s, got %v %.300s", sid, v, text)
					}
				}, code: "session_not_found"},
			{tool: "list_executions", same: map[string]any{"session_id": sid}, other: map[string]any{"session_id": sid}, check: okWith(cells[d.name]), code: "session_not_found"},
			{tool: "reset_workspace", same: map[string]any{"session_id": sid}, other: map[string]any{"session_id": sid}, check: okWith("reset"), code: "session_not_found", ends: true},
			{tool: "close_session", same: map[string]any{"session_id": ending[d.name+"/close_session"]}, other: map[string]any{"session_id": ending[d.name+"/close_session"]},
				check: okWith("closed"), code: "session_not_found", ends: true, sessionArg: ending[d.name+"/close_session"]},
			{tool: "destroy_session", same: map[string]any{"session_id": ending[d.name+"/destroy_session"]}, other: map[string]any{"session_id": ending[d.name+"/destroy_session"]},
				check: okWith("destroyed"), code: "session_not_found", ends: true, sessionArg: ending[d.name+"/destroy_session"]},
		}
		for _, dt := range tools {
			dt := dt
			tool, _, _ := strings.Cut(dt.tool, "(")
			add(ownRow{door: d.name + "." + dt.tool, handle: "data-session", ends: dt.ends,
				same: func(t *testing.T) {
					v, isErr, text := d.alice(t, tool, dt.same)
					dt.check(t, v, isErr, text)
					if dt.sessionArg != "" { // it ended: it is gone for its owner too
						if _, isErr, text := d.alice(t, "list_artifacts", map[string]any{"session_id": dt.sessionArg}); !isErr || !strings.Contains(text, "session_not_found") {
							t.Errorf("the session the owner ended still answers: %s", text)
						}
					}
				},
				other: func(t *testing.T) {
					v, isErr, text := d.bob(t, tool, dt.other)
					o.refused(t, "bob's "+dt.tool, dt.code, dt.other, v, isErr, text)
				},
				none: func(t *testing.T) { want401(t, dt.tool, d.noKey(t, callBody(9, tool, dt.other))) }})
		}
		uri := "artifact://" + sid + "/" + url.PathEscape(secretName)
		add(ownRow{door: d.name + ".resources.read", handle: "data-session",
			same: func(t *testing.T) {
				if got, err := d.aliceRead(t, uri); err != nil || got != secretData {
					t.Errorf("the owner's resources/read: %v %q", err, got)
				}
			},
			other: func(t *testing.T) {
				got, err := d.bobRead(t, uri)
				if err == nil || !strings.Contains(err.Error(), "session_not_found") {
					t.Errorf("bob's resources/read of %s: want session_not_found, got %v %q", uri, err, got)
				}
				o.noLeak(t, "bob's resources/read", uri, got, fmt.Sprint(err))
			},
			none: func(t *testing.T) { want401(t, "resources/read", d.noKey(t, resourceBody(uri))) }})

		// Execution ids.
		ex := execs[d.name]
		type execTool struct {
			tool        string
			same, other map[string]any
			check       func(t *testing.T, v map[string]any, isErr bool, text string)
			ends        bool
		}
		running := func(t *testing.T, v map[string]any, isErr bool, text string) {
			t.Helper()
			if isErr || v["status"] != "running" {
				t.Errorf("the owner's call: want running, got isError=%v %v %.300s", isErr, v, text)
			}
		}
		for _, et := range []execTool{
			{tool: "get_execution_output", same: map[string]any{"execution_id": ex.stdin}, other: map[string]any{"execution_id": ex.stdin}, check: running},
			{tool: "get_execution_status", same: map[string]any{"execution_id": ex.stdin}, other: map[string]any{"execution_id": ex.stdin}, check: running},
			{tool: "send_stdin", same: map[string]any{"execution_id": ex.stdin, "input_data": "alice-line\n"},
				other: map[string]any{"execution_id": ex.stdin, "input_data": "bob-line\n"}, ends: true,
				check: func(t *testing.T, _ map[string]any, isErr bool, text string) {
					if isErr {
						t.Fatalf("the owner's send_stdin: %s", text)
					}
					out, _, text := d.alice(t, "get_execution_output", map[string]any{"execution_id": ex.stdin, "wait": true})
					if o := fmt.Sprint(out["output"]); !strings.Contains(o, "got:alice-line") || strings.Contains(o, "bob") {
						t.Errorf("the execution's output after its owner's line: %v %.300s", out, text)
					}
				}},
			{tool: "cancel_execution", same: map[string]any{"execution_id": ex.sleep, "force": true}, other: map[string]any{"execution_id": ex.sleep, "force": true}, ends: true,
				check: func(t *testing.T, v map[string]any, isErr bool, text string) {
					if isErr || v["status"] == "running" {
						t.Errorf("the owner's cancel_execution: %v %.300s", v, text)
					}
				}},
		} {
			et := et
			add(ownRow{door: d.name + "." + et.tool, handle: "execution", ends: et.ends,
				same: func(t *testing.T) {
					v, isErr, text := d.alice(t, et.tool, et.same)
					et.check(t, v, isErr, text)
				},
				other: func(t *testing.T) {
					v, isErr, text := d.bob(t, et.tool, et.other)
					o.refused(t, "bob's "+et.tool, "not_found", et.other, v, isErr, text)
				},
				none: func(t *testing.T) { want401(t, et.tool, d.noKey(t, callBody(9, et.tool, et.other))) }})
		}
		add(ownRow{door: d.name + ".list_executions", handle: "execution",
			same: func(t *testing.T) {
				v, isErr, text := d.alice(t, "list_executions", map[string]any{})
				if isErr || !strings.Contains(fmt.Sprint(v), ex.stdin) || !strings.Contains(fmt.Sprint(v), ex.sleep) {
					t.Errorf("the owner's list_executions: %v %.300s", v, text)
				}
			},
			other: func(t *testing.T) {
				v, isErr, text := d.bob(t, "list_executions", map[string]any{})
				if isErr {
					t.Errorf("bob's own list_executions: %s", text)
				}
				o.noLeak(t, "bob's list_executions", map[string]any{}, v, text)
			},
			none: func(t *testing.T) {
				want401(t, "list_executions", d.noKey(t, callBody(9, "list_executions", map[string]any{})))
			}})

		// seed 003's conversation: another key naming it has a workspace
		// of its own.
		add(ownRow{door: d.name + ".sandbox.run_code", handle: "conversation",
			same: func(t *testing.T) {
				v, isErr, text := d.alice(t, "sandbox.run_code", map[string]any{"conversationId": rcConv, "language": "bash", "code": "cat rc-*.txt"})
				if isErr || v["session_id"] != rcSID || !strings.Contains(fmt.Sprint(v["output"]), "run_code data "+mark) {
					t.Errorf("the owner's sandbox.run_code: %v %.300s", v, text)
				}
			},
			other: func(t *testing.T) {
				args := map[string]any{"conversationId": rcConv, "language": "bash", "code": "ls -la; cat * 2>/dev/null; echo bob > bob-planted.txt"}
				v, isErr, text := d.bob(t, "sandbox.run_code", args)
				if isErr || v["success"] != true || v["session_id"] == rcSID {
					t.Errorf("bob's sandbox.run_code naming alice's conversation: want a workspace of his own, got %v %.300s", v, text)
				}
				o.noLeak(t, "bob's sandbox.run_code", args, v, text)
			},
			none: func(t *testing.T) {
				want401(t, "sandbox.run_code", d.noKey(t, callBody(9, "sandbox.run_code", map[string]any{"conversationId": rcConv, "language": "bash", "code": "ls"})))
			}})
		// The conversations' workspaces, by their ids.
		for _, cw := range []struct{ handle, sid, file string }{{"run_code-workspace", rcSID, "rc-" + mark + ".txt"}, {"playground-workspace", pgSID, "pg-" + mark + ".txt"}} {
			cw := cw
			args := map[string]any{"session_id": cw.sid}
			add(ownRow{door: d.name + ".list_artifacts", handle: cw.handle,
				same: func(t *testing.T) {
					if v, isErr, text := d.alice(t, "list_artifacts", args); isErr || !contains(artifactFiles(v), cw.file) {
						t.Errorf("the owner's list_artifacts of %s: %v %.300s", cw.sid, v, text)
					}
				},
				other: func(t *testing.T) {
					v, isErr, text := d.bob(t, "list_artifacts", args)
					o.refused(t, "bob's list_artifacts", "session_not_found", args, v, isErr, text)
				},
				none: func(t *testing.T) { want401(t, "list_artifacts", d.noKey(t, callBody(9, "list_artifacts", args))) }})
		}
	}

	// The MCP session id (Mcp-Session-Id of a 2025-11-25 initialize).
	add(ownRow{door: "mcp.POST", handle: "mcp-session",
		same: func(t *testing.T) {
			code, _, body := rawMCP(t, s.url, aliceToken, mcpSID, callBody(3, "list_executions", map[string]any{}))
			if code != 200 || !strings.Contains(body, mcpExec) {
				t.Errorf("the owner's tools/call in her MCP session: %d %.300s", code, body)
			}
		},
		other: func(t *testing.T) {
			for _, b := range []string{callBody(3, "list_executions", map[string]any{}),
				callBody(4, "execute_code", map[string]any{"code": "print(globals())", "language": "python"}),
				callBody(5, "cancel_execution", map[string]any{"execution_id": mcpExec, "force": true}),
				initBody("bob-in-alices-session")} {
				code, _, body := rawMCP(t, s.url, bobToken, mcpSID, b)
				if code != http.StatusNotFound {
					t.Errorf("bob's POST with alice's Mcp-Session-Id: %d %.300s (want 404)", code, body)
				}
				o.noLeak(t, "bob's POST with alice's Mcp-Session-Id", mcpSID+b, body)
			}
		},
		none: func(t *testing.T) {
			code, _, _ := rawMCP(t, s.url, "", mcpSID, callBody(3, "list_executions", map[string]any{}))
			want401(t, "POST /mcp", code)
		}})
	deleteMCP := func(t *testing.T, token string) (int, string) {
		h := bearerHdr(token)
		h["Mcp-Session-Id"] = mcpSID
		h["MCP-Protocol-Version"] = "2025-11-25"
		return ownHTTP(t, "DELETE", s.url, h, nil)
	}
	add(ownRow{door: "mcp.DELETE", handle: "mcp-session", ends: true,
		same: func(t *testing.T) {
			if code, body := deleteMCP(t, aliceToken); code != 200 {
				t.Errorf("the owner's DELETE: %d %s", code, body)
			}
			if code, _, body := rawMCP(t, s.url, aliceToken, mcpSID, callBody(6, "list_executions", map[string]any{})); code != http.StatusNotFound {
				t.Errorf("the MCP session still answers after its owner's DELETE: %d %.300s", code, body)
			}
		},
		other: func(t *testing.T) {
			code, body := deleteMCP(t, bobToken)
			if code != http.StatusNotFound {
				t.Errorf("bob's DELETE of alice's MCP session: %d %s (want 404)", code, body)
			}
			o.noLeak(t, "bob's DELETE", mcpSID, body)
		},
		none: func(t *testing.T) {
			code, _ := deleteMCP(t, "")
			want401(t, "DELETE /mcp", code)
		}})

	// The SSE session id (2024-11-05: GET /sse, POST /message?sessionId=…).
	add(ownRow{door: "sse.POST_message", handle: "sse-session",
		same: func(t *testing.T) {
			code, body := ssePost(t, aliceToken, callBody(101, "execute_code", map[string]any{"command": "echo SSE-OWNER-" + mark}))
			if code != http.StatusAccepted || !sse.wait("SSE-OWNER-"+mark, 20*time.Second) {
				t.Errorf("the owner's tools/call on her SSE session: %d %s", code, body)
			}
		},
		other: func(t *testing.T) {
			for _, b := range []string{initBody("bob-in-alices-sse"), callBody(201, "execute_code", map[string]any{"command": "echo BOB-IN-ALICES-SSE"})} {
				code, body := ssePost(t, bobToken, b)
				if code != http.StatusNotFound {
					t.Errorf("bob's POST to alice's SSE session: %d %s (want 404)", code, body)
				}
				o.noLeak(t, "bob's POST /message", sse.endpoint+b, body)
			}
		},
		none: func(t *testing.T) {
			code, _ := ssePost(t, "", callBody(301, "execute_code", map[string]any{"command": "echo NOKEY-IN-ALICES-SSE"}))
			want401(t, "POST /message", code)
		}})

	// The playground's conversation.
	pgFiles := func(t *testing.T, token string) (int, string, []string) {
		code, body := playgroundCall(t, "GET", base+"/playground/api/files?conversation="+url.QueryEscape(pgConv), token, nil, "")
		var v struct {
			Files []struct {
				Name string `json:"name"`
			} `json:"files"`
		}
		_ = json.Unmarshal([]byte(body), &v)
		var names []string
		for _, f := range v.Files {
			names = append(names, f.Name)
		}
		sort.Strings(names)
		return code, body, names
	}
	pgUpload := func(t *testing.T, token, name, content string) (int, string) {
		var mp bytes.Buffer
		mw := multipart.NewWriter(&mp)
		fw, _ := mw.CreateFormFile("file", name)
		_, _ = fw.Write([]byte(content))
		mw.Close()
		return playgroundCall(t, "POST", base+"/playground/api/upload?conversation="+url.QueryEscape(pgConv), token, &mp, mw.FormDataContentType())
	}
	pgRun := func(t *testing.T, token, code string) (int, string) {
		return playgroundCall(t, "POST", base+"/playground/api/run", token, lcJSONBody(map[string]any{"language": "python", "code": code, "conversation": pgConv}), "application/json")
	}
	add(ownRow{door: "playground.run", handle: "conversation",
		same: func(t *testing.T) {
			code, out := pgRun(t, aliceToken, `print(open("pg-`+mark+`.txt").read())`)
			if code != 200 || !strings.Contains(out, "playground data "+mark) || !strings.Contains(out, pgSID) {
				t.Errorf("the owner's playground run: %d %.500s", code, out)
			}
		},
		other: func(t *testing.T) {
			src := "import os\nfor n in sorted(os.listdir('.')):\n    print(n, open(n).read() if os.path.isfile(n) else '')\nopen('bob-planted.txt', 'w').write('bob')"
			code, out := pgRun(t, bobToken, src)
			if code != 200 || !strings.Contains(out, `"exit_code":0`) {
				t.Errorf("bob's playground run naming alice's conversation: want a workspace of his own, got %d %.500s", code, out)
			}
			o.noLeak(t, "bob's playground run", pgConv+src, out)
		},
		none: func(t *testing.T) {
			code, _ := pgRun(t, "", "print(1)")
			want401(t, "POST /playground/api/run", code)
		}})
	add(ownRow{door: "playground.files", handle: "conversation",
		same: func(t *testing.T) {
			if code, body, names := pgFiles(t, aliceToken); code != 200 || !contains(names, "pg-"+mark+".txt") {
				t.Errorf("the owner's playground files: %d %s", code, body)
			}
		},
		other: func(t *testing.T) {
			code, body, _ := pgFiles(t, bobToken)
			if code != 200 {
				t.Errorf("bob's playground files: %d %s", code, body)
			}
			o.noLeak(t, "bob's playground files", pgConv, body)
		},
		none: func(t *testing.T) {
			code, _, _ := pgFiles(t, "")
			want401(t, "GET /playground/api/files", code)
		}})
	add(ownRow{door: "playground.upload", handle: "conversation",
		same: func(t *testing.T) {
			code, body := pgUpload(t, aliceToken, "pg-up-"+mark+".txt", "uploaded "+mark)
			if code != 200 || !strings.Contains(body, "pg-up-"+mark+".txt") || !strings.Contains(body, "pg-"+mark+".txt") {
				t.Errorf("the owner's playground upload: %d %.500s", code, body)
			}
		},
		other: func(t *testing.T) {
			code, body := pgUpload(t, bobToken, "bob-upload.txt", "bob")
			if code != 200 {
				t.Errorf("bob's playground upload: %d %s", code, body)
			}
			o.noLeak(t, "bob's playground upload", pgConv, body)
		},
		none: func(t *testing.T) {
			code, _ := pgUpload(t, "", "nokey.txt", "x")
			want401(t, "POST /playground/api/upload", code)
		}})

	// The LibreChat storage session and its file ids, by the Code API.
	lcGet := func(t *testing.T, method, path string, hdr map[string]string) (int, string) {
		return ownHTTP(t, method, lc+path, hdr, nil)
	}
	lcExec := func(t *testing.T, hdr map[string]string, req map[string]any) (int, string) {
		h := map[string]string{"Content-Type": "application/json"}
		for k, v := range hdr {
			h[k] = v
		}
		return ownHTTP(t, "POST", lc+"/exec", h, lcJSONBody(req))
	}
	lcRoutes := []struct {
		door, method, path string
		check              func(t *testing.T, code int, body string)
		ends               bool
	}{
		{"librechat.GET_download", "GET", "/download/" + lcSID + "/" + lcFID, func(t *testing.T, code int, body string) {
			if code != 200 || body != lcData {
				t.Errorf("the owner's download: %d %q", code, body)
			}
		}, false},
		{"librechat.GET_files", "GET", "/files/" + lcSID, func(t *testing.T, code int, body string) {
			if code != 200 || !strings.Contains(body, lcSID+"/"+lcFID) {
				t.Errorf("the owner's file list: %d %s", code, body)
			}
		}, false},
		{"librechat.GET_objects", "GET", "/sessions/" + lcSID + "/objects/" + lcFID, func(t *testing.T, code int, body string) {
			if code != 200 || !strings.Contains(body, lcName) {
				t.Errorf("the owner's object: %d %s", code, body)
			}
		}, false},
		{"librechat.DELETE_files", "DELETE", "/files/" + lcSID + "/" + lcFID2, func(t *testing.T, code int, body string) {
			if code != 200 {
				t.Errorf("the owner's delete: %d %s", code, body)
			}
			if code, body := lcGet(t, "GET", "/files/"+lcSID, user1); code != 200 || strings.Contains(body, lcFID2) || !strings.Contains(body, lcFID) {
				t.Errorf("the owner's files after deleting one: %d %s", code, body)
			}
		}, true},
	}
	for _, r := range lcRoutes {
		r := r
		add(ownRow{door: r.door, handle: "librechat-storage", ends: r.ends,
			same: func(t *testing.T) {
				code, body := lcGet(t, r.method, r.path, user1)
				r.check(t, code, body)
			},
			other: func(t *testing.T) {
				for who, h := range lcOthers {
					code, body := lcGet(t, r.method, r.path, h)
					if code != http.StatusNotFound || !strings.Contains(body, "not found") {
						t.Errorf("%s's %s %s: %d %s (want 404)", who, r.method, r.path, code, body)
					}
					o.noLeak(t, who+"'s "+r.door, r.path, body)
				}
			},
			none: func(t *testing.T) {
				code, _ := lcGet(t, r.method, r.path, nil)
				want401(t, r.door, code)
			}})
	}
	lcListing := "import os\nfor n in sorted(os.listdir('.')):\n    print(n, open(n).read() if os.path.isfile(n) else '')"
	for _, ex := range []struct {
		door string
		req  map[string]any
	}{
		{"librechat.POST_exec_files", map[string]any{"lang": "py", "code": lcListing, "files": []map[string]any{{"id": lcFID, "session_id": lcSID, "name": "input.txt"}}}},
		{"librechat.POST_exec_session", map[string]any{"lang": "py", "code": lcListing, "session_id": lcSID}},
	} {
		ex := ex
		add(ownRow{door: ex.door, handle: "librechat-storage",
			same: func(t *testing.T) {
				if code, body := lcExec(t, user1, ex.req); code != 200 || !strings.Contains(body, lcData) {
					t.Errorf("the owner's exec with her files: %d %.500s", code, body)
				}
			},
			other: func(t *testing.T) {
				for who, h := range lcOthers {
					code, body := lcExec(t, h, ex.req)
					if code != 200 {
						t.Errorf("%s's exec: %d %.300s", who, code, body)
					}
					if _, hasFiles := ex.req["files"]; hasFiles && !strings.Contains(body, "not available") {
						t.Errorf("%s's exec naming user-1's file: want the input reported not available, got %.500s", who, body)
					}
					o.noLeak(t, who+"'s exec naming user-1's files", ex.req, body)
				}
			},
			none: func(t *testing.T) {
				code, _ := lcExec(t, nil, ex.req)
				want401(t, ex.door, code)
			}})
	}
	// The same storage session and file ids through the MCP tools: no MCP
	// key owns them (nothing of the same key to call).
	for _, mt := range []struct {
		tool string
		args map[string]any
	}{
		{"read_artifact", map[string]any{"session_id": lcSID, "path": "/mnt/data/" + lcName}},
		{"list_artifacts", map[string]any{"session_id": lcSID}},
		{"run_python", map[string]any{"session_id": lcSID, "code": lcListing}},
		{"execute_code", map[string]any{"session_id": lcSID, "command": "ls -la; cat * 2>/dev/null"}},
		{"upload_file", map[string]any{"session_id": lcSID, "filename": lcName, "content_base64": b64("alice overwrote it"), "overwrite": true}},
		{"list_executions", map[string]any{"session_id": lcSID}},
		{"close_session", map[string]any{"session_id": lcSID}},
	} {
		mt := mt
		add(ownRow{door: "mcp." + mt.tool, handle: "librechat-storage",
			other: func(t *testing.T) {
				v, isErr, text := aliceMCP(t, mt.tool, mt.args)
				o.refused(t, "alice's (an MCP key's) "+mt.tool+" of a LibreChat storage session", "session_not_found", mt.args, v, isErr, text)
			},
			none: func(t *testing.T) { want401(t, mt.tool, mcpDoors[0].noKey(t, callBody(9, mt.tool, mt.args))) }})
	}
	lcURI := "artifact://" + lcSID + "/" + url.PathEscape(lcName)
	add(ownRow{door: "mcp.resources.read", handle: "librechat-storage",
		other: func(t *testing.T) {
			got, err := readGo(aliceC)(t, lcURI)
			if err == nil || !strings.Contains(err.Error(), "session_not_found") {
				t.Errorf("alice's resources/read of a LibreChat file: %v %q", err, got)
			}
			o.noLeak(t, "alice's resources/read of a LibreChat file", lcURI, got, fmt.Sprint(err))
		},
		none: func(t *testing.T) { want401(t, "resources/read", mcpDoors[0].noKey(t, resourceBody(lcURI))) }})
	// And an MCP key's data session through the Code API: no LibreChat
	// principal owns it.
	add(ownRow{door: "librechat.GET_files", handle: "data-session",
		other: func(t *testing.T) {
			for who, h := range map[string]map[string]string{"user-1": user1, "api-key": {"X-API-Key": lcKey}} {
				code, body := lcGet(t, "GET", "/files/"+sid, h)
				if code != http.StatusNotFound {
					t.Errorf("%s's list of alice's data session: %d %s", who, code, body)
				}
				o.noLeak(t, who+"'s list of alice's data session", sid, body)
			}
		},
		none: func(t *testing.T) {
			code, _ := lcGet(t, "GET", "/files/"+sid, nil)
			want401(t, "librechat GET files", code)
		}})
	add(ownRow{door: "librechat.POST_exec_session", handle: "data-session",
		other: func(t *testing.T) {
			req := map[string]any{"lang": "py", "code": lcListing, "session_id": sid}
			code, body := lcExec(t, user1, req)
			if code != 200 {
				t.Errorf("user-1's exec naming alice's data session: %d %.300s", code, body)
			}
			o.noLeak(t, "user-1's exec naming alice's data session", req, body)
		},
		none: func(t *testing.T) {
			code, _ := lcExec(t, nil, map[string]any{"lang": "py", "code": "print(1)", "session_id": sid})
			want401(t, "librechat exec", code)
		}})

	// The signed download URL: the credential itself, while its session
	// lives.
	getURL := func(t *testing.T, u, token string) (int, string) {
		return ownHTTP(t, "GET", u, bearerHdr(token), nil)
	}
	urlCallers := map[string]string{"same-key": aliceToken, "other-key": bobToken, "no-key": ""}
	signedRow := func(door, u string, check func(t *testing.T, who string, code int, body string)) ownRow {
		r := ownRow{door: door, handle: "signed-url"}
		r.same = func(t *testing.T) {
			code, body := getURL(t, u, urlCallers["same-key"])
			check(t, "same-key", code, body)
		}
		r.other = func(t *testing.T) {
			code, body := getURL(t, u, urlCallers["other-key"])
			check(t, "other-key", code, body)
		}
		r.none = func(t *testing.T) { code, body := getURL(t, u, urlCallers["no-key"]); check(t, "no-key", code, body) }
		return r
	}
	add(signedRow("files.GET", fileURL, func(t *testing.T, who string, code int, body string) {
		if code != 200 || body != urlData {
			t.Errorf("%s holding a live signed URL: %d %q (want the file: the URL is the credential)", who, code, body)
		}
	}))
	forged := strings.Replace(fileURL, "/"+url.PathEscape(urlName)+"?", "/"+url.PathEscape("url2-"+mark+".txt")+"?", 1)
	if forged == fileURL {
		t.Fatalf("could not forge a URL from %s", fileURL)
	}
	add(signedRow("files.GET_other_name", forged, func(t *testing.T, who string, code int, body string) {
		if code != http.StatusForbidden || strings.Contains(body, mark) {
			t.Errorf("%s with one file's signature on another name: %d %q (want 403)", who, code, body)
		}
	}))

	// ---- Run it: the others' and keyless calls first. ----
	callers := 0
	for _, r := range rows {
		r := r
		t.Run(r.door+"/"+r.handle+"/other-key", r.other)
		t.Run(r.door+"/"+r.handle+"/no-key", r.none)
		callers += 2
	}
	t.Logf("others and no key: %d calls, at %v", callers, time.Since(start).Round(time.Millisecond))

	// ---- The owners' state is intact. ----
	t.Run("intact/data-session", func(t *testing.T) {
		v, isErr, text := aliceMCP(t, "read_artifact", map[string]any{"session_id": sid, "path": "/mnt/data/" + secretName})
		if b, _ := base64.StdEncoding.DecodeString(fmt.Sprint(v["content_base64"])); isErr || string(b) != secretData {
			t.Errorf("alice's file after the others' attempts: %v %q %s", isErr, b, text)
		}
		v, _, _ = aliceMCP(t, "list_artifacts", map[string]any{"session_id": sid})
		if got := artifactFiles(v); len(got) != 1 || got[0] != secretName {
			t.Errorf("alice's session holds %v after the others' attempts (want only %s)", got, secretName)
		}
		if _, _, text := aliceMCP(t, "get_workspace_info", map[string]any{"session_id": sid}); !strings.Contains(text, "alice_var_"+mark) {
			t.Errorf("alice's interpreter after the others' attempts: %s", text)
		}
		for k, e := range ending {
			if v, isErr, text := aliceMCP(t, "list_artifacts", map[string]any{"session_id": e}); isErr || len(artifactFiles(v)) != 1 {
				t.Errorf("alice's session for %s after the others' attempts: %v %s", k, v, text)
			}
		}
	})
	t.Run("intact/executions", func(t *testing.T) {
		for _, d := range mcpDoors {
			ex := execs[d.name]
			v, _, text := d.alice(t, "get_execution_output", map[string]any{"execution_id": ex.stdin})
			if v["status"] != "running" || strings.Contains(fmt.Sprint(v["output"]), "got:") {
				t.Errorf("%s: alice's execution waiting for stdin after the others' attempts: %v %.300s", d.name, v, text)
			}
			if v, _, text := d.alice(t, "get_execution_status", map[string]any{"execution_id": ex.sleep}); v["status"] != "running" {
				t.Errorf("%s: alice's sleeping execution after the others' attempts: %v %.300s", d.name, v, text)
			}
		}
		_, _, body := rawMCP(t, s.url, aliceToken, mcpSID, callBody(7, "get_execution_status", map[string]any{"execution_id": mcpExec}))
		if !strings.Contains(body, `"status":"running"`) {
			t.Errorf("the execution of alice's MCP session after the others' attempts: %.300s", body)
		}
	})
	t.Run("intact/sse-session", func(t *testing.T) {
		for _, never := range []string{"BOB-IN-ALICES-SSE", "NOKEY-IN-ALICES-SSE", `"id":201`, `"id":301`, "bob-in-alices-sse"} {
			if sse.saw(never) {
				t.Errorf("alice's SSE stream carries another caller's message: %q", never)
			}
		}
	})
	t.Run("intact/conversations", func(t *testing.T) {
		v, _, text := aliceMCP(t, "list_artifacts", map[string]any{"session_id": rcSID})
		if got := artifactFiles(v); len(got) != 1 || got[0] != "rc-"+mark+".txt" {
			t.Errorf("alice's run_code conversation after the others' attempts: %v %s", got, text)
		}
		if _, body, names := pgFiles(t, aliceToken); len(names) != 1 || names[0] != "pg-"+mark+".txt" {
			t.Errorf("alice's playground conversation after the others' attempts: %s", body)
		}
	})
	t.Run("intact/librechat-storage", func(t *testing.T) {
		if code, body := lcGet(t, "GET", "/files/"+lcSID, user1); code != 200 || !strings.Contains(body, lcFID) || !strings.Contains(body, lcFID2) {
			t.Errorf("user-1's storage session after the others' attempts: %d %s", code, body)
		}
		if code, body := lcGet(t, "GET", "/download/"+lcSID+"/"+lcFID, user1); code != 200 || body != lcData {
			t.Errorf("user-1's file after the others' attempts: %d %q", code, body)
		}
	})

	// ---- The owners' own calls: those that end a handle last. ----
	owned := 0
	for _, last := range []bool{false, true} {
		for _, r := range rows {
			if r.same == nil || r.ends != last {
				continue
			}
			t.Run(r.door+"/"+r.handle+"/same-key", r.same)
			owned++
		}
	}
	t.Logf("owners: %d calls, at %v", owned, time.Since(start).Round(time.Millisecond))

	// ---- A signed URL after its session ended, and after another key
	// opened a session under the same id. ----
	after := func(door string) ownRow {
		return signedRow(door, fileURL, func(t *testing.T, who string, code int, body string) {
			if code == 200 || strings.Contains(body, mark) || strings.Contains(body, "REOPENED") {
				t.Errorf("%s holding the URL of a closed session: %d %q (want it dead)", who, code, body)
			}
		})
	}
	t.Run("files.GET/signed-url/close", func(t *testing.T) {
		if _, isErr, text := aliceMCP(t, "close_session", map[string]any{"session_id": urlSID}); isErr {
			t.Fatalf("alice's close_session: %s", text)
		}
	})
	var endRows []ownRow
	r := after("files.GET_after_close")
	endRows = append(endRows, r)
	t.Run(r.door+"/signed-url/same-key", r.same)
	t.Run(r.door+"/signed-url/other-key", r.other)
	t.Run(r.door+"/signed-url/no-key", r.none)
	t.Run("files.GET/signed-url/reopen", func(t *testing.T) {
		v, isErr, text := bobMCP(t, "upload_file", map[string]any{"session_id": urlSID, "filename": urlName, "content_base64": b64("BOB-REOPENED")})
		if isErr || v["session_id"] != urlSID {
			t.Fatalf("bob opening a session under the closed id: %s", text)
		}
		// The id is bob's now: alice's handle reaches nothing of his.
		v, isErr, text = aliceMCP(t, "list_artifacts", map[string]any{"session_id": urlSID})
		if !isErr || strings.Contains(text+fmt.Sprint(v), "REOPENED") || !strings.Contains(text, "session_not_found") {
			t.Errorf("alice's handle to the id bob reopened: %v %s", v, text)
		}
	})
	r = after("files.GET_after_reopen")
	endRows = append(endRows, r)
	t.Run(r.door+"/signed-url/same-key", r.same)
	t.Run(r.door+"/signed-url/other-key", r.other)
	t.Run(r.door+"/signed-url/no-key", r.none)

	// The table, for the log.
	doors, handles := map[string]bool{}, map[string]bool{}
	for _, r := range append(rows, endRows...) {
		doors[r.door], handles[r.handle] = true, true
	}
	t.Logf("%d rows (%d doors: routes and tools, %d handle kinds), %d calls, in %v",
		len(rows)+len(endRows), len(doors), len(handles), callers+owned+3*len(endRows), time.Since(start).Round(time.Millisecond))
}
