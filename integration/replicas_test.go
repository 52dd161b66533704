package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// deployFile finds a file of deploy/ (the repository's, or the copy make
// test puts next to the test binaries).
func deployFile(t *testing.T, rel string) string {
	t.Helper()
	for _, dir := range []string{os.Getenv("SRT_MCP_DEPLOY"), "deploy", "../deploy"} {
		if dir == "" {
			continue
		}
		if p, err := filepath.Abs(filepath.Join(dir, rel)); err == nil {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	t.Fatalf("deploy/%s not found (set SRT_MCP_DEPLOY)", rel)
	return ""
}

// startHAProxy runs Debian's haproxy on cfg with env until the test ends.
func startHAProxy(t *testing.T, cfg string, env []string) {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil { // Debian puts it in /usr/sbin, outside a user's PATH
		bin, err = exec.LookPath("/usr/sbin/haproxy")
	}
	if err != nil {
		if os.Getenv("SRT_MCP_REQUIRE_CLIENTS") == "1" {
			t.Fatal("haproxy is not installed (apt-get install haproxy)")
		}
		t.Skip("haproxy is not installed")
	}
	cmd := exec.Command(bin, "-db", "-f", cfg)
	cmd.Env = append(os.Environ(), env...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("haproxy:\n%s", logs.String())
		}
	})
}

