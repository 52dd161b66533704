package integration

// The real Claude Agent SDK from npm (it runs Claude Code, which speaks
// MCP 2026-07-28) against srt-mcp, with ANTHROPIC_BASE_URL pointing at a
// scripted stand-in for the Messages API on loopback that plays the
// model: it follows the tool descriptions, so it sets a variable, reads
// the workspace handle out of the tool result Claude Code sends back, and
// passes it in the next call. The test checks what Claude Code sent to the
// model and what reached srt-mcp.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// scriptedModel is the Messages API's stand-in.
type scriptedModel struct {
	mu      sync.Mutex
	results []string // the tool results Claude Code sent, in order
	calls   []map[string]any
	handle  string // the session_id the model read from the first result
}

var handleSentence = regexp.MustCompile(`pass session_id \\?"(sess_[0-9a-f]{12})\\?"`)

func (m *scriptedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/messages") {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Stream   bool `json:"stream"`
		Model    string
		Tools    []struct{ Name string }
		Messages []struct {
			Content json.RawMessage `json:"content"`
		}
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	hasTool := false
	for _, t := range req.Tools {
		hasTool = hasTool || t.Name == "mcp__srt__execute_code"
	}
	var results []string
	for _, msg := range req.Messages {
		var blocks []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(msg.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type != "tool_result" {
				continue
			}
			var s string
			if json.Unmarshal(b.Content, &s) != nil {
				var parts []struct{ Text string }
				_ = json.Unmarshal(b.Content, &parts)
				for _, p := range parts {
					s += p.Text
				}
			}
			results = append(results, s)
		}
	}
	m.mu.Lock()
	var input map[string]any
	text := "The sandbox is ready."
	switch {
	case hasTool && len(results) == 0:
		input = map[string]any{"code": "x = 41", "language": "python"}
	case hasTool && len(results) == 1:
		// What the tool description and the reply tell a model: pass the
		// workspace's session_id back.
		input = map[string]any{"code": "print(x + 1)", "language": "python"}
		if g := handleSentence.FindStringSubmatch(results[0]); g != nil {
			m.handle = g[1]
			input["session_id"] = g[1]
		}
	case len(results) >= 2:
		text = "x + 1 printed: " + results[len(results)-1]
	}
	m.results = results
	if input != nil {
		m.calls = append(m.calls, input)
	}
	id := len(m.calls)
	m.mu.Unlock()

	var block map[string]any
	stop := "end_turn"
	if input != nil {
		block = map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", id), "name": "mcp__srt__execute_code", "input": input}
		stop = "tool_use"
	} else {
		block = map[string]any{"type": "text", "text": text}
	}
	msg := map[string]any{"id": fmt.Sprintf("msg_%d", time.Now().UnixNano()), "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 5}}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(msg)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(typ string, data map[string]any) {
		data["type"] = typ
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
	}
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	ev("message_start", map[string]any{"message": start})
	if input != nil {
		partial, _ := json.Marshal(input)
		ev("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}})
		ev("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(partial)}})
	} else {
		ev("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		ev("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": text}})
	}
	ev("content_block_stop", map[string]any{"index": 0})
	ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	ev("message_stop", map[string]any{})
}

// protocolLog records the protocol versions and handles of the MCP
// requests Claude Code sends.
func TestClaudeAgentSDKThreadsHandles(t *testing.T) {
	parallel(t)
	dir := mcpClients(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@anthropic-ai", "claude-agent-sdk")); err != nil {
		if os.Getenv("SRT_MCP_REQUIRE_CLIENTS") == "1" {
			t.Fatal("@anthropic-ai/claude-agent-sdk is not installed in " + dir)
		}
		t.Skip("@anthropic-ai/claude-agent-sdk is not installed")
	}
	requirePythonData(t)
	s := startServe(t, "--backend", "native", "--token", "agent-token-0123456789")
	endpoint, headers := recordingProxy(t, s.url)
	model := &scriptedModel{}
	api := httptest.NewServer(model)
	defer api.Close()

	home := reachableTempDir(t)
	cmd := exec.Command("node", "agent.mjs", "--mcp", endpoint, "--api", api.URL, "--token", "agent-token-0123456789")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+home, "CLAUDE_CONFIG_DIR="+filepath.Join(home, ".claude"))
	out, stderr, err := runNode(t, cmd, 3*time.Minute)
	if err != nil {
		t.Fatalf("agent.mjs: %v\n%s\n%s", err, out, stderr)
	}

	model.mu.Lock()
	defer model.mu.Unlock()
	if len(model.calls) != 2 || len(model.results) != 2 {
		t.Fatalf("want 2 tool calls and 2 results, got %d calls %v and results %q", len(model.calls), model.calls, model.results)
	}
	// The first result, as Claude Code handed it to the model, names the
	// workspace and says to pass it back.
	if model.handle == "" || !strings.Contains(model.results[0], `"session_id":"`+model.handle+`"`) {
		t.Fatalf("the first tool result did not name a workspace to pass back: %s", model.results[0])
	}
	// The model threaded the handle, and the variable was there.
	if model.calls[1]["session_id"] != model.handle || !strings.Contains(model.results[1], `"stdout":"42\n"`) {
		t.Fatalf("the second call (%v) did not see x: %s", model.calls[1], model.results[1])
	}
	// What reached srt-mcp: the 2026-07-28 protocol, and the handle in its header.
	if !headers.find("Mcp-Param-Session-Id", model.handle) {
		t.Errorf("Claude Code did not mirror session_id into Mcp-Param-Session-Id")
	}
	if !headers.find("Mcp-Protocol-Version", "2026-07-28") {
		t.Errorf("Claude Code did not speak 2026-07-28 to srt-mcp: %v", headers.calls)
	}
	if !strings.Contains(string(out), `"type":"result"`) || !strings.Contains(string(out), "x + 1 printed") {
		t.Errorf("the agent's result: %s", out)
	}
}
