// Package mcpserver is srt-mcp's MCP front door: the tools of seeds 000
// to 003 (execute_code and the execution tools, the data-session tools,
// the workspace tools, install_package, sandbox_run_code) on
// mark3labs/mcp-go, served over Streamable HTTP (Handler, mounted behind
// the server's guard by the command) and over stdio. Every run goes
// through the run service (package service); this package only turns
// tool arguments into service requests and results into each seed's
// reply.
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

	"github.com/srt-mcp/srt-mcp/service"
)

// Config configures the MCP door.
type Config struct {
	// ProgressInterval bounds how often progress notifications go out
	// (default 250 ms: at most 4 per second).
	ProgressInterval time.Duration
	// MaxWait bounds how long get_execution_output(wait=true) blocks.
	MaxWait time.Duration
	// PreviewBytes is the largest image preview (64 KB).
	PreviewBytes int
	Logger       *slog.Logger
	Version      string
	// Tools is the set of tools offered (ParseTools of --tools); nil:
	// every tool.
	Tools map[string]bool
	// ReplyChars bounds the output characters one reply carries
	// (default 40,000); past it the reply says where to read on.
	ReplyChars int
}

// Server is the MCP door.
type Server struct {
	cfg Config
	svc *service.Service
	mcp *server.MCPServer
	// args are the tools' argument names, for strict checking.
	args strictArgs
	// tools are the tools offered (Config.Tools).
	tools map[string]bool

	// ids mints and binds the MCP sessions' ids (HTTP transports).
	ids *mcpSessionIDs

	// The long-lived HTTP streams (see CloseStreams).
	closing   chan struct{}
	closeOnce sync.Once
	sse       *server.SSEServer

	// tasks answers MCP tasks for execute_code and run_python (tasks.go).
	tasks *tasks
}

// New builds the MCP server and its tools on the run service.
func New(cfg Config, svc *service.Service) *Server {
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = 250 * time.Millisecond
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 60 * time.Second
	}
	if cfg.PreviewBytes <= 0 {
		cfg.PreviewBytes = 64 << 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ReplyChars <= 0 {
		cfg.ReplyChars = DefaultReplyChars
	}
	if cfg.Tools == nil {
		cfg.Tools, _ = ParseTools(nil)
	}
	s := &Server{cfg: cfg, svc: svc, ids: newMCPSessionIDs(""), closing: make(chan struct{}), tools: cfg.Tools}
	hooks := &server.Hooks{}
	hooks.AddOnUnregisterSession(func(ctx context.Context, sess server.ClientSession) {
		// The session ended (DELETE, idle expiry, stdin EOF, the SSE
		// stream closed): its running executions, async ones included, are
		// cancelled and their sandboxes torn down, its finished ones
		// forgotten, its workspace closed, and its place freed.
		if n := svc.EndMCPSession(sess.SessionID()); n > 0 {
			cfg.Logger.Info("session ended; cancelled its executions", "session", sess.SessionID(), "cancelled", n)
		}
		s.ids.end(sess.SessionID(), false)
	})
	hooks.AddBeforeCallTool(func(_ context.Context, _ any, req *mcp.CallToolRequest) { undot(req) })
	s.mcp = server.NewMCPServer("srt-mcp", cfg.Version,
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithToolHandlerMiddleware(s.jsonText), // outermost: the text is the final structured content
		server.WithRecovery(),
		server.WithHooks(hooks),
		server.WithToolHandlerMiddleware(s.strict),
		server.WithToolFilter(s.offered),
		server.WithToolFilter(linkRunApp),
		server.WithInstructions(instructions(cfg.Tools)),
	)
	s.addTools()
	s.addDataTools()
	s.addWorkspaceTools()
	s.addSnapshotTools()
	s.addInstallTool()
	s.addSeed003Tools()
	s.addTasks(hooks)
	s.addRunApp()
	return s
}

// MCP returns the mcp-go server.
func (s *Server) MCP() *server.MCPServer { return s.mcp }

func boolPtr(b bool) *bool { return &b }
