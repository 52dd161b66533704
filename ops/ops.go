// Package ops serves srt-mcp's operations routes: Prometheus metrics
// (prometheus/client_golang), the readiness probe (a real sandbox start,
// the backend, the disk) and the liveness probe. Every door's runs are
// counted here through the run service's Observe hook.
package ops

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/srt-mcp/srt-mcp/service"
)

// Ops holds the metrics and probes of one server.
type Ops struct {
	reg       *prometheus.Registry
	execs     *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	decisions *prometheus.CounterVec
	output    *prometheus.CounterVec
	proxied   *prometheus.CounterVec
	svc       *service.Service

	mu          sync.Mutex // the readiness cache, and the runner pool's gauge
	at          time.Time
	ok          bool
	body        map[string]any
	runnersIdle func() int
	prestart    func() PrestartStats
}

// New makes the metrics; Bind connects them to the service once it exists
// (the service reports its runs to Observe from the start).
func New() *Ops {
	o := &Ops{reg: prometheus.NewRegistry()}
	o.execs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "srtmcp_executions_total",
		Help: "Finished executions by kind (command, cell, script, stateless, run_python, install_package, run_code, librechat, playground), language and status."},
		[]string{"kind", "language", "status"})
	o.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "srtmcp_execution_duration_seconds",
		Help: "Wall time of finished executions.", Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}},
		[]string{"kind", "language"})
	o.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "srtmcp_proxy_decisions_total",
		Help: "Network requests the sandboxes' proxy allowed or denied."}, []string{"decision"})
	o.output = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "srtmcp_output_bytes_total",
		Help: "Bytes of stdout and stderr the executions produced."}, []string{"stream"})
	o.proxied = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "srtmcp_proxy_bytes_total",
		Help: "Bytes the sandboxes' proxy carried to (out) and from (in) upstream servers."}, []string{"direction"})
	o.reg.MustRegister(o.execs, o.duration, o.decisions, o.output, o.proxied,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return o
}

// Bind adds the gauges read from the service.
func (o *Ops) Bind(svc *service.Service) {
	o.svc = svc
	o.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "srtmcp_executions_running", Help: "Executions callers started, running now (the server's own, as its readiness probe, aside)."},
			func() float64 { return float64(svc.Stats().Running) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "srtmcp_sessions_active", Help: "Open data and workspace sessions."},
			func() float64 { return float64(svc.Stats().Sessions) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "srtmcp_warm_pool_ready", Help: "Sandboxes waiting in the warm pool."},
			func() float64 { return float64(svc.Stats().WarmReady) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "srtmcp_retained_output_bytes", Help: "Bytes of output the finished and running executions hold (bounded by --retained-output)."},
			func() float64 { return float64(svc.Stats().RetainedBytes) }),
	)
}

// BindRunners adds the runner pool's gauge: runners waiting for an
// execution (also in /healthz as runners_idle).
func (o *Ops) BindRunners(idle func() int) {
	o.mu.Lock()
	o.runnersIdle = idle
	o.mu.Unlock()
	o.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "srtmcp_runners_idle", Help: "Runner processes waiting for an execution (--runner-pool)."},
		func() float64 { return float64(idle()) }))
}

// PrestartStats is how executions got their sandboxes (the runner pool's
// own count, field for field, with the Docker backend's session runs
// added in), and the Docker backend's part of it on its own.
type PrestartStats struct {
	Claimed, Cold, Unfit, Changed, Failed uint64
	BuildSeconds                          float64
	Builds                                uint64
	Ready                                 int
	// Docker: the server runs sessions on the Docker backend; its session
	// runs that claimed an exec stage started ahead, that started their
	// own, and the stages waiting.
	Docker                    bool
	DockerClaimed, DockerCold uint64
	DockerReady               int
}

// BindPrestart adds the pre-started sandboxes' metrics (also in /healthz
// under sandbox_pool): runs that claimed one and runs that started their
// own, by why, the sandboxes waiting, and the time they took to start.
func (o *Ops) BindPrestart(stats func() PrestartStats) {
	o.mu.Lock()
	o.prestart = stats
	o.mu.Unlock()
	starts := func(f func(PrestartStats) uint64) func() float64 {
		return func() float64 { return float64(f(stats())) }
	}
	help := "Sandbox starts of the runner pool's executions: claimed (a sandbox started ahead of the call), cold (none was waiting), and unfit, changed or failed (the waiting one was of another shape, changed while it waited, or could not start; discarded)."
	for _, k := range []struct {
		kind string
		f    func(PrestartStats) uint64
	}{
		{"claimed", func(s PrestartStats) uint64 { return s.Claimed }},
		{"cold", func(s PrestartStats) uint64 { return s.Cold }},
		{"unfit", func(s PrestartStats) uint64 { return s.Unfit }},
		{"changed", func(s PrestartStats) uint64 { return s.Changed }},
		{"failed", func(s PrestartStats) uint64 { return s.Failed }},
	} {
		o.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "srtmcp_sandbox_starts_total", Help: help,
			ConstLabels: prometheus.Labels{"kind": k.kind}}, starts(k.f)))
	}
	o.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "srtmcp_sandboxes_prestarted", Help: "Sandboxes started ahead of their calls, waiting (--sandbox-pool)."},
			func() float64 { return float64(stats().Ready) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "srtmcp_sandbox_prestart_seconds_total", Help: "Time the pre-started sandboxes used or discarded took to start (refill time; divide by srtmcp_sandbox_prestarts_total)."},
			func() float64 { return stats().BuildSeconds }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "srtmcp_sandbox_prestarts_total", Help: "Pre-started sandboxes used or discarded."},
			starts(func(s PrestartStats) uint64 { return s.Builds })),
	)
}

