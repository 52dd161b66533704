package integration

// Operations: Prometheus /metrics and the /readyz probe of a real server.

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestOpsMetricsAndReadyz(t *testing.T) {
	d := startData(t, []string{"--backend", "native"}, "--metrics-token", "m3trics")
	if v, isErr := d.call("execute_code", map[string]any{"command": "echo hi; echo err >&2"}); isErr || v["status"] != "completed" {
		t.Fatalf("command: %v", v)
	}
	if v, isErr := d.call("execute_code", map[string]any{"code": "1 + 1", "language": "python"}); isErr || v["stdout"] != "2\n" {
		t.Fatalf("cell: %v", v)
	}
	if code, _, _ := httpGet(t, d.base()+"/metrics"); code != http.StatusUnauthorized {
		t.Fatalf("/metrics without its token: %d", code)
	}
	req, _ := http.NewRequest("GET", d.base()+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer m3trics")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	resp.Body.Close()
	body := b.String()
	for _, want := range []string{
		`srtmcp_executions_total{kind="command",language="bash",status="completed"} 1`,
		`srtmcp_executions_total{kind="cell",language="python",status="completed"} 1`,
		`srtmcp_execution_duration_seconds_bucket{kind="cell",language="python",le="+Inf"} 1`,
		`srtmcp_output_bytes_total{stream="stdout"}`,
		`srtmcp_sessions_active 1`,
		`srtmcp_warm_pool_ready 0`,
		`srtmcp_executions_running `, // the server's own start-up work may still run
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	code, _, raw := httpGet(t, d.base()+"/readyz")
	var r map[string]any
	_ = json.Unmarshal(raw, &r)
	checks, _ := r["checks"].(map[string]any)
	if code != 200 || r["status"] != "ready" || checks["sandbox"] == nil || checks["disk"] == nil {
		t.Fatalf("/readyz: %d %s", code, raw)
	}
	if !strings.Contains(string(raw), "bubblewrap ran /bin/true") {
		t.Errorf("/readyz must run a real sandbox: %s", raw)
	}
}
