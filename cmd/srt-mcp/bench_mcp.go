package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/srt-mcp/srt-mcp/runner"
)

// runMCPBench times execute_code(python3 -c "print(1)") over Streamable HTTP
// against a real srt-mcp serve, interleaved with minimal bwrap running the
// same Python, and prints p50/p99 of both and the ratio.
func runMCPBench(c *cli.Context) error {
	self, _ := os.Executable()
	bwrap, err := runner.FindBwrap()
	if err != nil {
		return cli.Exit("bench needs bwrap", 1)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	srv := exec.Command(self, "serve", "--port", fmt.Sprint(port))
	srv.Stderr = io.Discard
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { _ = srv.Process.Signal(os.Interrupt); _ = srv.Wait() }()
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	for i := 0; ; i++ {
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err == nil {
			resp.Body.Close()
			break
		}
		if i > 200 {
			return cli.Exit("srt-mcp serve did not come up", 1)
		}
		time.Sleep(25 * time.Millisecond)
	}
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	sid := ""
	rpc := func(body string) (map[string]any, error) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := cl.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
			sid = s
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusAccepted {
			return nil, nil
		}
		if i := bytes.Index(b, []byte("data: ")); i >= 0 { // an SSE-framed reply
			b = b[i+6:]
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("bad reply %q: %v", b, err)
		}
		return v, nil
	}
	if _, err := rpc(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`); err != nil {
		return cli.Exit(err.Error(), 1)
	}
	_, _ = rpc(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	py := c.String("python")
	call := func() (float64, error) {
		start := time.Now()
		v, err := rpc(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_code","arguments":{"command":"` + py + ` -c \"print(1)\""}}}`)
		if err != nil {
			return 0, err
		}
		res, _ := v["result"].(map[string]any)
		sc, _ := res["structuredContent"].(map[string]any)
		if sc["status"] != "completed" || fmt.Sprint(sc["exit_code"]) != "0" {
			return 0, fmt.Errorf("execute_code: %v", v)
		}
		return float64(time.Since(start).Microseconds()) / 1000, nil
	}
	bw := func() (float64, error) {
		start := time.Now()
		out, err := exec.Command(bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/", "/",
			"--dev", "/dev", "--proc", "/proc", "--", py, "-c", "print(1)").CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("bwrap: %v %s", err, out)
		}
		return float64(time.Since(start).Microseconds()) / 1000, nil
	}
	var mcpMS, bwMS []float64
	for i := 0; i < c.Int("warmup")+c.Int("rounds"); i++ {
		a, err := call()
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		b, err := bw()
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		if i >= c.Int("warmup") {
			mcpMS, bwMS = append(mcpMS, a), append(bwMS, b)
		}
	}
	fmt.Printf("%-40s %8s %8s\n", "python3 -c 'print(1)'", "p50", "p99")
	fmt.Printf("%-40s %6.2fms %6.2fms\n", "minimal bwrap", median(bwMS), pct(bwMS, 0.99))
	fmt.Printf("%-40s %6.2fms %6.2fms\n", "execute_code over Streamable HTTP", median(mcpMS), pct(mcpMS, 0.99))
	fmt.Printf("\nratio p50: %.2fx (goal <= 1.5x); rounds: %d interleaved\n", median(mcpMS)/median(bwMS), len(mcpMS))
	return nil
}
