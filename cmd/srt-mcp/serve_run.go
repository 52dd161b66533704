//go:build !embedserver

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/srt-mcp/srt-mcp/apikeys"
	"github.com/srt-mcp/srt-mcp/backend"
	"github.com/srt-mcp/srt-mcp/executions"
	"github.com/srt-mcp/srt-mcp/guard"
	"github.com/srt-mcp/srt-mcp/librechat"
	"github.com/srt-mcp/srt-mcp/mcpserver"
	"github.com/srt-mcp/srt-mcp/ops"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/service"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// This file is the MCP server itself. The release build (make build)
// compiles it into a separate binary embedded in a light srt-mcp, so that
// the sandbox's hot paths (srt-mcp exec, the per-execution runner, the
// in-sandbox exec stage) do not pay the MCP library's start-up cost; see
// serve_embedded.go. A plain go build runs it in-process.

// stageBinary is the binary for the inside of sandboxes: the stage binary
// when there is one, else the runners' own.
func stageBinary() string {
	if s := os.Getenv(stageBinaryEnv); s != "" {
		return s
	}
	return os.Getenv(runnerBinaryEnv)
}

func runServe(c *cli.Context) error {
	var cf *configFile
	if path := c.String("config"); path != "" {
		abs, err := filepath.Abs(path)
		if err == nil {
			cf, err = readConfig(abs, c.Command.Flags)
		}
		if err == nil {
			err = cf.apply(c)
		}
		if err != nil {
			return cli.Exit("--config: "+err.Error(), exitUsage)
		}
	}
	ceiling, err := serveCeiling(c, cf)
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	logger, err := newLogger(c)
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	if a := c.String("addr"); a != "" {
		h, p, err := net.SplitHostPort(a)
		if err != nil {
			return cli.Exit(fmt.Sprintf("--addr (MCP_HTTP_ADDR) %q: want HOST:PORT or :PORT", a), exitUsage)
		}
		if h == "" {
			h = "0.0.0.0"
		}
		err = c.Set("host", h)
		if err == nil {
			err = c.Set("port", p)
		}
		if err != nil { // (a shadowed err once dropped these)
			return cli.Exit(fmt.Sprintf("--addr %q: %v", a, err), exitUsage)
		}
	}
	// Usage errors before anything is created.
	host, token := c.String("host"), c.String("token")
	var lcCfg *librechat.Config
	var maxBody int64
	sessionTTL, err := mcpSessionTTL(c, ceiling.Limits.Timeout.Std())
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	quota, err := parseQuota(c.String("workspace-quota"))
	if err != nil {
		return cli.Exit("--workspace-quota (SANDBOX_WORKSPACE_QUOTA): "+err.Error(), exitUsage)
	}
	replica := c.String("replica-id")
	if replica != "" && !replicaName.MatchString(replica) {
		return cli.Exit(fmt.Sprintf("--replica-id (SANDBOX_REPLICA_ID) %q: use 1 to 32 lower-case letters, digits and '-' (not first or last), e.g. srt-0", replica), exitUsage)
	}
	var keys *apikeys.Keys
	if f := c.Path("token-file"); f != "" {
		if keys, err = apikeys.Load(f); err != nil {
			return cli.Exit("--token-file (SANDBOX_TOKEN_FILE): "+err.Error(), exitUsage)
		}
	}
	if !c.Bool("stdio") {
		if token == "" && keys == nil && !isLoopback(host) && !c.Bool("insecure-no-auth") {
			return cli.Exit(fmt.Sprintf("refusing to serve on %s without authentication: set --token (or SANDBOX_AUTH_TOKEN) or --token-file, or pass --insecure-no-auth", host), exitUsage)
		}
		if maxBody, err = parseSize(c.String("max-body")); err != nil {
			return cli.Exit("--max-body: "+err.Error(), exitUsage)
		}
		if lcCfg, err = libreChatConfig(c, host); err != nil {
			return cli.Exit(err.Error(), exitUsage)
		}
	}
	home, _ := os.UserHomeDir()
	def := time.Duration(c.Float64("timeout") * float64(time.Second))
	if max := ceiling.Limits.Timeout.Std(); max > 0 && def > max {
		def = max
	}
	runnerBin := os.Getenv(runnerBinaryEnv)
	user, err := sandboxUser(c)
	if err != nil {
		return err
	}
	// The runners' private cache (the sandbox's /etc mirror), found here
	// where the environment is: runners get none of it.
	cacheDir, err := runner.CacheRoot("")
	if err != nil {
		logger.Warn("no private cache directory: every run binds /etc entry by entry (slower)", "error", err)
	}
	retained, err := parseSize(c.String("retained-output"))
	if err != nil {
		return cli.Exit("--retained-output: "+err.Error(), exitUsage)
	}
	// Runners started ahead of need: an execution does not wait for one
	// to start (see runner.Pool).
	pool := runner.NewPool(runnerBin, os.Getenv(stageBinaryEnv), c.Int("runner-pool"))
	defer pool.Close()
	share, err := principalShare(c.String("principal-share"), keys)
	if err != nil {
		return cli.Exit("--principal-share (SANDBOX_PRINCIPAL_SHARE): "+err.Error(), exitUsage)
	}
	mgr := executions.NewManager(executions.Config{
		MaxConcurrent:    c.Int("max-concurrent"),
		MaxPerOwner:      c.Int("max-per-session"),
		MaxPerPrincipal:  service.ShareOf(c.Int("max-concurrent"), share),
		Retention:        c.Duration("retention"),
		MaxRetainedBytes: retained,
		Replica:          replica,
	})
	// Every run starts on the backend: bubblewrap sandboxes from the
	// runner pool as the sandbox user (a session's own uid, when it has
	// one, instead), or a session's container with the Docker backend.
	native := &backend.Native{Pool: pool, User: user, CacheDir: cacheDir}
	stateDir := c.String("state-dir")
	if stateDir == "" {
		stateDir = defaultStateDir(home)
	}
	scfg := sessions.Config{
		StateDir: stateDir, TTL: time.Duration(c.Float64("data-session-ttl-minutes") * float64(time.Minute)), Max: c.Int("max-sessions"),
		MaxPerPrincipal: service.ShareOf(c.Int("max-sessions"), share), Replica: replica,
	}
	backendName := c.String("backend")
	switch backendName {
	case "native":
		if os.Geteuid() == 0 {
			// Each session of a root server has its own host uid: its
			// sandboxes run as it, it owns the session's files, and its
			// bubblewrap reaches the workspace by path.
			scfg.UIDs, scfg.Reach = &sessions.DefaultUIDs, true
		}
	case "docker":
		if os.Geteuid() == 0 {
			scfg.UIDs = &sessions.DefaultUIDs // each session's container runs as its own uid
		}
	default:
		return cli.Exit(fmt.Sprintf("--backend %q: use native or docker", backendName), exitUsage)
	}
	sessions, err := sessions.New(scfg)
	if err != nil {
		return cli.Exit(fmt.Sprintf("state directory %s: %v", stateDir, err), 1)
	}
	defer sessions.Shutdown()
	var runOn backend.Backend = native
	if backendName == "docker" {
		db, err := dockerBackend(c, stateDir, sessions.Instance(), stageBinary(), ceiling.Limits.MaxFileSizeBytes, native, logger)
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		defer db.Close()
		defer db.RemoveAll(context.Background())
		runOn = db
	}
	// What dead servers left: their containers are gone by now (the
	// writers stopped), so their workspaces go, in the background: no
	// leftover (a deep tree, a huge one) holds this start-up.
	go func() {
		n, err := sessions.RemoveLeftovers()
		if n > 0 || err != nil {
			logger.Info("removed the workspaces a previous server left behind", "state_dir", stateDir, "sessions", n, "error", err)
		}
	}()
	secret, err := service.LoadOrCreateSecret(c.String("file-secret"), stateDir)
	if err != nil {
		return cli.Exit("file-signing secret: "+err.Error(), 1)
	}
	baseURL := c.String("public-base-url")
	if baseURL == "" {
		baseURL = fmt.Sprintf("http://%s", net.JoinHostPort(c.String("host"), fmt.Sprint(c.Int("port"))))
	}
	var signer *service.Signer
	if !c.Bool("stdio") || c.IsSet("public-base-url") {
		signer = &service.Signer{Secret: secret, BaseURL: baseURL, TTL: c.Duration("download-ttl")}
	}
	metrics := ops.New()
	metrics.BindRunners(pool.Idle)
	svc := service.New(service.Config{
		Ceiling: ceiling, DefaultTimeout: def, Home: home, Logger: logger, Hide: []string{stateDir},
		Sessions: sessions, Backend: runOn, Python: c.String("python"), Node: c.String("node"),
		ExecTimeout: time.Duration(c.Int("exec-timeout-seconds")) * time.Second, MaxOutputBytes: c.Int64("max-output-bytes"),
		MaxCodeBytes: c.Int("max-code-bytes"), MaxUploadBytes: c.Int64("max-upload-bytes"), MaxArtifactRead: c.Int64("max-artifact-read-bytes"),
		WorkspaceQuota: quota, MaxSessionsPerCaller: c.Int("max-sessions-per-caller"),
		PipIndex: c.String("pip-index-url"), WarmPool: c.Int("warm-pool"), Files: signer, Observe: metrics.Observe,
		PrincipalShare: share,
		Holds: map[string]service.HoldLimit{
			service.HoldMCPSession: {What: "MCP sessions", Global: c.Int("max-mcp-sessions"), PerCaller: c.Int("max-mcp-sessions-per-caller"),
				GlobalFlag: "--max-mcp-sessions", CallerFlag: "--max-mcp-sessions-per-caller",
				Close: "close one (DELETE /mcp with its Mcp-Session-Id, or end its SSE stream) or reuse it; idle ones close after --session-ttl"},
			service.HoldEventStream: {What: "event streams", Global: maxEventStreams, PerCaller: maxEventStreamsPerCaller,
				GlobalFlag: "256 at most", CallerFlag: "32 per caller", Close: "close one first"},
		},
	}, mgr)
	metrics.Bind(svc)
	defer svc.Shutdown() // before the registry's: the warm pool stops filling first
	srv := mcpserver.New(mcpserver.Config{Logger: logger, Version: version}, svc)
	ctx, stop := drainOnSignal(logger, svc, c.Duration("drain-timeout"))
	defer stop()
	if cf != nil {
		if err := watchConfig(ctx, cf, c.Command.Flags, logger, svc.SetCeiling); err != nil {
			logger.Warn("settings file: cannot watch it for changes; restart to apply them", "path", cf.path, "error", err)
		}
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), runner.DefaultGrace+3*time.Second)
		mgr.Shutdown(sctx)
		cancel()
	}()

	if c.Bool("stdio") {
		err := srv.ServeStdio(ctx, os.Stdin, os.Stdout)
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			return cli.Exit("stdio: "+err.Error(), 1)
		}
		return nil
	}

	handler := httpRoutes(httpConfig{
		Token: token, Keys: keys, Replica: replica, AllowedOrigins: c.StringSlice("allowed-origin"), AllowedHosts: allowedHosts(c), MaxBody: maxBody,
		RateLimit: c.Float64("rate-limit"), SessionTTL: sessionTTL, MetricsToken: c.String("metrics-token"), LibreChat: lcCfg,
	}, svc, srv, metrics)
	addr := net.JoinHostPort(host, fmt.Sprint(c.Int("port")))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return cli.Exit(fmt.Sprintf("listen on %s: %v", addr, err), 1)
	}
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: c.Duration("http-idle-timeout")}
	ln = guard.Listener(ln, c.Int("max-connections-per-address"), maxConnections())
	logger.Info("srt-mcp serving MCP", "url", "http://"+ln.Addr().String()+"/mcp", "auth", token != "" || keys != nil, "api_keys", keys.Len(), "mcp_session_ttl", sessionTTL.String())
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		srv.CloseStreams(sctx)
		_ = hs.Shutdown(sctx)
		cancel()
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return cli.Exit(err.Error(), 1)
	}
	return nil
}

