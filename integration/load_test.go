package integration

// 50 agents on a server's defaults: `srt-mcp bench --load` drives 50 MCP
// TypeScript SDK clients, each in its own MCP session (its own workspace),
// running cells back to back for 60 s against a server on its defaults but
// --max-sessions, and checks every reply. Then: no error, the server's RSS
// within 100 MB of where it started, and no descriptor, process or
// goroutine left once the clients closed their sessions.

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

func TestLoad50Agents(t *testing.T) {
	dir := mcpClients(t)
	out, err := exec.Command(nwBin(t), "bench", "--load", "--clients", "50", "--seconds", "60", "--client-dir", dir, "--json").Output()
	line := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	var r map[string]any
	if jerr := json.Unmarshal([]byte(line), &r); jerr != nil {
		t.Fatalf("bench --load: %v %v\n%s", err, jerr, out)
	}
	num := func(k string) float64 { f, _ := r[k].(float64); return f }
	t.Logf("50 agents, 60 s: %.0f calls, %.0f errors, p50 %.1f ms, p99 %.1f ms, %.0f calls/s; RSS %.0f -> %.0f MB (peak %.0f); fds %.0f -> %.0f, processes %.0f -> %.0f, goroutines %.0f -> %.0f",
		num("calls"), num("errors"), num("p50_ms"), num("p99_ms"), num("throughput_per_s"),
		num("rss_before_bytes")/(1<<20), num("rss_after_bytes")/(1<<20), num("rss_peak_bytes")/(1<<20),
		num("fds_before"), num("fds_after"), num("processes_before"), num("processes_after"), num("goroutines_before"), num("goroutines_after"))
	if err != nil || num("errors") != 0 || num("calls") < 1000 || r["failed"] != nil {
		t.Fatalf("bench --load failed (%v): %s", err, line)
	}
}
