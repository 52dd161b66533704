package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/srt-mcp/srt-mcp/sessions"
)

// HTTPConfig configures the Streamable HTTP door.
type HTTPConfig struct {
	// SessionTTL frees idle MCP sessions (and cancels their executions);
	// the command makes sure it outlasts the longest call.
	SessionTTL time.Duration
	// Replica, when set, is named in every Mcp-Session-Id minted here.
	Replica string
}

// Handler serves MCP's Streamable HTTP transport (mounted at /mcp).
//
// Three kinds of caller POST there. A 2025-11-25 client initializes and
// then sends its Mcp-Session-Id: the stateful server. A 2026-07-28 client
// marks every request as such and has no session: mcp-go serves it on the
// same server, sessionless. And a plain JSON-RPC caller (seed 003 §7.1: one
// tools/call with a bearer token, no initialize, no protocol version) is
// served by a stateless server on the same tools, with a JSON reply; all
// sessionless callers keep their state in handles (see caller.go).
func (s *Server) Handler(cfg HTTPConfig) http.Handler {
	ttl := cfg.SessionTTL
	if ttl <= 0 {
		ttl = 30 * time.Minute
	}
	streamable := server.NewStreamableHTTPServer(s.mcp,
		server.WithSessionIdManager(newMCPSessionIDs(cfg.Replica)),
		server.WithDisableStreaming(true),
		server.WithSessionIdleTTL(ttl),
		server.WithHTTPContextFunc(httpCaller),
	)
	plain := server.NewStreamableHTTPServer(s.mcp,
		server.WithStateLess(true),
		server.WithDisableStreaming(true),
		server.WithHTTPContextFunc(httpCaller),
	)
	return mcpFilter(streamable, plain, s.svc.Sessions().Draining)
}

// mcpFilter sends a plain JSON-RPC request to the stateless server, drops
// sessionless notifications/cancelled, which mcp-go would match against
// any client's request ids, and refuses a new MCP session (initialize)
// while the server drains.
func mcpFilter(next, plain http.Handler, draining func() bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			var msg struct {
				Method string `json:"method"`
				Params struct {
					Meta map[string]json.RawMessage `json:"_meta"`
				} `json:"params"`
			}
			parsed := json.Unmarshal(body, &msg) == nil
			if parsed && msg.Method == "initialize" && draining() {
				refuseDraining(w, body)
				return
			}
			if parsed && msg.Method == "notifications/cancelled" {
				// Without a session the request id is ambiguous across
				// clients; for 2026-07-28 clients, disconnecting cancels.
				w.WriteHeader(http.StatusAccepted)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			_, modern := msg.Params.Meta["io.modelcontextprotocol/protocolVersion"]
			modern = modern || r.Header.Get("MCP-Protocol-Version") >= "2026-07-28"
			if parsed && msg.Method != "" && msg.Method != "initialize" && !modern {
				if r.Header.Get("Accept") == "" || r.Header.Get("Accept") == "*/*" {
					r.Header.Set("Accept", "application/json, text/event-stream")
				}
				plain.ServeHTTP(w, r)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// refuseDraining answers a new session's initialize during a drain: 503,
// Retry-After, and a JSON-RPC error that says why (every MCP client shows
// the message).
func refuseDraining(w http.ResponseWriter, body []byte) {
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(body, &req)
	if len(req.ID) == 0 {
		req.ID = json.RawMessage("null")
	}
	msg, _ := json.Marshal(sessions.ErrDraining.Error())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":%s}}`, req.ID, msg)
}

// maxEventStreams bounds the open GET /mcp/events streams.
const maxEventStreams = 256

// heartbeat is how often an events stream says it is alive.
const heartbeat = 15 * time.Second

// EventsHandler is seed 003's GET /mcp/events: a Server-Sent Events stream
// for JSON-RPC notifications. srt-mcp sends its notifications on the
// request they belong to, so the stream carries heartbeats (SSE comments)
// that keep proxies from closing it; it ends when the client goes away or
// the server shuts down.
func (s *Server) EventsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET")
			http.Error(w, "GET /mcp/events opens an event stream", http.StatusMethodNotAllowed)
			return
		}
		fl, ok := w.(http.Flusher)
		if !ok {
			http.Error(w, "streaming is not supported here", http.StatusInternalServerError)
			return
		}
		if n := s.streams.Add(1); n > maxEventStreams {
			s.streams.Add(-1)
			http.Error(w, "too many open event streams; try again later", http.StatusServiceUnavailable)
			return
		}
		defer s.streams.Add(-1)
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, ": srt-mcp events (heartbeats every 15 s)\nretry: 5000\n\n")
		fl.Flush()
		t := time.NewTicker(heartbeat)
		defer t.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-s.closing:
				return
			case now := <-t.C:
				if _, err := io.WriteString(w, ": heartbeat "+now.UTC().Format(time.RFC3339)+"\n\n"); err != nil {
					return
				}
				fl.Flush()
			}
		}
	})
}

// SSEHandlers serve the 2024-11-05 HTTP+SSE transport (GET /sse opens the
// stream, POST /message?sessionId=… carries requests) on the same tools:
// some n8n and desktop client versions speak nothing else. Each SSE
// connection is an MCP session of its own.
func (s *Server) SSEHandlers() (sse, message http.Handler) {
	srv := server.NewSSEServer(s.mcp,
		server.WithSSEEndpoint("/sse"),
		server.WithMessageEndpoint("/message"),
		server.WithKeepAlive(true),
		server.WithKeepAliveInterval(heartbeat),
		server.WithSSEContextFunc(httpCaller),
		// The guard in front checks Host and Origin for every route.
		server.WithSSEDisableLocalhostProtection(true),
	)
	s.sse = srv
	return srv.SSEHandler(), srv.MessageHandler()
}

// CloseStreams ends the long-lived streams (events, SSE) so that an HTTP
// server shutting down does not wait for them.
func (s *Server) CloseStreams(ctx context.Context) {
	s.closeOnce.Do(func() { close(s.closing) })
	if s.sse != nil {
		_ = s.sse.Shutdown(ctx)
	}
}

// ServeStdio serves MCP on stdin/stdout until stdin closes; the stdio
// session's executions are cancelled then.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	std := server.NewStdioServer(s.mcp)
	server.WithWorkerPoolSize(64)(std)
	return std.Listen(ctx, in, out)
}
