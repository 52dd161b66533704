package mcpserver

// Operations: Prometheus metrics (prometheus/client_golang) and the
// readiness probe.

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/srt-mcp/srt-mcp/executions"
	"github.com/srt-mcp/srt-mcp/runner"
)

type metrics struct {
	reg       *prometheus.Registry
	execs     *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	decisions *prometheus.CounterVec
	output    *prometheus.CounterVec
	proxied   *prometheus.CounterVec
}

func (s *Server) initMetrics() {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.execs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "srtmcp_executions_total",
		Help: "Finished executions by kind (command, cell, run_python, install_package), language and status."},
		[]string{"kind", "language", "status"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "srtmcp_execution_duration_seconds",
		Help: "Wall time of finished executions.", Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}},
		[]string{"kind", "language"})
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "srtmcp_proxy_decisions_total",
		Help: "Network requests the sandboxes' proxy allowed or denied."}, []string{"decision"})
	m.output = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "srtmcp_output_bytes_total",
		Help: "Bytes of stdout and stderr the executions produced."}, []string{"stream"})
	m.proxied = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "srtmcp_proxy_bytes_total",
		Help: "Bytes the sandboxes' proxy carried to (out) and from (in) upstream servers."}, []string{"direction"})
	m.reg.MustRegister(m.execs, m.duration, m.decisions, m.output, m.proxied,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "srtmcp_executions_running", Help: "Executions running now."},
			func() float64 { return float64(s.mgr.Running()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "srtmcp_sessions_active", Help: "Open data and workspace sessions."},
			func() float64 {
				if s.data == nil {
					return 0
				}
				return float64(s.data.Sessions.Count())
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "srtmcp_warm_pool_ready", Help: "Sandboxes waiting in the warm pool."},
			func() float64 { return float64(s.pool.Ready()) }),
	)
	s.metrics = m
}

// observe records an execution when it ends.
func (s *Server) observe(kind, language string, e *executions.Execution) {
	if s.metrics == nil || e == nil {
		return
	}
	go func() {
		<-e.Done()
		sn := e.Snapshot(0)
		st := status(sn.State)
		s.metrics.execs.WithLabelValues(kind, language, st).Inc()
		if sn.End != nil {
			s.metrics.duration.WithLabelValues(kind, language).Observe(float64(sn.End.DurationMS) / 1000)
		}
		for _, ev := range sn.Events {
			switch {
			case ev.Type == runner.EventStdout || ev.Type == runner.EventStderr:
				s.metrics.output.WithLabelValues(ev.Type).Add(float64(len(ev.Data)))
			case ev.Violation != nil && ev.Violation.Kind == "network" && ev.Violation.Decision == "transfer":
				s.metrics.proxied.WithLabelValues("out").Add(float64(ev.Violation.BytesOut))
				s.metrics.proxied.WithLabelValues("in").Add(float64(ev.Violation.BytesIn))
			case ev.Violation != nil && ev.Violation.Kind == "network":
				s.metrics.decisions.WithLabelValues(ev.Violation.Decision).Inc()
			}
		}
	}()
}

// metricsHandler serves /metrics, behind a bearer token when one is set.
func (s *Server) metricsHandler(token string) http.Handler {
	h := promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
	if token == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		if subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="srt-mcp metrics"`)
			http.Error(w, "unauthorized: /metrics needs Authorization: Bearer <metrics token>", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// readiness caches the last probe for a few seconds: a real sandbox start
// costs tens of milliseconds.
type readiness struct {
	mu   sync.Mutex
	at   time.Time
	code int
	body map[string]any
}

// MinFreeBytes is the free space the state directory needs to be ready.
const MinFreeBytes = 256 << 20

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	rd := &s.ready
	rd.mu.Lock()
	if time.Since(rd.at) > 5*time.Second {
		rd.code, rd.body = s.probe(r.Context())
		rd.at = time.Now()
	}
	code, body := rd.code, rd.body
	rd.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// probe checks that a sandbox really starts (native: bubblewrap runs a
// command; docker: the engine answers and has the image) and that the
// state directory has room.
func (s *Server) probe(ctx context.Context) (int, map[string]any) {
	checks := map[string]any{}
	ok := true
	fail := func(name, why string) {
		ok = false
		checks[name] = map[string]any{"ok": false, "error": why}
	}
	pass := func(name string, detail any) { checks[name] = map[string]any{"ok": true, "detail": detail} }

	if s.data != nil && s.data.Backend != nil && s.data.Backend.Name() == "docker" {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		out, err := exec.CommandContext(cctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput()
		cancel()
		if err != nil {
			fail("docker", fmt.Sprintf("the Docker engine does not answer: %v %s", err, out))
		} else {
			pass("docker", string(out))
		}
	}
	// The native sandbox is used by command runs on every backend.
	p := s.cfg.Ceiling
	p.Limits.Timeout = 0
	spec := runner.Spec{Version: runner.SpecVersion, Argv: []string{"/bin/true"}, Cwd: runner.SandboxTmp, PrivateCwd: true, Policy: p, Stdin: runner.StdinNull}
	start := time.Now()
	e, err := s.mgr.Start("readyz", "readiness probe", spec)
	if err != nil {
		fail("sandbox", err.Error())
	} else {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		sn := e.Wait(cctx, 0, true)
		cancel()
		if sn.End == nil || sn.End.Type != runner.EventExit || sn.End.ExitCode != 0 {
			why := "no result in 10 s"
			if sn.End != nil {
				why = sn.End.Type + " " + sn.End.ErrCode + " " + sn.End.Message
			}
			fail("sandbox", "bubblewrap could not run /bin/true: "+why)
		} else {
			pass("sandbox", fmt.Sprintf("bubblewrap ran /bin/true in %d ms", time.Since(start).Milliseconds()))
		}
	}
	if s.data != nil {
		var st syscall.Statfs_t
		if err := syscall.Statfs(s.data.Sessions.StateDir(), &st); err != nil {
			fail("disk", err.Error())
		} else if free := int64(st.Bavail) * int64(st.Bsize); free < MinFreeBytes {
			fail("disk", fmt.Sprintf("%d MB free in the state directory, less than %d MB", free>>20, MinFreeBytes>>20))
		} else {
			pass("disk", fmt.Sprintf("%d MB free", free>>20))
		}
	}
	if ok {
		return http.StatusOK, map[string]any{"status": "ready", "checks": checks}
	}
	return http.StatusServiceUnavailable, map[string]any{"status": "not_ready", "checks": checks}
}
