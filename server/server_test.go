package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/settings"
)

func TestOptionsCheck(t *testing.T) {
	ok := Options{StateDir: "/var/lib/srt-mcp"}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string // "" : accepted
	}{
		{"native by default", func(*Options) {}, ""},
		{"native", func(o *Options) { o.Backend = "native" }, ""},
		{"docker", func(o *Options) { o.Backend, o.Docker.CPUs = "docker", 1 }, ""},
		{"docker without CPUs", func(o *Options) { o.Backend = "docker" }, "--cpu-limit must be positive"},
		{"unknown backend", func(o *Options) { o.Backend = "podman" }, `--backend "podman": use native or docker`},
		{"no state directory", func(o *Options) { o.StateDir = "" }, "no state directory"},
		{"settings without a ceiling", func(o *Options) { o.Settings = &Settings{File: &settings.File{Path: "/etc/srt-mcp.json"}} }, "Ceiling"},
		{"settings with one", func(o *Options) {
			o.Settings = &Settings{File: &settings.File{Path: "/etc/srt-mcp.json"}, Ceiling: func(*settings.File) (policy.Policy, error) { return policy.Policy{}, nil }}
		}, ""},
		{"share above 1", func(o *Options) { o.PrincipalShare = 1.5 }, "principal share"},
	} {
		o := ok
		tc.edit(&o)
		err := o.check()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// Run refuses them before it makes anything.
	dir := filepath.Join(t.TempDir(), "state")
	if err := Run(context.Background(), Options{StateDir: dir, Backend: "podman"}); err == nil {
		t.Error("Run with an unknown backend: no error")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Run refused its options but made the state directory: %v", err)
	}
}

// The server's own errors name what failed.
func TestRunStateDirectoryError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := Run(context.Background(), testOptions(t, file))
	if err == nil || !strings.HasPrefix(err.Error(), "state directory "+file+": ") {
		t.Errorf("Run on a state directory that is a file: %v", err)
	}
}

// syncBuffer is a log the test reads while the server writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// line returns the first log line whose msg is msg, decoded.
func (s *syncBuffer) line(msg string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	return nil
}

// testOptions are Options that start nothing: no runners, no warm pool,
// a runner binary that does not exist (nothing re-executes the test
// binary), an HTTP listener on a free loopback port.
func testOptions(t *testing.T, stateDir string) Options {
	return Options{
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Version: "test",
		RunnerBinary: "/nonexistent/srt-mcp", RunnerPool: 0, WarmPool: 0, Backend: "native",
		StateDir: stateDir, MaxConcurrent: 2, MaxPerSession: 2, MaxSessions: 2, PrincipalShare: 1,
		Host: "127.0.0.1", Port: 0, DrainTimeout: 5 * time.Second, HTTPIdleTimeout: time.Minute,
		MaxConnectionsPerAddress: 16,
	}
}

// stateDir is a state directory a root server's sandbox users could reach
// (the directories above it searchable, as sessions.Config.Reach checks).
func stateDir(t *testing.T) string {
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "state")
}

// startRun runs the server in the background and returns its base URL
// (from the log line that announces it) and Run's result.
func startRun(t *testing.T, ctx context.Context, o Options) (string, *syncBuffer, <-chan error) {
	t.Helper()
	log := &syncBuffer{}
	o.Logger = slog.New(slog.NewJSONHandler(log, nil))
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := log.line("srt-mcp serving MCP"); m != nil {
			u, _ := m["url"].(string)
			return strings.TrimSuffix(u, "/mcp"), log, done
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned before serving: %v\n%s", err, log.b.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("the server did not announce itself in 10 s:\n%s", log.b.String())
	return "", nil, nil
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func waitRun(t *testing.T, done <-chan error, within time.Duration) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(within):
		t.Fatalf("Run did not return within %s", within)
	}
}

// Run serves over HTTP until its context ends, then stops everything and
// returns nil.
func TestRunServesUntilContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := testOptions(t, stateDir(t))
	o.Token = "the-token-0123456789"
	base, _, done := startRun(t, ctx, o)
	if code, body := get(t, base+"/healthz"); code != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, _ := get(t, base+"/metrics"); code != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: %d, want 401", code)
	}
	cancel()
	waitRun(t, done, 15*time.Second)
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("still answering after Run returned")
	}
}

// The first SIGTERM drains, and with no execution running the server
// stops at once (/readyz's 503 during a drain is the integration suite's
// TestDrainOnSIGTERM, with a run going).
func TestRunDrainsOnSIGTERM(t *testing.T) {
	_, log, done := startRun(t, context.Background(), testOptions(t, stateDir(t)))
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitRun(t, done, 5*time.Second)
	if log.line("drained: every execution finished") == nil {
		t.Error("no drain in the log")
	}
}

func TestBytesShare(t *testing.T) {
	for _, tc := range []struct {
		n     int64
		share float64
		want  int64
	}{
		{256 << 20, 1, 256 << 20},
		{256 << 20, 0, 256 << 20},
		{256 << 20, 0.5, 128 << 20},
		{3, 0.5, 2},
		{1, 0.01, 1},
		{0, 0.5, 0},
	} {
		if got := bytesShare(tc.n, tc.share); got != tc.want {
			t.Errorf("bytesShare(%d, %v) = %d, want %d", tc.n, tc.share, got, tc.want)
		}
	}
}
