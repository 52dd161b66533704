package ops_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/srt-mcp/srt-mcp/backend"
	"github.com/srt-mcp/srt-mcp/ops"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/service"
	"github.com/srt-mcp/srt-mcp/service/servicetest"
)

// scripted is a backend whose sandboxes are scripts the test plays: a
// command "observe me" hands its script to the test; the readiness
// probe's /bin/true exits 0 while ready is set; anything else (the cache
// template's build) fails to start, unless the test holds the build
// (templates): its script is then the test's too.
type scripted struct {
	*backend.Native
	ready     atomic.Bool
	scripts   chan *script
	templates chan *script
}

func (b *scripted) Start(_ *backend.Box, spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
	switch {
	case b.templates != nil && len(spec.Argv) == 3 && strings.Contains(spec.Argv[2], "import matplotlib"):
		s := newScript(sink)
		s.emit(runner.Event{Type: runner.EventReady})
		b.templates <- s
		return s, nil
	case len(spec.Argv) == 1 && spec.Argv[0] == "/bin/true" && b.ready.Load():
		s := newScript(sink)
		s.emit(runner.Event{Type: runner.EventExit})
		return s, nil
	case len(spec.Argv) > 0 && spec.Argv[len(spec.Argv)-1] == "observe me":
		s := newScript(sink)
		s.emit(runner.Event{Type: runner.EventReady})
		b.scripts <- s
		return s, nil
	}
	return nil, errors.New("no sandboxes in unit tests")
}

// script is a runner.Handle that plays back the events the test feeds it
// (as executions' own tests do).
type script struct {
	mu   sync.Mutex
	sink func(runner.Event)
	seq  uint64
	done chan struct{}
}

func newScript(sink func(runner.Event)) *script {
	return &script{sink: sink, done: make(chan struct{})}
}

func (s *script) emit(e runner.Event) {
	s.mu.Lock()
	s.seq++
	e.Seq, e.TS = s.seq, float64(time.Now().UnixNano())/1e9
	s.mu.Unlock()
	s.sink(e)
	if e.Terminal() {
		close(s.done)
	}
}
func (s *script) Write(p []byte) (int, error) { return len(p), nil }
func (s *script) CloseStdin() error           { return nil }
func (s *script) Resize(uint16, uint16) error { return nil }
func (s *script) Signal(syscall.Signal) error { return nil }
func (s *script) Cancel(bool)                 {}
func (s *script) Wait() runner.Event          { <-s.done; return runner.Event{} }
func (s *script) Done() <-chan struct{}       { return s.done }

// newOps is the server's wiring of the metrics: a real service on a
// session registry in a temporary state directory, reporting its runs to
// Observe, bound to the metrics' gauges.
func newOps(t *testing.T) (*ops.Ops, *service.Service, *scripted) {
	t.Helper()
	return newOpsOn(t, &scripted{Native: &backend.Native{}, scripts: make(chan *script, 1)})
}

func newOpsOn(t *testing.T, b *scripted) (*ops.Ops, *service.Service, *scripted) {
	t.Helper()
	o := ops.New()
	svc := servicetest.New(t, service.Config{Backend: b, Observe: o.Observe})
	o.Bind(svc)
	return o, svc, b
}

func get(h http.Handler, path string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "http://127.0.0.1:8080"+path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// metric reads one sample of the metrics' text exposition (name with its
// labels as exposed, e.g. `x_total{a="b"}`), or -1 when it is not there.
func metric(t *testing.T, o *ops.Ops, sample string) float64 {
	t.Helper()
	w := get(o.Metrics(), "/metrics")
	if w.Code != 200 {
		t.Fatalf("/metrics: %d", w.Code)
	}
	sc := bufio.NewScanner(strings.NewReader(w.Body.String()))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", sc.Text(), err)
			}
			return f
		}
	}
	return -1
}

