package integration

// Operations: Prometheus /metrics and the /readyz probe of a real server.

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestOpsMetricsAndReadyz(t *testing.T) {
	parallel(t)
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
	// Metrics are recorded when an execution's end is seen, which may be
	// just after its reply: read until they are there (or 5 s).
	wants := []string{
		`srtmcp_executions_total{kind="command",language="bash",status="completed"} 1`,
		`srtmcp_executions_total{kind="cell",language="python",status="completed"} 1`,
		`srtmcp_execution_duration_seconds_bucket{kind="cell",language="python",le="+Inf"} 1`,
		`srtmcp_output_bytes_total{stream="stdout"}`,
		`srtmcp_sessions_active 1`,
		`srtmcp_warm_pool_ready 0`,
		`srtmcp_runners_idle `,
		`srtmcp_executions_running 0`, // callers' runs only: the server's own start-up work is not counted
		`go_goroutines`,
	}
	var missing []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		req, _ := http.NewRequest("GET", d.base()+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer m3trics")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		missing = missing[:0]
		for _, want := range wants {
			if !strings.Contains(string(raw), want) {
				missing = append(missing, want)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, m := range missing {
		t.Errorf("/metrics lacks %s", m)
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
