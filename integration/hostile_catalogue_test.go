package integration

// The tool catalogue (issue 28): --tools profiles, the dotted names seed
// 003's clients still call, and the reply bound (--max-reply-chars with
// the anthropic/maxResultSizeChars hint), attacked by a caller and by the
// code in the sandbox. Each test was seen failing on the code it was
// written against.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// modernCall posts one 2026-07-28 tools/call (no session, the standard
// headers the client chose) and returns the JSON-RPC reply.
func modernCall(t *testing.T, endpoint, name string, args map[string]any, headers map[string]string) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
		"name": name, "arguments": args,
		"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "hostile", "version": "1"},
		}}})
	req, _ := http.NewRequest("POST", endpoint, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %d %s", name, resp.StatusCode, b)
	}
	return v
}

// A 2026-07-28 request whose Mcp-Param-Conversation-Id header says one
// conversation and whose body says another is refused (-32020): a gateway
// that routes or authorizes on the header must not be led to act on
// another conversation. The dotted name seed 003 spelt must be checked
// the same: it is renamed in a BeforeCallTool hook, after mcp-go looked
// the tool up by the dotted name for its header check, found nothing and
// skipped it, so sandbox.run_code runs the body's conversation.
func TestHostileCatalogueDottedNameKeepsHeaderCheck(t *testing.T) {
	parallel(t)
	s := startServe(t, "--tools", "runcode")
	for _, name := range []string{"sandbox_run_code", "sandbox.run_code"} {
		v := modernCall(t, s.url, name,
			map[string]any{"conversationId": "conv-body", "language": "python", "code": "print('ran')"},
			map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": name, "Mcp-Param-Conversation-Id": "conv-header"})
		e, _ := v["error"].(map[string]any)
		if e == nil || e["code"] != float64(-32020) {
			b, _ := json.Marshal(v)
			t.Errorf("%s with Mcp-Param-Conversation-Id conv-header and conversationId conv-body: want error -32020, got %.400s", name, b)
		}
	}
}

// hostHint is the anthropic/maxResultSizeChars a tool is listed with.
func hostHint(t *testing.T, tools []mcp.Tool, name string) int {
	t.Helper()
	for _, tl := range tools {
		if tl.Name == name && tl.Meta != nil {
			if n, ok := tl.Meta.AdditionalFields["anthropic/maxResultSizeChars"].(float64); ok {
				return int(n)
			}
			if n, ok := tl.Meta.AdditionalFields["anthropic/maxResultSizeChars"].(int); ok {
				return n
			}
		}
	}
	t.Fatalf("%s is listed without anthropic/maxResultSizeChars", name)
	return 0
}

// A reply of a run is at most the host hint the tool is listed with
// (2 × --max-reply-chars + 8000): a host that keeps results inline up to
// it must not get more, and a host that reads no hint must not have its
// context flooded. The output is clipped to the bound, but the files the
// run made are listed beside it without one: run_python lists 200 of them
// and sandbox_run_code up to 1000, each with its path, name and signed
// URL, so code that makes files with long names (nested directories of
// 200-character names) makes a reply of half a megabyte and more.
func TestHostileCatalogueReplyFileListsBounded(t *testing.T) {
	parallel(t)
	requirePythonData(t)
	s := startServe(t)
	c := connect(t, s.url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	listed, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	const makeFiles = `import os
d = "/mnt/data/" + ("d" * 200 + "/") * 3
os.makedirs(d, exist_ok=True)
for i in range(%d):
    open(d + "f%%04d" %% i + "x" * 200, "w").write("1")
print("made")
`
	for _, tc := range []struct {
		tool  string
		args  map[string]any
		files int
	}{
		{"run_python", map[string]any{"code": fmt.Sprintf(makeFiles, 300)}, 300},
		{"sandbox_run_code", map[string]any{"conversationId": "many-files", "language": "python", "code": fmt.Sprintf(makeFiles, 1000)}, 1000},
	} {
		hint := hostHint(t, listed.Tools, tc.tool)
		v, isErr, text := toolText(t, c, tc.tool, tc.args)
		if isErr {
			t.Fatalf("%s: %v", tc.tool, v)
		}
		if len(text) > hint {
			t.Errorf("%s: code that made %d files with long names got a reply of %d characters; the tool is listed with anthropic/maxResultSizeChars %d", tc.tool, tc.files, len(text), hint)
		}
	}
}

// --tools narrows what a caller can do to the tools offered: with the
// data tools (read_artifact) not offered, the artifact:// resource
// template that reads a session's files the same way is not offered
// either. It is registered with the data tools and stays listed and
// readable whatever --tools says.
func TestHostileCatalogueResourcesFollowTools(t *testing.T) {
	parallel(t)
	s := startServe(t, "--tools", "exec")
	c := connect(t, s.url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
	if err != nil {
		return // resources not served at all: nothing outside --tools
	}
	for _, rt := range res.ResourceTemplates {
		t.Errorf("--tools exec (read_artifact not offered) still lists the resource template %s", rt.URITemplate.Raw())
	}
}
