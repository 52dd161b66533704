package main

import (
	"runtime"
	"time"

	"github.com/urfave/cli/v2"
)

// runnerBinaryEnv names the light srt-mcp binary a server started by the
// release build uses for its runners; stageBinaryEnv names the stage binary
// (cmd/srt-mcp-stage, a sealed memory file the light binary handed down)
// that runs inside their sandboxes.
const (
	runnerBinaryEnv = "SRT_MCP_RUNNER_BIN"
	stageBinaryEnv  = "SRT_MCP_STAGE_BIN"
)

var serveCommand = &cli.Command{
	Name:  "serve",
	Usage: "serve the sandbox as an MCP server (Streamable HTTP at /mcp, or --stdio)",
	Description: `Every flag also reads the environment variable shown. The operator's flags set the
ceiling: the most any call's sandbox_config may ask for. Calls may only narrow it.
A non-loopback --host needs --token (or SANDBOX_AUTH_TOKEN) or --token-file unless --insecure-no-auth.`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "host", Value: "127.0.0.1", EnvVars: []string{"SANDBOX_HOST"}, Usage: "address to listen on"},
		&cli.IntFlag{Name: "port", Value: 8080, EnvVars: []string{"SANDBOX_PORT"}, Usage: "port to listen on"},
		&cli.StringFlag{Name: "addr", EnvVars: []string{"MCP_HTTP_ADDR"}, Usage: "HOST:PORT to listen on (seed 003's name; \":8080\" is every interface), instead of --host and --port"},
		&cli.BoolFlag{Name: "stdio", Usage: "serve MCP on stdin/stdout instead of HTTP (Claude Code / Desktop)"},
		&cli.IntFlag{Name: "max-concurrent", Value: 10, EnvVars: []string{"SANDBOX_MAX_CONCURRENT"}, Usage: "sandboxes starting or running at once, all sessions (cells of a session's interpreter run in it, bounded by --max-sessions)"},
		&cli.IntFlag{Name: "max-per-session", Value: 5, EnvVars: []string{"SANDBOX_MAX_PER_SESSION"}, Usage: "running executions per session"},
		&cli.Float64Flag{Name: "timeout", Value: 300, EnvVars: []string{"SANDBOX_TIMEOUT"}, Usage: "default execution timeout in seconds (when a call sets none)"},
		&cli.Float64Flag{Name: "max-timeout", Value: 3600, EnvVars: []string{"SANDBOX_MAX_TIMEOUT"}, Usage: "largest timeout_seconds a call may ask for"},
		&cli.StringSliceFlag{Name: "allow-domain", EnvVars: []string{"SANDBOX_ALLOWED_DOMAINS"}, Usage: "domains calls may ask for (ceiling; comma-separated in the env)"},
		&cli.StringSliceFlag{Name: "deny-domain", EnvVars: []string{"SANDBOX_DENIED_DOMAINS"}, Usage: "domains always denied"},
		&cli.StringSliceFlag{Name: "allow-read", EnvVars: []string{"SANDBOX_ALLOW_READ"}, Usage: "host paths calls may read (ceiling)"},
		&cli.StringSliceFlag{Name: "allow-write", EnvVars: []string{"SANDBOX_ALLOW_WRITE"}, Usage: "host paths calls may write (ceiling)"},
		&cli.StringSliceFlag{Name: "allow-ip-range", EnvVars: []string{"SANDBOX_ALLOWED_IP_RANGES"}, Usage: "CIDRs allowed names may resolve to (loopback/private are refused otherwise)"},
		&cli.StringSliceFlag{Name: "resolve", Usage: "pin HOST=IP for the proxy"},
		&cli.StringFlag{Name: "max-memory", Value: defaultMaxMemory(), EnvVars: []string{"SANDBOX_MEMORY_LIMIT"}, Usage: "memory limit per process (macOS cannot enforce one: none by default there, and setting one is an error)"},
		&cli.IntFlag{Name: "max-procs", Value: 512, EnvVars: []string{"SANDBOX_MAX_PROCS"}, Usage: "process limit per execution"},
		&cli.StringFlag{Name: "max-output", Value: "10M", EnvVars: []string{"SANDBOX_MAX_OUTPUT"}, Usage: "cap on each of stdout and stderr per execution"},
		&cli.StringFlag{Name: "settings", EnvVars: []string{"SANDBOX_SETTINGS"}, Usage: "srt-format settings `FILE` for the ceiling"},
		&cli.StringFlag{Name: "token", EnvVars: []string{"SANDBOX_AUTH_TOKEN", "MCP_API_TOKEN"}, Usage: "bearer token required on every HTTP request"},
		&cli.PathFlag{Name: "token-file", EnvVars: []string{"SANDBOX_TOKEN_FILE"}, TakesFile: true, Usage: "named API keys, one `FILE` line each: NAME TOKEN or NAME sha256:HEX; each key is a principal of its own (rate limit, sessions, audit, list_executions); the file must not be writable by others"},
		&cli.BoolFlag{Name: "insecure-no-auth", Usage: "allow a non-loopback --host without a token"},
		&cli.IntFlag{Name: "max-mcp-sessions", Value: 4096, EnvVars: []string{"SANDBOX_MAX_MCP_SESSIONS"}, Usage: "MCP sessions (Streamable HTTP and SSE) open at once, all callers"},
		&cli.IntFlag{Name: "max-mcp-sessions-per-caller", Value: 256, EnvVars: []string{"SANDBOX_MAX_MCP_SESSIONS_PER_CALLER"}, Usage: "MCP sessions one API key, and one client address, may hold open"},
		&cli.StringFlag{Name: "principal-share", Value: "auto", EnvVars: []string{"SANDBOX_PRINCIPAL_SHARE"}, Usage: "the part of each server-wide cap (running executions, open sessions, MCP sessions) one API key may take: a fraction, or auto (0.5 with --token-file, else 1)"},
		&cli.DurationFlag{Name: "http-idle-timeout", Value: 2 * time.Minute, EnvVars: []string{"SANDBOX_HTTP_IDLE_TIMEOUT"}, Usage: "idle keep-alive HTTP connections are closed after this"},
		&cli.IntFlag{Name: "max-connections-per-address", Value: 256, EnvVars: []string{"SANDBOX_MAX_CONNECTIONS_PER_ADDRESS"}, Usage: "HTTP connections one client address may hold open (more are closed at once)"},
		&cli.IntFlag{Name: "sandbox-pool", Value: 2, EnvVars: []string{"SANDBOX_POOL"}, Usage: "sandboxes kept started ahead of their calls while idle: after a run, its runner starts a fresh sandbox for the next run of the same policy, which that run claims (never reused; one that changed while it waited is discarded; under load every busy runner keeps one, up to 32); 0: each run starts its own"},
		&cli.Float64Flag{Name: "sandbox-pool-cpu", Value: 85, EnvVars: []string{"SANDBOX_POOL_CPU"}, Usage: "the CPU budget of --sandbox-pool: no sandbox is started ahead while the machine was busier than this percentage of its CPU (on a saturated machine one started ahead only takes the CPU of one started for its run); 100: always"},
		&cli.IntFlag{Name: "runner-pool", Value: 2, EnvVars: []string{"SANDBOX_RUNNER_POOL"}, Usage: "runner processes kept started ahead of need, so that a sandbox's start does not wait for one; each also serves one execution after another (0: none, a process per execution)"},
		&cli.StringFlag{Name: "replica-id", EnvVars: []string{"SANDBOX_REPLICA_ID"}, Usage: "this server's `NAME` among replicas behind one proxy (lower-case letters, digits, '-'; e.g. the StatefulSet pod's ordinal): every session id, execution id and Mcp-Session-Id it mints names it, so the proxy can route each call to the replica that holds its state (default: none)"},
		&cli.StringSliceFlag{Name: "allowed-origin", EnvVars: []string{"SANDBOX_ALLOWED_ORIGINS"}, Usage: "browser Origins allowed besides loopback and the server's own"},
		&cli.StringSliceFlag{Name: "allowed-host", EnvVars: []string{"SANDBOX_ALLOWED_HOSTS"}, Usage: "Host names the server answers to besides IP addresses and localhost (DNS-rebinding guard; the --public-base-url host is added)"},
		&cli.StringFlag{Name: "max-body", Value: "4M", EnvVars: []string{"SANDBOX_MAX_BODY"}, Usage: "largest HTTP request body"},
		&cli.Float64Flag{Name: "rate-limit", Value: 50, EnvVars: []string{"SANDBOX_RATE_LIMIT"}, Usage: "HTTP requests per second per principal"},
		&cli.StringSliceFlag{Name: "tools", EnvVars: []string{"SANDBOX_TOOLS"}, Usage: "the MCP tools offered: profiles all (default), exec (execute_code and its execution tools), data (upload_file, run_python, artifacts), workspace (sessions, snapshots, install_package, list_runtimes), runcode (sandbox_run_code, sandbox_list_runners), and single tool names, any mix (comma-separated in the env); a tool not offered is neither listed nor callable"},
		&cli.IntFlag{Name: "max-reply-chars", Value: 40000, EnvVars: []string{"SANDBOX_MAX_REPLY_CHARS"}, Usage: "output characters one MCP tool reply carries at most (1000 to 246000); past it the reply says it is cut and where to read on (get_execution_output from next_seq)"},
		&cli.StringFlag{Name: "config", EnvVars: []string{"SANDBOX_CONFIG"}, Usage: "settings `FILE` (JSON): serve's flag names as keys, and srt's \"network\" and \"filesystem\" for the ceiling; the command line and environment win; the ceiling reloads when the file changes (an invalid file is logged and refused, the settings in force stay)"},
		&cli.DurationFlag{Name: "drain-timeout", Value: 25 * time.Second, EnvVars: []string{"SANDBOX_DRAIN_TIMEOUT"}, Usage: "on SIGTERM or SIGINT the server drains: /readyz answers 503, new sessions are refused (server_draining), running executions get this long to finish (a second signal stops at once), then sessions are closed and sandboxes removed; keep it below the orchestrator's grace period (Kubernetes: terminationGracePeriodSeconds, default 30s)"},
		&cli.DurationFlag{Name: "retention", Value: 15 * time.Minute, EnvVars: []string{"SANDBOX_RETENTION"}, Usage: "how long finished executions stay readable"},
		&cli.StringFlag{Name: "retained-output", Value: "256M", EnvVars: []string{"SANDBOX_RETAINED_OUTPUT"}, Usage: "most output all executions hold; past it the finished ones that ended first are freed (their ids answer expired)"},
		&cli.DurationFlag{Name: "session-ttl", EnvVars: []string{"SANDBOX_MCP_SESSION_TTL"}, Usage: "idle MCP sessions are closed (and their executions cancelled) after this (default 30m, or --max-timeout + 5m when longer; shorter than that is an error)"},
		// Data sessions (seed 000).
		&cli.StringFlag{Name: "state-dir", EnvVars: []string{"SANDBOX_STATE_DIR", "SANDBOX_ROOT"}, Usage: "where session workspaces, audit logs and the file-signing secret live (default /var/lib/srt-mcp as root, else ~/.local/state/srt-mcp)"},
		&cli.Float64Flag{Name: "data-session-ttl-minutes", Value: 30, EnvVars: []string{"SANDBOX_SESSION_TTL_M"}, Usage: "idle data sessions are closed after this many minutes"},
		&cli.IntFlag{Name: "max-sessions", Value: 10, EnvVars: []string{"SANDBOX_MAX_SESSIONS"}, Usage: "open data sessions at most"},
		&cli.IntFlag{Name: "max-sessions-per-caller", Value: 10, EnvVars: []string{"SANDBOX_MAX_SESSIONS_PER_CALLER"}, Usage: "open data sessions one caller (an MCP session, a playground user) may hold"},
		&cli.StringFlag{Name: "workspace-quota", Value: "1G", EnvVars: []string{"SANDBOX_WORKSPACE_QUOTA"}, Usage: "what one session's /mnt/data and cache may hold: on a root server each workspace is a filesystem of that size (a write past it fails with ENOSPC); otherwise a watch stops a run past it and removes its new files (none: no quota)"},
		&cli.DurationFlag{Name: "snapshot-ttl", Value: 24 * time.Hour, EnvVars: []string{"SANDBOX_SNAPSHOT_TTL"}, Usage: "how long a workspace snapshot (snapshot_workspace) is kept"},
		&cli.StringFlag{Name: "snapshot-budget", Value: "auto", EnvVars: []string{"SANDBOX_SNAPSHOT_BUDGET"}, Usage: "what one key's snapshots may hold together on disk (auto: 4 x --workspace-quota)"},
		&cli.StringFlag{Name: "persist-dir", EnvVars: []string{"SANDBOX_PERSIST_DIR"}, Usage: "where persistent workspaces (create_session {name, persist: true}) live (default <state-dir>/persistent); replicas that share it resume each other's"},
		&cli.DurationFlag{Name: "persist-ttl", Value: 7 * 24 * time.Hour, EnvVars: []string{"SANDBOX_PERSIST_TTL"}, Usage: "a persistent workspace unused this long is removed"},
		&cli.IntFlag{Name: "max-persistent", Value: 64, EnvVars: []string{"SANDBOX_MAX_PERSISTENT"}, Usage: "persistent workspaces the persistent directory holds at most"},
		&cli.IntFlag{Name: "max-persistent-per-caller", Value: 8, EnvVars: []string{"SANDBOX_MAX_PERSISTENT_PER_CALLER"}, Usage: "persistent workspaces one key holds at most"},
		&cli.StringFlag{Name: "workspace-fs", Value: "auto", EnvVars: []string{"SANDBOX_WORKSPACE_FS"}, Usage: "auto: each workspace is an ext4 filesystem of its own where the server can make one (root, loop devices, mkfs.ext4), else a directory with a watched quota; dir: always a directory"},
		&cli.IntFlag{Name: "exec-timeout-seconds", Value: 60, EnvVars: []string{"SANDBOX_EXEC_TIMEOUT_S"}, Usage: "run_python timeout"},
		&cli.Int64Flag{Name: "max-output-bytes", Value: 100 << 10, EnvVars: []string{"SANDBOX_MAX_OUTPUT_BYTES"}, Usage: "run_python stdout/stderr cap"},
		&cli.IntFlag{Name: "max-code-bytes", Value: 100 << 10, EnvVars: []string{"SANDBOX_MAX_CODE_BYTES"}, Usage: "largest run_python code"},
		&cli.Int64Flag{Name: "max-upload-bytes", Value: 50 << 20, EnvVars: []string{"SANDBOX_MAX_UPLOAD_BYTES"}, Usage: "largest upload_file"},
		&cli.Int64Flag{Name: "max-artifact-read-bytes", Value: 10 << 20, EnvVars: []string{"SANDBOX_MAX_ARTIFACT_READ_BYTES"}, Usage: "largest read_artifact"},
		&cli.StringFlag{Name: "public-base-url", EnvVars: []string{"PUBLIC_BASE_URL"}, Usage: "base of download URLs (default: this listener)"},
		&cli.StringFlag{Name: "file-secret", EnvVars: []string{"FILE_SECRET"}, Usage: "HMAC secret for download URLs (default: generated and kept in the state dir, 0600)"},
		&cli.DurationFlag{Name: "download-ttl", Value: 24 * time.Hour, EnvVars: []string{"SANDBOX_DOWNLOAD_TTL"}, Usage: "how long a signed download URL stays valid"},
		&cli.StringFlag{Name: "node", Value: "/usr/bin/node", EnvVars: []string{"SANDBOX_NODE"}, Usage: "interpreter of language javascript"},
		&cli.StringFlag{Name: "pip-index-url", Value: "https://pypi.org/simple", EnvVars: []string{"SANDBOX_PIP_INDEX_URL"}, Usage: "install_package's package index (its host must be in --allow-domain)"},
		&cli.StringFlag{Name: "librechat-prefix", Value: "/v1/librechat", EnvVars: []string{"SANDBOX_LIBRECHAT_PREFIX"}, Usage: "where the LibreChat Code API is mounted (LIBRECHAT_CODE_BASEURL=http://host:port<prefix>); \"\" disables it"},
		&cli.StringFlag{Name: "librechat-api-key", EnvVars: []string{"CI_API_KEY", "LIBRECHAT_CODE_API_KEY"}, Usage: "X-API-Key the LibreChat Code API accepts (legacy LibreChat clients)"},
		&cli.StringSliceFlag{Name: "librechat-jwt-public-key", EnvVars: []string{"SANDBOX_LIBRECHAT_JWT_PUBLIC_KEY"}, Usage: "PEM `FILE` of a public key (Ed25519 or RSA) that verifies LibreChat's Bearer JWTs (aud codeapi)"},
		&cli.BoolFlag{Name: "librechat-no-auth", EnvVars: []string{"SANDBOX_LIBRECHAT_NO_AUTH"}, Usage: "accept LibreChat Code API calls without credentials (a default current LibreChat sends none); loopback binds only, unless --insecure-no-auth"},
		&cli.Float64Flag{Name: "librechat-rate-scale", Value: 1, EnvVars: []string{"SANDBOX_LIBRECHAT_RATE_SCALE"}, Usage: "multiply the Code API's rate limits (20 exec/30 s, 30 uploads/5 min, 60 downloads/min, 120 listings/min)"},
		&cli.StringFlag{Name: "metrics-token", EnvVars: []string{"SANDBOX_METRICS_TOKEN"}, Usage: "bearer token /metrics requires (default: none; /metrics is open on the listener)"},
		&cli.IntFlag{Name: "warm-pool", Value: 2, EnvVars: []string{"SANDBOX_WARM_POOL"}, Usage: "sessions kept ready with a Python interpreter that has imported the data stack (0: none)"},
		&cli.StringFlag{Name: "backend", Value: "native", EnvVars: []string{"SANDBOX_BACKEND"}, Usage: "where data sessions run: native (bubblewrap) or docker (one container per session)"},
		&cli.StringFlag{Name: "image", Value: defaultImage, EnvVars: []string{"SANDBOX_IMAGE"}, Usage: "docker backend: the Python data image (srt-mcp image build makes it)"},
		&cli.StringFlag{Name: "container-memory", Value: "512M", EnvVars: []string{"SANDBOX_CONTAINER_MEMORY"}, Usage: "docker backend: memory limit per session container (SANDBOX_MEMORY_LIMIT, when set, wins)"},
		&cli.Float64Flag{Name: "cpu-limit", Value: 1, EnvVars: []string{"SANDBOX_CPU_LIMIT"}, Usage: "docker backend: CPUs per session container"},
		&cli.Float64Flag{Name: "cleanup-interval-minutes", Value: 5, EnvVars: []string{"SANDBOX_CLEANUP_INTERVAL_M"}, Usage: "docker backend: how often containers of dead servers are removed"},
		&cli.StringFlag{Name: "python", Value: "/usr/bin/python3", EnvVars: []string{"SANDBOX_PYTHON"}, Usage: "interpreter run_python runs in the sandbox"},
		sandboxUserFlag,
		&cli.StringFlag{Name: "log-format", Value: "json", EnvVars: []string{"SANDBOX_LOG_FORMAT"}, Usage: "json or console"},
		&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: []string{"SANDBOX_LOG_LEVEL"}, Usage: "debug, info, warn or error"},
		&cli.StringFlag{Name: "log-file", EnvVars: []string{"SANDBOX_LOG_FILE"}, Usage: "append logs to this file instead of stderr"},
	},
	Action: runServe,
}

// defaultMaxMemory is --max-memory's default: 2G, or none on macOS, which
// cannot enforce a memory limit (runs that ask for one are refused).
func defaultMaxMemory() string {
	if runtime.GOOS == "darwin" {
		return "0"
	}
	return "2G"
}
