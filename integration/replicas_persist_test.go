//go:build linux

package integration

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A persistent workspace behind the HAProxy setup in deploy/, its replicas
// sharing --persist-dir: when the replica holding it dies (SIGKILL), its
// handle answers replica_unavailable naming it and saying how to resume,
// and create_session with the workspace's name resumes it on a live
// replica, under that replica's handle, with its files.
func TestReplicasPersistentFailover(t *testing.T) {
	requirePythonData(t)
	cfg := deployFile(t, "haproxy/haproxy.cfg")
	shared := filepath.Join(reachableTempDir(t), "persistent")
	proxyPort := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
	env := []string{"SRT_MCP_LISTEN=127.0.0.1:" + strconv.Itoa(proxyPort)}
	var replicas []*mcpServer
	for i := 0; i < 3; i++ {
		state := filepath.Join(reachableTempDir(t), "state")
		cleanupVolumes(t, state)
		s := startServe(t, "--backend", "native", "--replica-id", fmt.Sprintf("srt-mcp-%d", i), "--state-dir", state,
			"--persist-dir", shared, "--workspace-quota", "64M", "--public-base-url", base)
		replicas = append(replicas, s)
		env = append(env, fmt.Sprintf("SRT_MCP_%d=%s", i, strings.TrimSuffix(strings.TrimPrefix(s.url, "http://"), "/mcp")))
	}
	cleanupVolumes(t, shared)
	startHAProxy(t, cfg, env)
	connect := func() *mcp.ClientSession {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sdk := mcp.NewClient(&mcp.Implementation{Name: "persist-failover", Version: "1"}, nil)
		for {
			cs, err := sdk.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Timeout: time.Minute}, DisableStandaloneSSE: true}, nil)
			if err == nil {
				t.Cleanup(func() { _ = cs.Close() })
				if _, err := cs.ListTools(ctx, nil); err != nil {
					t.Fatal(err)
				}
				return cs
			}
			if ctx.Err() != nil {
				t.Fatalf("connecting through the proxy: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	replicaOf := func(sid string) string {
		if p := strings.Split(sid, "_"); len(p) == 3 {
			return p[1]
		}
		return ""
	}
	cs := connect()
	v, isErr, text, err := goCall(cs, "create_session", map[string]any{"language": "python", "name": "proj", "persist": true})
	if err != nil || isErr {
		t.Fatalf("create_session: %v %s", err, text)
	}
	sid := fmt.Sprint(v["session_id"])
	holder := replicaOf(sid)
	if _, isErr, text, err := goCall(cs, "execute_code", map[string]any{"session_id": sid, "language": "python", "code": "open('keep.txt', 'w').write('kept')\nprint('ok')"}); err != nil || isErr {
		t.Fatalf("writing: %v %s", err, text)
	}
	victim := -1
	for i := range replicas {
		if fmt.Sprintf("srt-mcp-%d", i) == holder {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("handle %s names no replica", sid)
	}
	_ = replicas[victim].cmd.Process.Kill()
	_, _ = replicas[victim].cmd.Process.Wait()
	time.Sleep(2500 * time.Millisecond) // the proxy's health checks (1 s) mark it down

	_, _, text, err = goCall(cs, "execute_code", map[string]any{"session_id": sid, "language": "python", "code": "print(1)"})
	if msg := fmt.Sprint(err) + text; !strings.Contains(msg, "replica_unavailable: "+holder) || !strings.Contains(msg, "create_session") {
		t.Errorf("the dead replica's handle: %s (want replica_unavailable naming %s and how to resume a persistent workspace)", msg, holder)
	}
	cs2 := connect()
	v, isErr, text, err = goCall(cs2, "create_session", map[string]any{"language": "python", "name": "proj", "persist": true})
	if err != nil || isErr {
		t.Fatalf("create_session by name after the kill: %v %s", err, text)
	}
	moved := fmt.Sprint(v["session_id"])
	if r := replicaOf(moved); r == holder || r == "" || v["resumed"] != true {
		t.Fatalf("resumed on %q (handle %s, resumed %v): want a live replica", r, moved, v["resumed"])
	}
	v, isErr, text, err = goCall(cs2, "execute_code", map[string]any{"session_id": moved, "language": "python", "code": "print(open('keep.txt').read())"})
	if err != nil || isErr || !strings.Contains(fmt.Sprint(v["stdout"]), "kept") {
		t.Errorf("the workspace's files on %s: %v %v %s", replicaOf(moved), err, v, text)
	}
	t.Logf("workspace %s of %s (killed) resumed as %s", sid, holder, moved)
}