// Three replicas behind a stock HAProxy configured by deploy/haproxy: 10
// TypeScript SDK clients (2025-11-25, Mcp-Session-Id), 10 Go SDK clients
// (2026-07-28, Mcp-Param-* headers) and both generations of the LibreChat
// client each keep their state, stdin, cancel, artifacts and downloads
// across many calls, wherever their session landed; then one replica is
// killed: its clients get an error naming it, the others go on unaffected.
func TestReplicasBehindHAProxy(t *testing.T) {
	requirePythonData(t)
	dir := mcpClients(t)
	cfg := deployFile(t, "haproxy/haproxy.cfg")
	pemFile, mint, priv := lcKeys(t)
	proxyPort := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
	env := []string{"SRT_MCP_LISTEN=127.0.0.1:" + strconv.Itoa(proxyPort)}
	var replicas []*mcpServer
	for i := 0; i < 3; i++ {
		s := startServe(t, "--backend", "native", "--replica-id", fmt.Sprintf("srt-mcp-%d", i), "--file-secret", testFileSecret,
			"--public-base-url", base, "--librechat-api-key", lcKey, "--librechat-jwt-public-key", pemFile,
			"--max-sessions", "40") // a slow readiness check can send more than a third of the clients to one replica
		replicas = append(replicas, s)
		env = append(env, fmt.Sprintf("SRT_MCP_%d=%s", i, strings.TrimSuffix(strings.TrimPrefix(s.url, "http://"), "/mcp")))
	}
	startHAProxy(t, cfg, env)
	// Ready when every replica passed the proxy's readiness check.
	deadline := time.Now().Add(30 * time.Second)
	for seen := map[string]bool{}; len(seen) < 3; {
		resp, err := http.Post(base+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}`))
		if err == nil {
			if id := resp.Header.Get("Mcp-Session-Id"); strings.HasPrefix(id, "mcp-session-srt-mcp-") {
				seen[id[len("mcp-session-"):len("mcp-session-srt-mcp-0")]] = true
			}
			resp.Body.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy did not reach all three replicas: %v", seen)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// 10 TypeScript SDK clients, in one node process that waits between
	// its phases.
	ts := exec.Command("node", "replicas.mjs", base+"/mcp", "10", "5")
	ts.Dir = dir
	tsIn, _ := ts.StdinPipe()
	tsOut, _ := ts.StdoutPipe()
	var tsErr bytes.Buffer
	ts.Stderr = &tsErr
	if err := ts.Start(); err != nil {
		t.Fatal(err)
	}
	defer ts.Process.Kill()
	tsLines := make(chan map[string]any, 64)
	go func() {
		sc := bufio.NewScanner(tsOut)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				tsLines <- m
			}
		}
		close(tsLines)
	}()

	// 10 Go SDK clients at 2026-07-28, each with its handles.
	gos := make([]*replicaClient, 10)
	var wg sync.WaitGroup
	goErrs := make(chan error, 10)
	for i := range gos {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := goFlow(t, base+"/mcp", i)
			if err != nil {
				goErrs <- fmt.Errorf("go client %d: %v", i, err)
				return
			}
			gos[i] = c
		}(i)
	}
	// Both LibreChat clients, twice each (their uploads land on different
	// replicas; exec, freshness and downloads must follow them).
	lcBase := base + "/v1/librechat"
	for round := 0; round < 2; round++ {
		for _, gen := range []string{"modern", "legacy"} {
			runLibreChatClient(t, dir, gen, lcBase, mint("65f0c0ffee0000000000user", priv))
		}
	}
	wg.Wait()
	close(goErrs)
	for err := range goErrs {
		t.Error(err)
	}
	// The TypeScript clients' first phase.
	tsReplica := map[int]string{}
	for m := range tsLines {
		if m["phase1"] == "done" {
			break
		}
		if m["ok"] != true {
			t.Errorf("TypeScript client: %v\nstderr: %s", m, tsErr.String())
			continue
		}
		tsReplica[int(m["client"].(float64))] = m["replica"].(string)
	}
	if t.Failed() {
		t.FailNow()
	}
	per := map[string]int{}
	for _, r := range tsReplica {
		per["ts "+r]++
	}
	for _, c := range gos {
		per["go "+c.replica]++
	}
	// The replica killed has clients of both kinds, and so does another
	// one that lives on. (A readiness check slow under load takes a
	// replica out of rotation for a while, so not every replica need have
	// both.)
	both := func(r string) bool { return per["ts "+r] > 0 && per["go "+r] > 0 }
	victim := -1
	for i := 0; i < 3; i++ {
		if both(fmt.Sprintf("srt-mcp-%d", i)) {
			for j := 0; j < 3; j++ {
				if j != i && both(fmt.Sprintf("srt-mcp-%d", j)) {
					victim = i
				}
			}
		}
	}
	if victim < 0 {
		t.Fatalf("no two replicas each hold clients of both kinds (%v): the kill below would test nothing", per)
	}
	killed := fmt.Sprintf("srt-mcp-%d", victim)
	t.Logf("sessions per replica: %v; killing %s", per, killed)

	_ = replicas[victim].cmd.Process.Kill()
	_, _ = replicas[victim].cmd.Process.Wait()
	time.Sleep(2500 * time.Millisecond) // the proxy's health checks (1 s) mark it down

	// Its clients get an error naming it; every other client keeps its state.
	if _, err := io.WriteString(tsIn, "go\n"); err != nil {
		t.Fatal(err)
	}
	for m := range tsLines {
		replica, _ := m["replica"].(string)
		if replica == killed {
			if m["ok"] == true || !strings.Contains(fmt.Sprint(m["error"]), "replica_unavailable: "+killed) {
				t.Errorf("a TypeScript client of the killed replica: %v", m)
			}
		} else if m["ok"] != true {
			t.Errorf("a TypeScript client of a live replica: %v", m)
		}
	}
	for i, c := range gos {
		v, isErr, text, err := goCall(c.cs, "execute_code", map[string]any{"code": "print(n)", "language": "python", "session_id": c.sid})
		if c.replica == killed {
			if err == nil || !strings.Contains(err.Error(), "replica_unavailable") {
				t.Errorf("go client %d of the killed replica: err=%v isError=%v %s", i, err, isErr, text)
			}
		} else if err != nil || isErr || v["stdout"] != "5\n" {
			t.Errorf("go client %d of %s after the kill: err=%v isError=%v %v %s", i, c.replica, err, isErr, v, text)
		}
	}
	// New sessions go to the live replicas.
	for k := 0; k < 4; k++ {
		c, err := goFlow(t, base+"/mcp", 100+k)
		if err != nil {
			t.Fatalf("a new client after the kill: %v", err)
		}
		if c.replica == killed {
			t.Fatalf("a new session landed on the killed replica")
		}
	}
	_ = ts.Wait()
}

// replicaClient is a Go SDK client with its workspace handle and the
// replica the handle names.
type replicaClient struct {
	cs      *mcp.ClientSession
	sid     string
	replica string
}

// goFlow runs one Go SDK client's flow: cells that keep a variable, stdin,
// cancel, an artifact downloaded by its URL.
func goFlow(t *testing.T, endpoint string, i int) (*replicaClient, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sdk := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("replicas-go-%d", i), Version: "1"}, nil)
	cs, err := sdk.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Timeout: 2 * time.Minute}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		return nil, fmt.Errorf("the Go SDK negotiated %q, want 2026-07-28", v)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil { // it mirrors x-mcp-header arguments of listed tools
		return nil, err
	}
	c := &replicaClient{cs: cs}
	for k := 1; k <= 5; k++ {
		args := map[string]any{"code": "n = globals().get('n', 0) + 1\nprint(n)", "language": "python"}
		if c.sid != "" {
			args["session_id"] = c.sid
		}
		v, isErr, text, err := goCall(cs, "execute_code", args)
		if err != nil || isErr || v["stdout"] != fmt.Sprintf("%d\n", k) {
			return nil, fmt.Errorf("cell %d: %v %v %v %s", k, err, isErr, v, text)
		}
		if c.sid == "" {
			c.sid, _ = v["session_id"].(string)
			parts := strings.Split(c.sid, "_")
			if len(parts) != 3 {
				return nil, fmt.Errorf("session handle %q names no replica", c.sid)
			}
			c.replica = parts[1]
		}
	}
	// stdin.
	v, isErr, text, err := goCall(cs, "execute_code_async", map[string]any{"command": "read line; echo got:$line", "session_id": c.sid})
	eid, _ := v["execution_id"].(string)
	if err != nil || isErr || !strings.HasPrefix(eid, "exec_"+c.replica+"_") {
		return nil, fmt.Errorf("async: %v %v %v %s", err, isErr, v, text)
	}
	if _, isErr, text, err := goCall(cs, "send_stdin", map[string]any{"execution_id": eid, "input_data": fmt.Sprintf("go%d\n", i)}); err != nil || isErr {
		return nil, fmt.Errorf("send_stdin: %v %s", err, text)
	}
	v, _, text, err = goCall(cs, "get_execution_output", map[string]any{"execution_id": eid, "wait": true})
	if err != nil || !strings.Contains(fmt.Sprint(v)+text, fmt.Sprintf("got:go%d", i)) {
		return nil, fmt.Errorf("stdin output: %v %v %s", err, v, text)
	}
	// cancel.
	v, _, _, err = goCall(cs, "execute_code_async", map[string]any{"command": "trap 'echo got-term; exit 7' TERM; echo up; while :; do sleep 0.1; done", "session_id": c.sid})
	cid, _ := v["execution_id"].(string)
	if err != nil || cid == "" {
		return nil, fmt.Errorf("async cancel target: %v %v", err, v)
	}
	for since, tries := 0.0, 0; ; tries++ {
		v, _, _, err = goCall(cs, "get_execution_output", map[string]any{"execution_id": cid, "since_seq": since, "wait": true, "wait_for": "output", "wait_timeout_seconds": 5})
		if err == nil && strings.Contains(fmt.Sprint(v["output"]), "up") {
			break
		}
		if n, ok := v["next_seq"].(float64); ok {
			since = n
		}
		if tries > 20 {
			return nil, fmt.Errorf("the cancel target never printed up: %v %v", err, v)
		}
	}
	if _, isErr, text, err := goCall(cs, "cancel_execution", map[string]any{"execution_id": cid}); err != nil || isErr {
		return nil, fmt.Errorf("cancel: %v %s", err, text)
	}
	v, _, text, err = goCall(cs, "get_execution_output", map[string]any{"execution_id": cid, "wait": true})
	if err != nil || !strings.Contains(fmt.Sprint(v)+text, "got-term") {
		return nil, fmt.Errorf("cancelled output: %v %v %s", err, v, text)
	}
	// An artifact, by its signed URL through the proxy.
	v, isErr, text, err = goCall(cs, "execute_code", map[string]any{"code": fmt.Sprintf("open('/mnt/data/go-%d.txt', 'w').write('go-%d-' + str(n))", i, i), "language": "python", "session_id": c.sid})
	if err != nil || isErr {
		return nil, fmt.Errorf("artifact cell: %v %s", err, text)
	}
	var url string
	if arts, ok := v["artifacts"].([]any); ok {
		for _, a := range arts {
			if m, ok := a.(map[string]any); ok && strings.Contains(fmt.Sprint(m["filename"], m["name"]), fmt.Sprintf("go-%d.txt", i)) {
				url, _ = m["download_url"].(string)
			}
		}
	}
	if url == "" {
		return nil, fmt.Errorf("no artifact URL: %v", v)
	}
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != fmt.Sprintf("go-%d-5", i) {
		return nil, fmt.Errorf("download %s: %d %q", url, resp.StatusCode, body)
	}
	return c, nil
}

// goCall is sdkCall that returns the call's error instead of failing the
// test (from any goroutine).
func goCall(cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, bool, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, false, "", err
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	v := map[string]any{}
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &v)
	}
	return v, res.IsError, text.String(), nil
}