// eventually polls metric until it reads want (Observe counts in the
// background once the execution ends).
func eventually(t *testing.T, o *ops.Ops, sample string, want float64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := metric(t, o, sample)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s = %v, want %v", sample, got, want)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestMetricsAuth(t *testing.T) {
	keyAuth := func(w http.ResponseWriter, r *http.Request) (string, bool) {
		if r.Header.Get("Authorization") == "Bearer api-key" {
			return "key:one", true
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="srt-mcp"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return "", false
	}
	call := func(auth func(http.ResponseWriter, *http.Request) (string, bool), header string) (string, bool, *httptest.ResponseRecorder) {
		r := httptest.NewRequest("GET", "http://127.0.0.1:8080/metrics", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		w := httptest.NewRecorder()
		p, ok := auth(w, r)
		return p, ok, w
	}
	for _, tc := range []struct {
		name      string
		token     string
		keyed     bool
		header    string
		principal string
		ok        bool
		realm     string
	}{
		{"no keys, no token", "", false, "", "anonymous", true, ""},
		{"no keys, no token, any header", "", false, "Bearer whatever", "anonymous", true, ""},
		{"the metrics token", "m-tok", false, "Bearer m-tok", "metrics", true, ""},
		{"a wrong metrics token", "m-tok", false, "Bearer m-tok2", "", false, "srt-mcp metrics"},
		{"a prefix of the metrics token", "m-tok", false, "Bearer m-to", "", false, "srt-mcp metrics"},
		{"the token without Bearer", "m-tok", false, "m-tok", "", false, "srt-mcp metrics"},
		{"nothing, with a token", "m-tok", false, "", "", false, "srt-mcp metrics"},
		{"an API key without keys", "m-tok", false, "Bearer api-key", "", false, "srt-mcp metrics"},
		{"the metrics token, keyed", "m-tok", true, "Bearer m-tok", "metrics", true, ""},
		{"an API key, keyed", "m-tok", true, "Bearer api-key", "key:one", true, ""},
		{"an API key, keyed, no token", "", true, "Bearer api-key", "key:one", true, ""},
		{"nothing, keyed", "", true, "", "", false, "srt-mcp"},
		{"the empty token, keyed", "", true, "Bearer ", "", false, "srt-mcp"},
		{"a wrong key, keyed", "m-tok", true, "Bearer nope", "", false, "srt-mcp"},
	} {
		p, ok, w := call(ops.MetricsAuth(tc.token, tc.keyed, keyAuth), tc.header)
		if p != tc.principal || ok != tc.ok {
			t.Errorf("%s: %q %v, want %q %v", tc.name, p, ok, tc.principal, tc.ok)
		}
		if !ok {
			if w.Code != 401 || w.Header().Get("WWW-Authenticate") != `Bearer realm="`+tc.realm+`"` {
				t.Errorf("%s: a refusal %d, WWW-Authenticate %q", tc.name, w.Code, w.Header().Get("WWW-Authenticate"))
			}
		} else if w.Code != 200 || w.Body.Len() != 0 {
			t.Errorf("%s: an accepted request got a reply: %d %q", tc.name, w.Code, w.Body.String())
		}
	}
}

func TestHealthz(t *testing.T) {
	o, _, _ := newOps(t)
	w := get(o.Healthz(), "/healthz")
	var v map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil || w.Code != 200 {
		t.Fatalf("healthz: %d %q", w.Code, w.Body.String())
	}
	if v["status"] != "ok" || v["running_executions"] != float64(0) || v["warm_pool_ready"] != float64(0) || v["workspace_fs"] != "directory" || len(v) != 4 {
		t.Errorf("healthz: %v", v)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	idle := 3
	o.BindRunners(func() int { return idle })
	w = get(o.Healthz(), "/healthz")
	v = nil
	_ = json.Unmarshal(w.Body.Bytes(), &v)
	if v["runners_idle"] != float64(3) {
		t.Errorf("healthz with a runner pool: %v", v)
	}
	idle = 5
	if got := metric(t, o, "srtmcp_runners_idle"); got != 5 {
		t.Errorf("srtmcp_runners_idle = %v", got)
	}
}

// Readyz: the checks' result (cached for 5 s), and 503 draining at once
// when the registry drains, counting the callers' runs a drain lets
// finish (not the server's own work, such as its cache template's build).
func TestReadyz(t *testing.T) {
	o, svc, b := newOpsOn(t, &scripted{Native: &backend.Native{}, scripts: make(chan *script, 1), templates: make(chan *script, 1)})
	var build *script
	select {
	case build = <-b.templates:
	case <-time.After(5 * time.Second):
		t.Fatal("the cache template's build did not start")
	}
	defer build.emit(runner.Event{Type: runner.EventExit, ExitCode: 1})
	var st syscall.Statfs_t
	if err := syscall.Statfs(svc.Sessions().StateDir(), &st); err != nil || int64(st.Bavail)*int64(st.Bsize) < service.MinFreeBytes {
		t.Skip("the temporary directory has too little free space for the readiness probe's disk check")
	}
	readyz := func() (int, map[string]any) {
		w := get(o.Readyz(), "/readyz")
		var v map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
			t.Fatalf("readyz: %d %q", w.Code, w.Body.String())
		}
		return w.Code, v
	}
	b.ready.Store(true)
	code, v := readyz()
	checks, _ := v["checks"].(map[string]any)
	sandbox, _ := checks["sandbox"].(map[string]any)
	disk, _ := checks["disk"].(map[string]any)
	if code != 200 || v["status"] != "ready" || sandbox["ok"] != true || disk["ok"] != true {
		t.Fatalf("a ready server: %d %v", code, v)
	}
	if ok, _ := o.Ready(context.Background()); !ok {
		t.Error("Ready disagrees with /readyz")
	}
	// The sandbox stops starting: Ready says so at once, /readyz within
	// its cache's 5 s.
	b.ready.Store(false)
	if ok, checks := o.Ready(context.Background()); ok || checks["sandbox"].OK || !strings.Contains(checks["sandbox"].Error, "/bin/true") {
		t.Errorf("Ready with a broken sandbox: %v %+v", ok, checks)
	}
	if code, v := readyz(); code != 200 {
		t.Errorf("the cached result: %d %v", code, v)
	}
	// Draining: at once, whatever is cached.
	run, err := svc.Start(context.Background(), service.Request{Op: "execute_code", Kind: "command", ByID: true,
		Caller: service.Caller{Principal: "key:one"}, Command: &service.CommandArgs{Command: "observe me"}})
	if err != nil {
		t.Fatal(err)
	}
	s := <-b.scripts
	svc.Sessions().Drain()
	code, v = readyz()
	if code != 503 || v["status"] != "draining" || v["running_executions"] != float64(1) {
		t.Errorf("a draining server with a caller's run and its own build running: %d %v", code, v)
	}
	s.emit(runner.Event{Type: runner.EventExit})
	<-run.Exec.Done()
	if code, v = readyz(); code != 503 || v["status"] != "draining" || v["running_executions"] != float64(0) {
		t.Errorf("a drained server: %d %v", code, v)
	}
}

func TestReadyzNotReady(t *testing.T) {
	o, _, _ := newOps(t)
	w := get(o.Readyz(), "/readyz")
	var v map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &v)
	checks, _ := v["checks"].(map[string]any)
	sandbox, _ := checks["sandbox"].(map[string]any)
	if w.Code != 503 || v["status"] != "not_ready" || sandbox["ok"] != false || sandbox["error"] == nil {
		t.Errorf("a server whose sandbox does not start: %d %v", w.Code, v)
	}
}

// Observe counts an execution a door starts when it ends: its kind,
// language and status, its wall time, its output and its proxy's
// decisions and bytes; the running gauge follows it meanwhile.
func TestObserve(t *testing.T) {
	o, svc, b := newOps(t)
	const total = `srtmcp_executions_total{kind="command",language="bash",status="completed"}`
	run, err := svc.Start(context.Background(), service.Request{Op: "execute_code", Kind: "command", ByID: true,
		Caller: service.Caller{Principal: "key:one"}, Command: &service.CommandArgs{Command: "observe me"}})
	if err != nil {
		t.Fatal(err)
	}
	var s *script
	select {
	case s = <-b.scripts:
	case <-time.After(5 * time.Second):
		t.Fatal("the command did not reach the backend")
	}
	s.emit(runner.Event{Type: runner.EventStdout, Data: []byte("hello")})
	s.emit(runner.Event{Type: runner.EventStderr, Data: []byte("oops\n")})
	s.emit(runner.Event{Type: runner.EventViolation, Violation: &runner.Violation{Kind: "network", Decision: "deny", Host: "evil.example", Port: 443}})
	s.emit(runner.Event{Type: runner.EventViolation, Violation: &runner.Violation{Kind: "network", Decision: "allow", Host: "pypi.org", Port: 443}})
	s.emit(runner.Event{Type: runner.EventViolation, Violation: &runner.Violation{Kind: "network", Decision: "deny", Host: "evil.example", Port: 80}})
	s.emit(runner.Event{Type: runner.EventViolation, Violation: &runner.Violation{Kind: "filesystem", Decision: "deny", Path: "/etc/shadow"}})
	s.emit(runner.Event{Type: runner.EventViolation, Violation: &runner.Violation{Kind: "network", Decision: "transfer", BytesOut: 100, BytesIn: 2000}})
	if got := metric(t, o, "srtmcp_executions_running"); got != 1 {
		t.Errorf("srtmcp_executions_running while it runs = %v", got)
	}
	time.Sleep(20 * time.Millisecond)
	if got := metric(t, o, total); got != -1 {
		t.Fatalf("counted before it ended: %v", got)
	}
	s.emit(runner.Event{Type: runner.EventExit, ExitCode: 0, DurationMS: 1500})
	<-run.Exec.Done()
	eventually(t, o, total, 1)
	for sample, want := range map[string]float64{
		`srtmcp_execution_duration_seconds_count{kind="command",language="bash"}`:           1,
		`srtmcp_execution_duration_seconds_sum{kind="command",language="bash"}`:             1.5,
		`srtmcp_execution_duration_seconds_bucket{kind="command",language="bash",le="1"}`:   0,
		`srtmcp_execution_duration_seconds_bucket{kind="command",language="bash",le="2.5"}`: 1,
		`srtmcp_output_bytes_total{stream="stdout"}`:                                        5,
		`srtmcp_output_bytes_total{stream="stderr"}`:                                        5,
		`srtmcp_proxy_decisions_total{decision="deny"}`:                                     2,
		`srtmcp_proxy_decisions_total{decision="allow"}`:                                    1,
		`srtmcp_proxy_decisions_total{decision="transfer"}`:                                 -1,
		`srtmcp_proxy_bytes_total{direction="out"}`:                                         100,
		`srtmcp_proxy_bytes_total{direction="in"}`:                                          2000,
		`srtmcp_executions_running`:                                                         0,
		`srtmcp_sessions_active`:                                                            0,
	} {
		if got := metric(t, o, sample); got != want {
			t.Errorf("%s = %v, want %v", sample, got, want)
		}
	}

	// A run that never starts is counted too, as failed.
	if _, err := svc.Start(context.Background(), service.Request{Op: "execute_code", Kind: "command", ByID: true,
		Caller: service.Caller{Principal: "key:one"}, Command: &service.CommandArgs{Command: "true"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, o, `srtmcp_executions_total{kind="command",language="bash",status="failed"}`, 1)
	if got := metric(t, o, total); got != 1 {
		t.Errorf("%s after another run = %v", total, got)
	}
	// Sessions are gauged as they open.
	if _, _, err := svc.OpenWorkspace(service.Caller{Principal: "key:one"}, ""); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, o, "srtmcp_sessions_active"); got != 1 {
		t.Errorf("srtmcp_sessions_active = %v", got)
	}
}
