// Package server is srt-mcp serve's wiring: from Options (every value
// serve's flags produce, already parsed and checked by the command) it
// builds the runner pool, the executions manager, the sessions registry,
// the backend (native or Docker), the run service and its doors, and
// serves them: MCP on stdio, or every door over HTTP on one mux behind
// the guard (routes). It owns the server's lifetime too: the drain on
// SIGTERM or SIGINT, the settings file's reloads, and the order in which
// everything stops.
//
// The command (cmd/srt-mcp) only turns flags into Options and calls Run.
// The light release binary, which embeds the full one and executes it for
// serve, must not link this package: only files built without the
// embedserver tag import it.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/srt-mcp/srt-mcp/apikeys"
	"github.com/srt-mcp/srt-mcp/backend"
	"github.com/srt-mcp/srt-mcp/dockerbox"
	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/executions"
	"github.com/srt-mcp/srt-mcp/guard"
	"github.com/srt-mcp/srt-mcp/librechat"
	"github.com/srt-mcp/srt-mcp/mcpserver"
	"github.com/srt-mcp/srt-mcp/ops"
	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/service"
	"github.com/srt-mcp/srt-mcp/sessions"
	"github.com/srt-mcp/srt-mcp/settings"
)

// Options is everything Run needs, as serve's flags give it (the flag each
// field comes from is in its comment). Zero values mean what the service's
// and the guard's own defaults say, except where a field says otherwise.
type Options struct {
	Logger  *slog.Logger // nil: slog.Default()
	Version string       // reported to MCP clients
	// Tools are the MCP tools offered (mcpserver.ParseTools; nil: all);
	// ReplyChars bounds the output one tool reply carries (0: 40,000).
	Tools      map[string]bool
	ReplyChars int

	// The sandboxes.

	// Ceiling is the most any run may get (the serve profile, --settings,
	// --config's "network" and "filesystem", the flags).
	Ceiling policy.Policy
	// DefaultTimeout applies to a run that sets none (--timeout); it is
	// capped at the ceiling's timeout.
	DefaultTimeout time.Duration
	// Home expands "~" in policies (the server's home directory).
	Home string
	// RunnerBinary is the binary the runners are (SRT_MCP_RUNNER_BIN: the
	// light binary that executed this one); "": this binary.
	RunnerBinary string
	// StageBinary runs inside the sandboxes (SRT_MCP_STAGE_BIN); "": the
	// runners' own binary.
	StageBinary string
	// RunnerPool is how many runners are kept started ahead of need
	// (--runner-pool).
	RunnerPool int
	// SandboxPool is how many sandboxes are kept started ahead of their
	// calls while idle (--sandbox-pool; 0: none, each run starts its own).
	SandboxPool int
	// SandboxPoolCPU is the machine's CPU use (percent) above which no
	// sandbox is started ahead (--sandbox-pool-cpu; 100: always).
	SandboxPoolCPU float64
	// SandboxUser is the host user a root server's sandboxes run as
	// (--sandbox-user); nil: the runner's default.
	SandboxUser *runner.SandboxUser
	// Backend is where data sessions run: "native" (or "") or "docker"
	// (--backend), with Docker's settings.
	Backend string
	Docker  Docker
	Python  string // --python
	Node    string // --node

	// Executions and sessions.

	MaxConcurrent  int           // --max-concurrent
	MaxPerSession  int           // --max-per-session
	Retention      time.Duration // --retention
	RetainedOutput int64         // --retained-output, in bytes
	// PrincipalShare is the part of each server-wide cap one principal may
	// take, in (0, 1] (--principal-share, "auto" already resolved).
	PrincipalShare float64
	// Replica names this server among replicas (--replica-id); "": none.
	Replica              string
	StateDir             string        // --state-dir, the default already resolved
	DataSessionTTL       time.Duration // --data-session-ttl-minutes
	MaxSessions          int           // --max-sessions
	MaxSessionsPerCaller int           // --max-sessions-per-caller
	WorkspaceQuota       int64         // --workspace-quota in bytes; negative: none
	SnapshotTTL          time.Duration // --snapshot-ttl
	PersistDir           string        // --persist-dir ("": <state>/persistent)
	PersistTTL           time.Duration // --persist-ttl
	MaxPersist           int           // --max-persistent
	MaxPersistPerCaller  int           // --max-persistent-per-caller
	SnapshotBudget       int64         // --snapshot-budget (bytes per principal)
	// WorkspaceDirs keeps workspaces as directories whose quota a watch
	// enforces, even where a root server could give each a filesystem of
	// its own (--workspace-fs dir).
	WorkspaceDirs           bool
	ExecTimeout             time.Duration // --exec-timeout-seconds
	MaxOutputBytes          int64         // --max-output-bytes
	MaxCodeBytes            int           // --max-code-bytes
	MaxUploadBytes          int64         // --max-upload-bytes
	MaxArtifactRead         int64         // --max-artifact-read-bytes
	PipIndex                string        // --pip-index-url
	WarmPool                int           // --warm-pool
	MaxMCPSessions          int           // --max-mcp-sessions
	MaxMCPSessionsPerCaller int           // --max-mcp-sessions-per-caller

	// Downloads.

	// SignDownloads gives the tools signed download URLs: always over
	// HTTP, on stdio only when --public-base-url is set.
	SignDownloads bool
	// PublicBaseURL is the download URLs' base (--public-base-url); "":
	// http://Host:Port.
	PublicBaseURL string
	// FileSecret signs them (--file-secret); "": one generated and kept
	// in StateDir.
	FileSecret  string
	DownloadTTL time.Duration // --download-ttl

	// Serving.

	// Stdio serves MCP on stdin and stdout instead of HTTP (--stdio).
	Stdio bool
	// Host and Port are the HTTP listener's address (--host and --port,
	// or --addr).
	Host string
	Port int
	// Token is the bearer token /mcp and the playground's API need
	// (--token); "" disables it (the command allows that on loopback
	// binds or with --insecure-no-auth).
	Token string
	// Keys are named API keys (--token-file), each a principal of its
	// own; accepted besides Token. Nil: none.
	Keys *apikeys.Keys
	// AllowedOrigins are browser origins allowed besides loopback ones and
	// the server's own (--allowed-origin); a request without an Origin
	// (not from a browser) is allowed.
	AllowedOrigins []string
	// AllowedHosts are Host names answered besides IP literals and
	// localhost, a guard against DNS rebinding (--allowed-host and
	// --public-base-url's host).
	AllowedHosts []string
	MaxBody      int64   // request body cap (--max-body; 0: 4 MiB)
	RateLimit    float64 // requests per second per caller (--rate-limit; 0: 50, burst 100)
	// MCPSessionTTL closes idle MCP sessions (--session-ttl, its default
	// already resolved).
	MCPSessionTTL time.Duration
	// MetricsToken is a bearer token /metrics accepts (--metrics-token);
	// with API keys configured, /metrics accepts those too, and needs one
	// of them.
	MetricsToken string
	// LibreChat is the LibreChat Code API (mounted under its Prefix); nil
	// or an empty Prefix: not served.
	LibreChat *librechat.Config
	// HTTPIdleTimeout closes idle keep-alive connections
	// (--http-idle-timeout).
	HTTPIdleTimeout time.Duration
	// MaxConnectionsPerAddress bounds the connections one client address
	// holds open (--max-connections-per-address).
	MaxConnectionsPerAddress int
	// DrainTimeout is how long running executions get to finish after
	// SIGTERM or SIGINT (--drain-timeout).
	DrainTimeout time.Duration

	// Settings is the settings file (--config) whose changes reload the
	// ceiling; nil: none.
	Settings *Settings
}