// Observe records an execution when it ends.
func (o *Ops) Observe(kind, language string, e *service.Execution) {
	go func() {
		<-e.Done()
		sn := e.Snapshot(0)
		o.execs.WithLabelValues(kind, language, sn.State.Status()).Inc()
		if sn.End != nil {
			o.duration.WithLabelValues(kind, language).Observe(float64(sn.End.DurationMS) / 1000)
		}
		for _, ev := range sn.Events {
			switch {
			case ev.Type == service.EventStdout || ev.Type == service.EventStderr:
				o.output.WithLabelValues(ev.Type).Add(float64(len(ev.Data)))
			case ev.Violation != nil && ev.Violation.Kind == "network" && ev.Violation.Decision == "transfer":
				o.proxied.WithLabelValues("out").Add(float64(ev.Violation.BytesOut))
				o.proxied.WithLabelValues("in").Add(float64(ev.Violation.BytesIn))
			case ev.Violation != nil && ev.Violation.Kind == "network":
				o.decisions.WithLabelValues(ev.Violation.Decision).Inc()
			}
		}
	}()
}

// Metrics serves /metrics (its route authenticates: the metrics token or
// any of the server's keys).
func (o *Ops) Metrics() http.Handler { return promhttp.HandlerFor(o.reg, promhttp.HandlerOpts{}) }

// MetricsAuth is /metrics' authentication: open when the server has no
// key at all; else the metrics token, or any key keyAuth accepts.
func MetricsAuth(metricsToken string, keyed bool, keyAuth func(http.ResponseWriter, *http.Request) (string, bool)) func(http.ResponseWriter, *http.Request) (string, bool) {
	return func(w http.ResponseWriter, r *http.Request) (string, bool) {
		if metricsToken == "" && !keyed {
			return "anonymous", true
		}
		got := r.Header.Get("Authorization")
		if metricsToken != "" && subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+metricsToken)) == 1 {
			return "metrics", true
		}
		if keyed {
			return keyAuth(w, r)
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="srt-mcp metrics"`)
		http.Error(w, "unauthorized: /metrics needs Authorization: Bearer <metrics token or API key>", http.StatusUnauthorized)
		return "", false
	}
}

// Readyz serves the readiness probe; a result is reused for 5 s (a real
// sandbox start costs tens of milliseconds).
func (o *Ops) Readyz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if st := o.svc.Stats(); st.Draining {
			// Shutting down: a load balancer stops sending new sessions
			// here at once; the open ones finish (see serve's --drain-timeout).
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "draining", "running_executions": st.Running})
			return
		}
		o.mu.Lock()
		if time.Since(o.at) > 5*time.Second {
			ok, checks := o.svc.Ready(r.Context())
			status := "ready"
			if !ok {
				status = "not_ready"
			}
			o.ok, o.body, o.at = ok, map[string]any{"status": status, "checks": checks}, time.Now()
		}
		ok, body := o.ok, o.body
		o.mu.Unlock()
		code := http.StatusOK
		if !ok {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, body)
	})
}

// Healthz serves the liveness probe: the process answers.
func (o *Ops) Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := o.svc.Stats()
		body := map[string]any{"status": "ok", "running_executions": st.Running, "warm_pool_ready": st.WarmReady, "workspace_fs": st.WorkspaceFS}
		o.mu.Lock()
		idle := o.runnersIdle
		o.mu.Unlock()
		if idle != nil {
			body["runners_idle"] = idle()
		}
		o.mu.Lock()
		prestart := o.prestart
		o.mu.Unlock()
		if prestart != nil {
			st := prestart()
			// Counts only: why a sandbox was discarded names a tenant's
			// host paths (its working directory, its mounts), and /healthz
			// answers anyone; the server logs it (runner.Pool.OnDiscard).
			pool := map[string]any{"ready": st.Ready, "claimed": st.Claimed, "cold": st.Cold, "unfit": st.Unfit, "changed": st.Changed, "failed": st.Failed}
			if st.Builds > 0 {
				pool["refill_ms_avg"] = float64(int(st.BuildSeconds/float64(st.Builds)*1e5)) / 100
			}
			if st.Docker {
				pool["docker"] = map[string]any{"ready": st.DockerReady, "claimed": st.DockerClaimed, "cold": st.DockerCold}
			}
			body["sandbox_pool"] = pool
		}
		writeJSON(w, http.StatusOK, body)
	})
}

// Ready runs the readiness checks once (doctor and tests).
func (o *Ops) Ready(ctx context.Context) (bool, map[string]service.Check) { return o.svc.Ready(ctx) }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
