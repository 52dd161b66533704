package integration

// Seed 003's tools through a real MCP client, and its environment names.

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSeed003RunCode(t *testing.T) {
	parallel(t)
	forEachBackend(t, testSeed003RunCode)
}

func testSeed003RunCode(t *testing.T, backend []string) {
	d := startData(t, backend)
	runners := d.wantErrorless("sandbox.list_runners", map[string]any{})
	if !strings.Contains(fmt.Sprint(runners["languages"]), "language:python") {
		t.Fatalf("list_runners: %v", runners)
	}
	code := "import csv\nwith open('result.csv', 'w', newline='') as f:\n    csv.writer(f).writerows([['a', 'b'], [1, 2]])\nprint('wrote result.csv')"
	v := d.wantErrorless("sandbox.run_code", map[string]any{"conversationId": "conv-42", "language": "python", "code": code})
	files, _ := v["files"].([]any)
	if v["success"] != true || !strings.Contains(v["output"].(string), "wrote result.csv") || len(files) != 1 {
		t.Fatalf("run_code: %v", v)
	}
	f := files[0].(map[string]any)
	url := f["url"].(string)
	convSID, _ := v["session_id"].(string)
	if f["name"] != "result.csv" || convSID == "" || !strings.Contains(url, "/files/"+convSID+"/result.csv?") {
		t.Fatalf("file: %v", f)
	}
	if code, _, body := httpGet(t, url); code != 200 || string(body) != "a,b\r\n1,2\r\n" {
		t.Fatalf("download: %d %q", code, body)
	}
	if code, _, _ := httpGet(t, strings.Replace(url, "sig=", "sig=ff", 1)); code != 403 {
		t.Fatalf("a tampered signature: %d", code)
	}
	if code, _, _ := httpGet(t, signedURL(d.base(), convSID, incOf(t, url), "result.csv", time.Now().Add(-time.Second).Unix())); code != 403 {
		t.Fatalf("an expired signature: %d", code)
	}
	// The same conversation keeps its files; another does not see them.
	v = d.wantErrorless("sandbox.run_code", map[string]any{"conversationId": "conv-42", "language": "bash", "code": "cat result.csv | wc -l"})
	if v["success"] != true || strings.TrimSpace(v["output"].(string)) != "2" {
		t.Fatalf("the conversation's files: %v", v)
	}
	v, _ = d.call("sandbox.run_code", map[string]any{"conversationId": "conv-other", "language": "bash", "code": "ls; cat result.csv"})
	if v["success"] != false || len(v["files"].([]any)) != 0 {
		t.Fatalf("another conversation saw the files: %v", v)
	}
	// Failures: success false with the diagnostics in output.
	v, _ = d.call("sandbox.run_code", map[string]any{"conversationId": "conv-42", "language": "python", "code": "1/0"})
	if v["success"] != false || !strings.Contains(v["output"].(string), "ZeroDivisionError") {
		t.Fatalf("a failing run: %v", v)
	}
	v, isErr := d.call("sandbox.run_code", map[string]any{"conversationId": "conv-42", "language": "cobol", "code": "x"})
	if !isErr || v["success"] != false || !strings.Contains(v["output"].(string), "list_runners") {
		t.Fatalf("an unknown language: %v", v)
	}
	if v, isErr := d.call("sandbox.run_code", map[string]any{"conversationId": "", "language": "python", "code": "1"}); !isErr || v["success"] != false {
		t.Fatalf("an empty conversationId: %v", v)
	}
}

// TestSeed003Environment: MCP_HTTP_ADDR and MCP_API_TOKEN configure the
// listener and its bearer token.
func TestSeed003Environment(t *testing.T) {
	parallel(t)
	port := freePort(t)
	cmd := exec.Command(nwBin(t), "serve", "--state-dir", filepath.Join(reachableTempDir(t), "s"), "--warm-pool", "0")
	cmd.Env = append(os.Environ(), "MCP_HTTP_ADDR=127.0.0.1:"+strconv.Itoa(port), "MCP_API_TOKEN=seed3-token", "HOME="+t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server did not listen on MCP_HTTP_ADDR")
		}
		time.Sleep(50 * time.Millisecond)
	}
	post := func(token string) int {
		req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := post(""); c != 401 {
		t.Fatalf("without MCP_API_TOKEN: %d", c)
	}
	if c := post("seed3-token"); c != 200 {
		t.Fatalf("with MCP_API_TOKEN: %d", c)
	}
}
