//go:build !embedserver

package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/srt-mcp/srt-mcp/apikeys"
	"github.com/srt-mcp/srt-mcp/librechat"
	"github.com/srt-mcp/srt-mcp/mcpserver"
	"github.com/srt-mcp/srt-mcp/server"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// This file turns serve's flags into server.Options and runs the server
// (package server: the wiring). The release build (make build) compiles
// it into a separate binary embedded in a light srt-mcp, so that the
// sandbox's hot paths (srt-mcp exec, the per-execution runner, the
// in-sandbox exec stage) do not pay the MCP library's start-up cost; see
// serve_embedded.go. A plain go build runs it in-process.

// stageBinary is the binary for the inside of sandboxes: the stage binary
// when there is one, else the runners' own (the doctor's live check).
func stageBinary() string {
	if s := os.Getenv(stageBinaryEnv); s != "" {
		return s
	}
	return os.Getenv(runnerBinaryEnv)
}

func runServe(c *cli.Context) error {
	opts, err := serveOptions(c)
	if err != nil {
		return err
	}
	if err := server.Run(context.Background(), opts); err != nil {
		return cli.Exit(err.Error(), 1)
	}
	return nil
}

// serveOptions reads and checks serve's flags (and the settings file they
// name): every usage error comes back as a cli.Exit before anything of the
// server is made.
func serveOptions(c *cli.Context) (server.Options, error) {
	var o server.Options
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
			return o, cli.Exit("--config: "+err.Error(), exitUsage)
		}
	}
	ceiling, err := serveCeiling(c, cf)
	if err != nil {
		return o, cli.Exit(err.Error(), exitUsage)
	}
	logger, err := newLogger(c)
	if err != nil {
		return o, cli.Exit(err.Error(), exitUsage)
	}
	if a := c.String("addr"); a != "" {
		h, p, err := net.SplitHostPort(a)
		if err != nil {
			return o, cli.Exit(fmt.Sprintf("--addr (MCP_HTTP_ADDR) %q: want HOST:PORT or :PORT", a), exitUsage)
		}
		if h == "" {
			h = "0.0.0.0"
		}
		err = c.Set("host", h)
		if err == nil {
			err = c.Set("port", p)
		}
		if err != nil { // (a shadowed err once dropped these)
			return o, cli.Exit(fmt.Sprintf("--addr %q: %v", a, err), exitUsage)
		}
	}
	host, token := c.String("host"), c.String("token")
	var lcCfg *librechat.Config
	var maxBody int64
	sessionTTL, err := mcpSessionTTL(c, ceiling.Limits.Timeout.Std())
	if err != nil {
		return o, cli.Exit(err.Error(), exitUsage)
	}
	quota, err := parseQuota(c.String("workspace-quota"))
	if err != nil {
		return o, cli.Exit("--workspace-quota (SANDBOX_WORKSPACE_QUOTA): "+err.Error(), exitUsage)
	}
	var snapshotBudget int64
	if v := c.String("snapshot-budget"); v != "auto" {
		if snapshotBudget, err = parseQuota(v); err != nil || snapshotBudget <= 0 {
			return o, cli.Exit(fmt.Sprintf("--snapshot-budget (SANDBOX_SNAPSHOT_BUDGET) %q: a size such as 4G, or auto", v), exitUsage)
		}
	}
	if c.Duration("persist-ttl") <= 0 {
		return o, cli.Exit("--persist-ttl (SANDBOX_PERSIST_TTL): a positive duration such as 168h", exitUsage)
	}
	if c.Int("max-persistent") < 1 || c.Int("max-persistent-per-caller") < 1 {
		return o, cli.Exit("--max-persistent and --max-persistent-per-caller: at least 1", exitUsage)
	}
	if c.Duration("snapshot-ttl") <= 0 {
		return o, cli.Exit("--snapshot-ttl (SANDBOX_SNAPSHOT_TTL): a positive duration such as 24h", exitUsage)
	}
	workspaceDirs := false
	switch c.String("workspace-fs") {
	case "auto":
	case "dir":
		workspaceDirs = true
	default:
		return o, cli.Exit(fmt.Sprintf("--workspace-fs (SANDBOX_WORKSPACE_FS) %q: use auto or dir", c.String("workspace-fs")), exitUsage)
	}
	replica := c.String("replica-id")
	if replica != "" && !replicaName.MatchString(replica) {
		return o, cli.Exit(fmt.Sprintf("--replica-id (SANDBOX_REPLICA_ID) %q: use 1 to 32 lower-case letters, digits and '-' (not first or last), e.g. srt-0", replica), exitUsage)
	}
	var keys *apikeys.Keys
	if f := c.Path("token-file"); f != "" {
		if keys, err = apikeys.Load(f); err != nil {
			return o, cli.Exit("--token-file (SANDBOX_TOKEN_FILE): "+err.Error(), exitUsage)
		}
	}
	if !c.Bool("stdio") {
		if token == "" && keys == nil && !isLoopback(host) && !c.Bool("insecure-no-auth") {
			return o, cli.Exit(fmt.Sprintf("refusing to serve on %s without authentication: set --token (or SANDBOX_AUTH_TOKEN) or --token-file, or pass --insecure-no-auth", host), exitUsage)
		}
		if maxBody, err = parseSize(c.String("max-body")); err != nil {
			return o, cli.Exit("--max-body: "+err.Error(), exitUsage)
		}
		if lcCfg, err = libreChatConfig(c, host); err != nil {
			return o, cli.Exit(err.Error(), exitUsage)
		}
	}
	home, _ := os.UserHomeDir()
	user, err := sandboxUser(c)
	if err != nil {
		return o, err
	}
	retained, err := parseSize(c.String("retained-output"))
	if err != nil {
		return o, cli.Exit("--retained-output: "+err.Error(), exitUsage)
	}
	share, err := principalShare(c.String("principal-share"), keys)
	if err != nil {
		return o, cli.Exit("--principal-share (SANDBOX_PRINCIPAL_SHARE): "+err.Error(), exitUsage)
	}
	stateDir := c.String("state-dir")
	if stateDir == "" {
		stateDir = defaultStateDir(home)
	}
	backendName := c.String("backend")
	var docker server.Docker
	switch backendName {
	case "native":
	case "docker":
		// Not usage errors (exit 1), as when the Docker backend checked them.
		if docker, err = dockerOptions(c); err != nil {
			return o, cli.Exit(err.Error(), 1)
		}
	default:
		return o, cli.Exit(fmt.Sprintf("--backend %q: use native or docker", backendName), exitUsage)
	}
	tools, err := mcpserver.ParseTools(c.StringSlice("tools"))
	if err != nil {
		return o, cli.Exit(err.Error(), exitUsage)
	}
	if n := c.Int("max-reply-chars"); n < 1000 || n > mcpserver.MaxReplyChars {
		return o, cli.Exit(fmt.Sprintf("--max-reply-chars %d: give 1000 to %d (a reply carries its output twice, and hosts keep at most 500,000 characters inline)", n, mcpserver.MaxReplyChars), exitUsage)
	}
	var reload *server.Settings
	if cf != nil {
		reload = reloadSettings(cf, c.Command.Flags)
	}
	return server.Options{
		Logger: logger, Version: version,
		Tools: tools, ReplyChars: c.Int("max-reply-chars"),

		Ceiling:        ceiling,
		DefaultTimeout: time.Duration(c.Float64("timeout") * float64(time.Second)),
		Home:           home,
		RunnerBinary:   os.Getenv(runnerBinaryEnv),
		StageBinary:    os.Getenv(stageBinaryEnv),
		RunnerPool:     c.Int("runner-pool"),
		SandboxPool:    c.Int("sandbox-pool"),
		SandboxPoolCPU: c.Float64("sandbox-pool-cpu"),
		SandboxUser:    user,
		Backend:        backendName,
		Docker:         docker,
		Python:         c.String("python"),
		Node:           c.String("node"),

		MaxConcurrent:           c.Int("max-concurrent"),
		MaxPerSession:           c.Int("max-per-session"),
		Retention:               c.Duration("retention"),
		RetainedOutput:          retained,
		PrincipalShare:          share,
		Replica:                 replica,
		StateDir:                stateDir,
		DataSessionTTL:          time.Duration(c.Float64("data-session-ttl-minutes") * float64(time.Minute)),
		MaxSessions:             c.Int("max-sessions"),
		MaxSessionsPerCaller:    c.Int("max-sessions-per-caller"),
		WorkspaceQuota:          quota,
		WorkspaceDirs:           workspaceDirs,
		SnapshotTTL:             c.Duration("snapshot-ttl"),
		PersistDir:              c.String("persist-dir"),
		PersistTTL:              c.Duration("persist-ttl"),
		MaxPersist:              c.Int("max-persistent"),
		MaxPersistPerCaller:     c.Int("max-persistent-per-caller"),
		SnapshotBudget:          snapshotBudget,
		ExecTimeout:             time.Duration(c.Int("exec-timeout-seconds")) * time.Second,
		MaxOutputBytes:          c.Int64("max-output-bytes"),
		MaxCodeBytes:            c.Int("max-code-bytes"),
		MaxUploadBytes:          c.Int64("max-upload-bytes"),
		MaxArtifactRead:         c.Int64("max-artifact-read-bytes"),
		PipIndex:                c.String("pip-index-url"),
		WarmPool:                c.Int("warm-pool"),
		MaxMCPSessions:          c.Int("max-mcp-sessions"),
		MaxMCPSessionsPerCaller: c.Int("max-mcp-sessions-per-caller"),

		SignDownloads: !c.Bool("stdio") || c.IsSet("public-base-url"),
		PublicBaseURL: c.String("public-base-url"),
		FileSecret:    c.String("file-secret"),
		DownloadTTL:   c.Duration("download-ttl"),

		Stdio:                    c.Bool("stdio"),
		Host:                     host,
		Port:                     c.Int("port"),
		Token:                    token,
		Keys:                     keys,
		AllowedOrigins:           c.StringSlice("allowed-origin"),
		AllowedHosts:             allowedHosts(c),
		MaxBody:                  maxBody,
		RateLimit:                c.Float64("rate-limit"),
		MCPSessionTTL:            sessionTTL,
		MetricsToken:             c.String("metrics-token"),
		LibreChat:                lcCfg,
		HTTPIdleTimeout:          c.Duration("http-idle-timeout"),
		MaxConnectionsPerAddress: c.Int("max-connections-per-address"),
		DrainTimeout:             c.Duration("drain-timeout"),

		Settings: reload,
	}, nil
}

// dockerOptions reads the Docker backend's flags.
func dockerOptions(c *cli.Context) (server.Docker, error) {
	memFlag := c.String("container-memory")
	if v := os.Getenv("SANDBOX_MEMORY_LIMIT"); v != "" {
		memFlag = v
	}
	mem, err := parseSize(memFlag)
	if err != nil {
		return server.Docker{}, fmt.Errorf("container memory limit %q: %v", memFlag, err)
	}
	if c.Float64("cpu-limit") <= 0 {
		return server.Docker{}, fmt.Errorf("--cpu-limit must be positive")
	}
	return server.Docker{Image: c.String("image"), Memory: mem, CPUs: c.Float64("cpu-limit"),
		CleanupInterval: time.Duration(c.Float64("cleanup-interval-minutes") * float64(time.Minute))}, nil
}

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
