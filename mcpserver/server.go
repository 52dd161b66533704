// Package mcpserver is srt-mcp's MCP front door: the execution tools of
// seed 002 (execute_code, execute_code_async, get_execution_output,
// send_stdin, cancel_execution, list_executions, get_execution_status) on
// mark3labs/mcp-go, served over Streamable HTTP (with the authentication,
// Origin, body-size and rate limits the spec and the operator need) and
// over stdio.
//
// Each call's sandbox_config only narrows the operator's ceiling
// (policy.Narrow). Executions belong to the caller: the MCP session and
// authenticated principal on HTTP, the one client on stdio.
package mcpserver

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/srt-mcp/srt-mcp/executions"
	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/profiles"
)

// Config is the operator's configuration of the MCP tools.
type Config struct {
	// Ceiling is the most any call may get: domains, paths, limits. Its
	// limits are also the defaults of a call that sets none.
	Ceiling policy.Policy
	// DefaultTimeout applies when a call gives no timeout_seconds.
	DefaultTimeout time.Duration
	// Home expands "~" in policies (the server's home).
	Home string
	// Shell runs execute_code's command: Shell + ["-c", command].
	Shell string
	// ProgressInterval bounds how often progress notifications go out
	// (default 250 ms: at most 4 per second).
	ProgressInterval time.Duration
	// MaxWait bounds how long get_execution_output(wait=true) blocks.
	MaxWait time.Duration
	Logger  *slog.Logger
	Version string
	// Data enables seed 000's data-session tools when Data.Sessions is set.
	Data DataConfig
	// Hide are host paths no sandbox may see (the state directory).
	Hide []string
	// Runtimes is the language registry; nil: discovered on first use.
	Runtimes *profiles.Runtimes
}

// Server holds the MCP server and the executions it serves.
type Server struct {
	cfg  Config
	mgr  *executions.Manager
	mcp  *server.MCPServer
	data *DataConfig
	ws   *workspaces
	pool *pool

	rtOnce sync.Once
	rts    *profiles.Runtimes

	metrics *metrics
	ready   readiness
}

// New builds the MCP server with the seven execution tools.
func New(cfg Config, mgr *executions.Manager) *Server {
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = 60 * time.Second
	}
	if cfg.Shell == "" {
		cfg.Shell = "/bin/bash"
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = 250 * time.Millisecond
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 60 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, mgr: mgr}
	s.initMetrics()
	hooks := &server.Hooks{}
	hooks.AddOnUnregisterSession(func(ctx context.Context, sess server.ClientSession) {
		// The session ended (DELETE, idle expiry, stdin EOF): its running
		// executions are cancelled and their sandboxes torn down.
		owner := ownerFor(sess.SessionID(), principalFrom(ctx))
		if n := mgr.CancelOwner(owner, false); n > 0 {
			cfg.Logger.Info("session ended; cancelled its executions", "session", sess.SessionID(), "cancelled", n)
		}
		s.closeWorkspaceOf(owner)
	})
	s.mcp = server.NewMCPServer("srt-mcp", cfg.Version,
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithRecovery(),
		server.WithHooks(hooks),
		server.WithInstructions("Run commands and code in an OS sandbox (bubblewrap on Linux). "+
			"execute_code waits for the result; execute_code_async returns an execution_id to poll with get_execution_output "+
			"(pass next_seq back as since_seq to get only new output). Network and filesystem access beyond the sandbox's "+
			"private /tmp must be requested in sandbox_config and is limited to what the operator allows."),
	)
	s.addTools()
	s.addDataTools(cfg.Data)
	return s
}

// MCP returns the mcp-go server.
func (s *Server) MCP() *server.MCPServer { return s.mcp }

// Manager returns the executions manager.
func (s *Server) Manager() *executions.Manager { return s.mgr }

func boolPtr(b bool) *bool { return &b }

func annotations(title string, readOnly, destructive, idempotent, openWorld bool) mcp.ToolOption {
	return mcp.WithToolAnnotation(mcp.ToolAnnotation{
		Title: title, ReadOnlyHint: boolPtr(readOnly), DestructiveHint: boolPtr(destructive),
		IdempotentHint: boolPtr(idempotent), OpenWorldHint: boolPtr(openWorld),
	})
}
