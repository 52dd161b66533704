package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/srt-mcp/srt-mcp/runner"
)

// server is a real srt-mcp serve on a loopback port with a private state
// directory, and a minimal Streamable HTTP client for it.
type server struct {
	cmd   *exec.Cmd
	url   string
	state string
	cl    *http.Client
	sid   string
	id    int
	keep  bool // the state directory is the caller's: stop leaves it
}

// startServer starts binary's serve with extra flags, waits for it to
// answer, and opens an MCP session.
func startServer(binary string, extra ...string) (*server, error) {
	state, err := os.MkdirTemp("", "srt-mcp-bench-")
	if err != nil {
		return nil, err
	}
	return startServerIn(binary, state, false, extra...)
}

// startServerIn is startServer on the state directory state (kept at
// stop when keep is set).
func startServerIn(binary, state string, keep bool, extra ...string) (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	b := &server{url: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), state: state, keep: keep,
		cl: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}
	b.cmd = exec.Command(binary, append([]string{"serve", "--port", fmt.Sprint(port), "--state-dir", state}, extra...)...)
	b.cmd.Stderr = io.Discard
	if err := b.cmd.Start(); err != nil {
		return nil, err
	}
	for i := 0; ; i++ {
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err == nil {
			resp.Body.Close()
			break
		}
		if i > 200 {
			b.stop()
			return nil, errors.New("srt-mcp serve did not come up")
		}
		time.Sleep(25 * time.Millisecond)
	}
	if _, err := b.rpc("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "bench", "version": "1"}}); err != nil {
		b.stop()
		return nil, err
	}
	_, _ = b.rpc("notifications/initialized", nil)
	return b, nil
}

func (b *server) stop() {
	_ = b.cmd.Process.Signal(os.Interrupt)
	_ = b.cmd.Wait()
	if !b.keep {
		_ = os.RemoveAll(b.state)
	}
}

// rpc sends one JSON-RPC request (a notification when params is nil and
// the method starts with "notifications/") and returns its result.
func (b *server) rpc(method string, params any) (map[string]any, error) {
	raw, err := b.rpcRaw(method, params)
	if err != nil || raw == nil {
		return nil, err
	}
	var result map[string]any
	if err := json.Unmarshal(raw, &result); err != nil {
		return nil, fmt.Errorf("%s: bad result %q: %v", method, raw, err)
	}
	return result, nil
}

// rpcRaw is rpc's result as the server sent it (nil for a notification),
// for the bench that counts its bytes (costs.go).
func (b *server) rpcRaw(method string, params any) (json.RawMessage, error) {
	body := jsonrpcRequest(method, params, &b.id)
	req, _ := http.NewRequest("POST", b.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if b.sid != "" {
		req.Header.Set("Mcp-Session-Id", b.sid)
	}
	resp, err := b.cl.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		b.sid = s
	}
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusAccepted {
		return nil, nil
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw = sseData(raw)
	}
	return jsonrpcResult(method, raw)
}

// sseData is the data of an SSE-framed reply's first event. Only a line
// that starts with "data: " is one: the JSON itself may hold that text
// (a tool's description saying "/mnt/data: its files").
func sseData(stream []byte) []byte {
	for _, line := range bytes.Split(stream, []byte("\n")) {
		if d, ok := bytes.CutPrefix(bytes.TrimSuffix(line, []byte("\r")), []byte("data: ")); ok {
			return d
		}
	}
	return stream
}

// jsonrpcRequest is one JSON-RPC request, numbered from *id; a method
// under "notifications/" is a notification (no id).
func jsonrpcRequest(method string, params any, id *int) []byte {
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	if !strings.HasPrefix(method, "notifications/") {
		*id++
		msg["id"] = *id
	}
	body, _ := json.Marshal(msg)
	return body
}

// jsonrpcResult is a JSON-RPC response's result; its error is an error.
func jsonrpcResult(method string, raw []byte) (json.RawMessage, error) {
	var v struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("bad reply %q: %v", raw, err)
	}
	if v.Error != nil {
		return nil, fmt.Errorf("%s: error %d: %s", method, v.Error.Code, v.Error.Message)
	}
	return v.Result, nil
}

// tool calls a tool and returns its structured content; a tool error is
// an error.
func (b *server) tool(name string, args map[string]any) (map[string]any, error) {
	res, err := b.rpc("tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		return nil, err
	}
	sc, _ := res["structuredContent"].(map[string]any)
	if res["isError"] == true {
		return nil, fmt.Errorf("%s: %v", name, sc)
	}
	return sc, nil
}

// health reads /healthz.
func (b *server) health() (map[string]any, error) {
	resp, err := b.cl.Get(strings.TrimSuffix(b.url, "/mcp") + "/healthz")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var v map[string]any
	return v, json.NewDecoder(resp.Body).Decode(&v)
}

// deleteSession ends the client's MCP session (DELETE /mcp).
func (b *server) deleteSession() error {
	req, _ := http.NewRequest("DELETE", b.url, nil)
	req.Header.Set("Mcp-Session-Id", b.sid)
	resp, err := b.cl.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// mcp times execute_code(python3 -c "print(1)") over Streamable HTTP
// against a real srt-mcp serve, interleaved with minimal bwrap running the
// same Python, and prints p50/p99 of both and the ratio.
func (s *suite) mcp() error {
	bwrap, err := runner.FindBwrap()
	if err != nil {
		return fail("bench needs bwrap")
	}
	b, err := startServer(s.Binary)
	if err != nil {
		return fail(err.Error())
	}
	defer b.stop()
	py := s.Python
	call := func() (float64, error) {
		start := time.Now()
		sc, err := b.tool("execute_code", map[string]any{"command": py + ` -c "print(1)"`})
		if err != nil {
			return 0, err
		}
		if sc["status"] != "completed" || fmt.Sprint(sc["exit_code"]) != "0" {
			return 0, fmt.Errorf("execute_code: %v", sc)
		}
		return sinceMS(start), nil
	}
	bw := func() (float64, error) {
		start := time.Now()
		out, err := exec.Command(bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/", "/",
			"--dev", "/dev", "--proc", "/proc", "--", py, "-c", "print(1)").CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("bwrap: %v %s", err, out)
		}
		return sinceMS(start), nil
	}
	var mcpMS, bwMS []float64
	for i := 0; i < s.Warmup+s.Rounds; i++ {
		a, err := call()
		if err != nil {
			return fail(err.Error())
		}
		b, err := bw()
		if err != nil {
			return fail(err.Error())
		}
		if i >= s.Warmup {
			mcpMS, bwMS = append(mcpMS, a), append(bwMS, b)
		}
	}
	s.printf("%-40s %8s %8s\n", "python3 -c 'print(1)'", "p50", "p99")
	s.printf("%-40s %6.2fms %6.2fms\n", "minimal bwrap", median(bwMS), pct(bwMS, 0.99))
	s.printf("%-40s %6.2fms %6.2fms\n", "execute_code over Streamable HTTP", median(mcpMS), pct(mcpMS, 0.99))
	s.printf("\nratio p50: %.2fx (goal <= 1.5x); rounds: %d interleaved\n", median(mcpMS)/median(bwMS), len(mcpMS))
	s.add(Row{Path: "execute_code (command, fresh sandbox) over Streamable HTTP, p50", Now: fmt.Sprintf("%.1f ms", median(mcpMS)),
		Anchor: fmt.Sprintf("%.1f ms", median(bwMS)), Ratio: fmt.Sprintf("%.2fx", median(mcpMS)/median(bwMS)), Goal: "<= 1.5x", Met: median(mcpMS)/median(bwMS) <= 1.5})
	return nil
}