// Docker configures the Docker backend (Options.Backend "docker").
type Docker struct {
	Image  string  // --image
	Memory int64   // per session container (--container-memory or SANDBOX_MEMORY_LIMIT)
	CPUs   float64 // per session container (--cpu-limit), above 0
	// CleanupInterval is how often the containers of dead servers are
	// removed (--cleanup-interval-minutes); 0: at start only.
	CleanupInterval time.Duration
}

// Settings is a settings file the server watches: each new reading's
// ceiling (computed by Ceiling, the way a start with it would) goes to the
// service; a reading that fails is logged and refused (settings.Watch).
type Settings struct {
	// File is the reading the server started with.
	File *settings.File
	// Keys are the names the file may use (serve's flags).
	Keys []string
	// Ceiling computes the ceiling a start with a new reading would make
	// (the command's flags, as given, with it).
	Ceiling func(*settings.File) (policy.Policy, error)
}

// The event streams (GET /mcp/events) the server holds, in all and per
// caller.
const (
	maxEventStreams          = 256
	maxEventStreamsPerCaller = 32
)

// check refuses Options that Run cannot serve (the command reports the
// flags' own usage errors before).
func (o *Options) check() error {
	switch o.Backend {
	case "", "native":
	case "docker":
		if o.Docker.CPUs <= 0 {
			return errors.New("--cpu-limit must be positive")
		}
	default:
		return fmt.Errorf("--backend %q: use native or docker", o.Backend)
	}
	if o.StateDir == "" {
		return errors.New("no state directory")
	}
	if s := o.Settings; s != nil && (s.File == nil || s.Ceiling == nil) {
		return errors.New("a settings file needs its reading and a Ceiling")
	}
	if o.PrincipalShare < 0 || o.PrincipalShare > 1 {
		return fmt.Errorf("principal share %v: want a fraction above 0 and at most 1", o.PrincipalShare)
	}
	return nil
}