// The event streams (GET /mcp/events) the server holds, in all and per
// caller.
const (
	maxEventStreams          = 256
	maxEventStreamsPerCaller = 32
)

// principalShare reads --principal-share: a fraction in (0, 1], or "auto"
// (half when API keys name several principals, else all).
func principalShare(v string, keys *apikeys.Keys) (float64, error) {
	if v == "" || v == "auto" {
		if keys.Len() > 0 {
			return 0.5, nil
		}
		return 1, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || f > 1 {
		return 0, fmt.Errorf("%q: want a fraction above 0 and at most 1 (0.5: no key takes more than half of each cap), or auto", v)
	}
	return f, nil
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

// replicaName is what --replica-id may be (sessions.ReplicaPattern).
var replicaName = regexp.MustCompile(`^` + sessions.ReplicaPattern + `$`)

// mcpSessionTTL is --session-ttl: by default 30 minutes, or the longest
// call (--max-timeout) plus 5 minutes when that is longer, so that no
// session idles out in the middle of a call; set shorter than that, it is
// a usage error.
func mcpSessionTTL(c *cli.Context, maxCall time.Duration) (time.Duration, error) {
	need := maxCall + 5*time.Minute
	if !c.IsSet("session-ttl") {
		return max(30*time.Minute, need), nil
	}
	ttl := c.Duration("session-ttl")
	if maxCall > 0 && ttl < need {
		return 0, fmt.Errorf("--session-ttl (SANDBOX_MCP_SESSION_TTL) %s is shorter than the longest call (--max-timeout %s) plus 5 minutes: a session could expire in the middle of a call; set it to at least %s, or lower --max-timeout", ttl, maxCall, need)
	}
	return ttl, nil
}

// parseQuota reads --workspace-quota: a size, or 0 / none for no quota.
func parseQuota(v string) (int64, error) {
	if v == "0" || strings.EqualFold(v, "none") {
		return -1, nil
	}
	n, err := parseSize(v)
	if err == nil && n <= 0 {
		err = fmt.Errorf("%q: want a size such as 1G, or none", v)
	}
	return n, err
}

// allowedHosts are --allowed-host's names plus --public-base-url's host
// (download links point there).
func allowedHosts(c *cli.Context) []string {
	hosts := c.StringSlice("allowed-host")
	if u, err := url.Parse(c.String("public-base-url")); err == nil && u.Hostname() != "" {
		hosts = append(hosts, u.Hostname())
	}
	return hosts
}

// drainOnSignal returns a context that ends when the server should stop
// serving. The first SIGTERM or SIGINT starts a drain: the sessions
// registry creates no session any more (/readyz answers 503, initialize
// and new sessions get server_draining), running executions get up to
// timeout to finish while their sessions keep being served, and a second
// later (for the last results to be fetched) the context ends. A second
// signal ends it at once.
func drainOnSignal(logger *slog.Logger, svc *service.Service, timeout time.Duration) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
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
		mgr := svc.Manager()
		logger.Info("draining: no new sessions; waiting for running executions", "running", mgr.Running(), "drain_timeout", timeout.String())
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