// Run builds the server from o and serves until ctx ends, or until the
// drain that a SIGTERM or SIGINT starts is over (see drainOnSignal); then
// it stops everything, in order, and returns. Its errors are the server's
// (the state directory, the Docker engine, the listener), each a sentence
// for the operator.
func Run(ctx context.Context, o Options) error {
	if err := o.check(); err != nil {
		return err
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	def := o.DefaultTimeout
	if max := o.Ceiling.Limits.Timeout.Std(); max > 0 && def > max {
		def = max
	}
	// The runners' private cache (the sandbox's /etc mirror), found here
	// where the environment is: runners get none of it.
	cacheDir, err := runner.CacheRoot("")
	if err != nil {
		logger.Warn("no private cache directory: every run binds /etc entry by entry (slower)", "error", err)
	}
	// Runners started ahead of need: an execution does not wait for one
	// to start (see runner.Pool).
	pool := runner.NewPool(o.RunnerBinary, o.StageBinary, o.RunnerPool)
	defer pool.Close()
	// And sandboxes started ahead of their calls: each runner starts one
	// for the next run of the shape it just ran (see runner/prestart.go).
	pool.Prestart(o.SandboxPool)
	if o.SandboxPoolCPU > 0 {
		pool.PrestartBusyLimit(o.SandboxPoolCPU)
	}
	pool.OnDiscard(func(result, reason string) {
		level := slog.LevelInfo // changed while it waited
		if result == runner.PrestartFailed {
			level = slog.LevelDebug // its shape cannot be pre-started
		}
		logger.Log(context.Background(), level, "a pre-started sandbox was not used; the run started its own", "result", result, "reason", reason)
	})
	mgr := executions.NewManager(executions.Config{
		MaxConcurrent:    o.MaxConcurrent,
		MaxPerOwner:      o.MaxPerSession,
		MaxPerPrincipal:  service.ShareOf(o.MaxConcurrent, o.PrincipalShare),
		Retention:        o.Retention,
		MaxRetainedBytes: o.RetainedOutput,
		// One principal's output frees its own results first, never
		// another's (past its share of the budget).
		MaxRetainedPerPrincipal: bytesShare(o.RetainedOutput, o.PrincipalShare),
		Replica:                 o.Replica,
	})
	// Every run starts on the backend: bubblewrap sandboxes from the
	// runner pool as the sandbox user (a session's own uid, when it has
	// one, instead), or a session's container with the Docker backend.
	native := &backend.Native{Pool: pool, User: o.SandboxUser, CacheDir: cacheDir}
	scfg := sessions.Config{
		StateDir: o.StateDir, TTL: o.DataSessionTTL, Max: o.MaxSessions,
		MaxPerPrincipal: service.ShareOf(o.MaxSessions, o.PrincipalShare), Replica: o.Replica,
		PersistDir: o.PersistDir, PersistTTL: o.PersistTTL, MaxPersist: o.MaxPersist, MaxPersistPerPrincipal: o.MaxPersistPerCaller,
	}
	docker := o.Backend == "docker"
	if os.Geteuid() == 0 {
		if docker {
			scfg.UIDs = &sessions.DefaultUIDs // each session's container runs as its own uid
		} else {
			// Each session of a root server has its own host uid: its
			// sandboxes run as it, it owns the session's files, and its
			// bubblewrap reaches the workspace by path.
			scfg.UIDs, scfg.Reach = &sessions.DefaultUIDs, true
		}
	}
	if o.WorkspaceQuota > 0 && !o.WorkspaceDirs {
		scfg.VolumeBytes = o.WorkspaceQuota
	}
	reg, err := sessions.New(scfg)
	if err != nil {
		return fmt.Errorf("state directory %s: %v", o.StateDir, err)
	}
	defer reg.Shutdown()
	// The CA and every masked credential must be there before the server
	// serves: an unset variable is an error naming it now, not a run's
	// error later. A reload that lacks one is refused the same way.
	caDir := filepath.Join(o.StateDir, "egress-ca")
	checkEgress := func(p policy.Policy) error {
		_, err := runner.NewEgressMaterial(p, caDir, os.LookupEnv, o.Home)
		return err
	}
	if err := checkEgress(o.Ceiling); err != nil {
		return fmt.Errorf("settings: %v", errs.Of(err).Detail())
	}
	if s := o.Settings; s != nil {
		read := s.Ceiling
		s.Ceiling = func(f *settings.File) (policy.Policy, error) {
			p, err := read(f)
			if err == nil {
				err = checkEgress(p)
			}
			return p, err
		}
	}
	// Volumes first: the Docker backend then leaves the workspaces
	// directory as it is (a nosuid bind over it would hide them).
	reg.StartVolumes()
	if ok, note := reg.VolumeStatus(); note != "" {
		switch {
		case ok || os.Geteuid() != 0:
			logger.Info("workspaces", "bound", note) // a server without root has directories: expected
		case scfg.VolumeBytes > 0:
			logger.Warn("workspaces", "bound", note)
		}
	}
	var runOn backend.Backend = native
	var dockerStats func() dockerbox.PrestartStats
	if docker {
		execStage := o.StageBinary
		if execStage == "" {
			execStage = o.RunnerBinary
		}
		db, err := dockerBackend(o.Docker, o.StateDir, reg.PersistDir(), reg.Instance(), execStage, o.Ceiling.Limits.MaxFileSizeBytes, native, pool.PrestartNow, logger)
		if err != nil {
			return err
		}
		defer db.Close()
		reg.OnHeld(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if n, err := db.CleanupForeign(ctx); n > 0 || err != nil {
				logger.Info("removed containers of other state directories' servers that are gone", "containers", n, "error", err)
			}
		})
		defer db.RemoveAll(context.Background())
		runOn, dockerStats = db, db.Stats
	}
	if n := reg.AwaitLeftMounted(10 * time.Second); n > 0 {
		logger.Warn("persistent workspaces a dead server had mounted are still held by its processes; resuming them fails with session_busy until they let go", "workspaces", n)
	}
	// What dead servers left: their containers are gone by now (the
	// writers stopped), so their workspaces go, in the background: no
	// leftover (a deep tree, a huge one) holds this start-up.
	go func() {
		n, err := reg.RemoveLeftovers()
		if n > 0 || err != nil {
			logger.Info("removed the workspaces a previous server left behind", "state_dir", o.StateDir, "sessions", n, "error", err)
		}
	}()
	secret, err := service.LoadOrCreateSecret(o.FileSecret, o.StateDir)
	if err != nil {
		return fmt.Errorf("file-signing secret: %v", err)
	}
	var signer *service.Signer
	if o.SignDownloads {
		baseURL := o.PublicBaseURL
		if baseURL == "" {
			baseURL = "http://" + net.JoinHostPort(o.Host, strconv.Itoa(o.Port))
		}
		signer = &service.Signer{Secret: secret, BaseURL: baseURL, TTL: o.DownloadTTL}
	}
	metrics := ops.New()
	metrics.BindRunners(pool.Idle)
	metrics.BindPrestart(func() ops.PrestartStats {
		p := pool.Stats()
		st := ops.PrestartStats{Claimed: p.Claimed, Cold: p.Cold, Unfit: p.Unfit, Changed: p.Changed, Failed: p.Failed,
			BuildSeconds: p.BuildSeconds, Builds: p.Builds, Ready: p.Ready}
		if dockerStats != nil {
			// Session runs on the Docker backend: a stage started ahead
			// of them, or their own.
			d := dockerStats()
			st.Claimed, st.Cold, st.Ready = st.Claimed+d.Claimed, st.Cold+d.Cold, st.Ready+d.Ready
			st.Builds, st.BuildSeconds = st.Builds+d.Builds, st.BuildSeconds+d.BuildSeconds
			st.Docker, st.DockerClaimed, st.DockerCold, st.DockerReady = true, d.Claimed, d.Cold, d.Ready
		}
		return st
	})
	svc := service.New(service.Config{
		Ceiling: o.Ceiling, DefaultTimeout: def, Home: o.Home, Logger: logger, Hide: []string{o.StateDir, reg.PersistDir()},
		EgressCADir: caDir,
		Sessions:    reg, Backend: runOn, Python: o.Python, Node: o.Node,
		ExecTimeout: o.ExecTimeout, MaxOutputBytes: o.MaxOutputBytes,
		MaxCodeBytes: o.MaxCodeBytes, MaxUploadBytes: o.MaxUploadBytes, MaxArtifactRead: o.MaxArtifactRead,
		WorkspaceQuota: o.WorkspaceQuota, MaxSessionsPerCaller: o.MaxSessionsPerCaller,
		SnapshotTTL: o.SnapshotTTL, SnapshotBudget: o.SnapshotBudget,
		PipIndex: o.PipIndex, WarmPool: o.WarmPool, Files: signer, Observe: metrics.Observe,
		PrincipalShare: o.PrincipalShare,
		Holds: map[string]service.HoldLimit{
			service.HoldMCPSession: {What: "MCP sessions", Global: o.MaxMCPSessions, PerCaller: o.MaxMCPSessionsPerCaller,
				GlobalFlag: "--max-mcp-sessions", CallerFlag: "--max-mcp-sessions-per-caller",
				Close: "close one (DELETE /mcp with its Mcp-Session-Id, or end its SSE stream) or reuse it; idle ones close after --session-ttl"},
			service.HoldEventStream: {What: "event streams", Global: maxEventStreams, PerCaller: maxEventStreamsPerCaller,
				GlobalFlag: "256 at most", CallerFlag: "32 per caller", Close: "close one first"},
		},
	}, mgr)
	metrics.Bind(svc)
	// Sandboxes started ahead of their calls follow the ceiling: a reload
	// drains them (rule 13).
	svc.WatchCeiling(func(policy.Policy) { pool.Drain() })
	defer svc.Shutdown() // before the registry's: the warm pool stops filling first
	srv := mcpserver.New(mcpserver.Config{Logger: logger, Version: o.Version, Tools: o.Tools, ReplyChars: o.ReplyChars}, svc)
	ctx, stop := drainOnSignal(ctx, logger, svc, o.DrainTimeout, pool.Close)
	defer stop()
	if s := o.Settings; s != nil {
		if err := settings.Watch(ctx, s.File, s.Keys, logger, s.Ceiling, svc.SetCeiling); err != nil {
			logger.Warn("settings file: cannot watch it for changes; restart to apply them", "path", s.File.Path, "error", err)
		}
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), runner.DefaultGrace+3*time.Second)
		mgr.Shutdown(sctx)
		cancel()
	}()

	if o.Stdio {
		err := srv.ServeStdio(ctx, os.Stdin, os.Stdout)
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			return fmt.Errorf("stdio: %v", err)
		}
		return nil
	}

	handler := routes(&o, svc, srv, metrics)
	addr := net.JoinHostPort(o.Host, strconv.Itoa(o.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %v", addr, err)
	}
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: o.HTTPIdleTimeout}
	ln = guard.Listener(ln, o.MaxConnectionsPerAddress, maxConnections())
	logger.Info("srt-mcp serving MCP", "url", "http://"+ln.Addr().String()+"/mcp", "auth", o.Token != "" || o.Keys != nil,
		"api_keys", o.Keys.Len(), "mcp_session_ttl", o.MCPSessionTTL.String())
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		srv.CloseStreams(sctx)
		_ = hs.Shutdown(sctx)
		cancel()
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// bytesShare is fraction of n bytes, rounded up (service.ShareOf for a
// budget in bytes); all of it when fraction is 0 or 1.
func bytesShare(n int64, fraction float64) int64 {
	if fraction <= 0 || fraction >= 1 || n <= 0 {
		return n
	}
	return max(1, int64(math.Ceil(float64(n)*fraction)))
}

// maxConnections bounds the connections the listener holds in all: three
// quarters of the descriptors the process may open, so that sandboxes,
// workspaces and the state directory always have some.
func maxConnections() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 0
	}
	return int(max(64, rl.Cur*3/4))
}

// drainOnSignal returns a context that ends when the server should stop
// serving: when parent ends, or after a drain. The first SIGTERM or SIGINT
// starts a drain: the sessions registry creates no session any more
// (/readyz answers 503, initialize and new sessions get server_draining),
// running executions get up to timeout to finish while their sessions
// keep being served, and a second later (for the last results to be
// fetched; at once when none was running) the context ends. The server's
// own background work is cancelled, and so is what it keeps ahead of need
// (stopAhead: the runner pool, with the sandboxes started ahead): the
// drain's last runs start their own. A second signal ends it at once.
func drainOnSignal(parent context.Context, logger *slog.Logger, svc *service.Service, timeout time.Duration, stopAhead func()) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		defer cancel()
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		svc.Sessions().Drain()
		running := svc.CallersRunning()
		svc.StopBackground()
		// In the background: its wait for the runners it ends must not
		// hold the drain's clock or a second signal.
		go stopAhead()
		mgr := svc.Manager()
		logger.Info("draining: no new sessions; waiting for running executions", "running", running, "drain_timeout", timeout.String())
		deadline := time.NewTimer(timeout)
		defer deadline.Stop()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for mgr.Running() > 0 {
			select {
			case <-sigs:
				logger.Warn("second signal: stopping now", "running", mgr.Running())
				return
			case <-deadline.C:
				logger.Warn("drain timeout: stopping the executions still running", "running", mgr.Running())
				return
			case <-tick.C:
			}
		}
		logger.Info("drained: every execution finished")
		if running == 0 {
			return // no result a drain let finish waits to be fetched
		}
		select {
		case <-sigs:
		case <-deadline.C:
		case <-time.After(time.Second):
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel()
	}
}
