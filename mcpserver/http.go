package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// HTTPConfig configures the Streamable HTTP door.
type HTTPConfig struct {
	// Token is the bearer token requests carry (checked by the guard in
	// front); it names the caller's principal. "": anonymous.
	Token string
	// SessionTTL frees idle MCP sessions (and cancels their executions);
	// the command makes sure it outlasts the longest call.
	SessionTTL time.Duration
}

type principalKey struct{}

func principalFrom(ctx context.Context) string {
	if p, ok := ctx.Value(principalKey{}).(string); ok {
		return p
	}
	return "local"
}

// ownerFor names who owns an execution: the MCP session when there is one
// (session ids are unguessable and every request is authenticated), else
// the authenticated principal (2026-07-28 clients have no sessions).
func ownerFor(sessionID, principal string) string {
	if sessionID != "" {
		return "session:" + sessionID
	}
	return "principal:" + principal
}

func ownerFrom(ctx context.Context) string {
	sid := ""
	if sess := server.ClientSessionFromContext(ctx); sess != nil {
		sid = sess.SessionID()
	}
	return ownerFor(sid, principalFrom(ctx))
}

// PrincipalOf identifies an HTTP caller: a hash of the server's token it
// presented, or "anonymous".
func PrincipalOf(token string) string {
	if token == "" {
		return "anonymous"
	}
	sum := sha256.Sum256([]byte(token))
	return "bearer:" + hex.EncodeToString(sum[:8])
}

// Handler serves MCP's Streamable HTTP transport (mounted at /mcp).
func (s *Server) Handler(cfg HTTPConfig) http.Handler {
	ttl := cfg.SessionTTL
	if ttl <= 0 {
		ttl = 30 * time.Minute
	}
	principal := PrincipalOf(cfg.Token)
	streamable := server.NewStreamableHTTPServer(s.mcp,
		server.WithStateful(true),
		server.WithDisableStreaming(true),
		server.WithSessionIdleTTL(ttl),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			return context.WithValue(ctx, principalKey{}, principal)
		}),
	)
	return mcpFilter(streamable)
}

// mcpFilter drops sessionless notifications/cancelled, which mcp-go would
// match against any client's request ids.
func mcpFilter(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			var msg struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method == "notifications/cancelled" {
				// Without a session the request id is ambiguous across
				// clients; for 2026-07-28 clients, disconnecting cancels.
				w.WriteHeader(http.StatusAccepted)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}

// ServeStdio serves MCP on stdin/stdout until stdin closes; the stdio
// session's executions are cancelled then.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	std := server.NewStdioServer(s.mcp)
	server.WithWorkerPoolSize(64)(std)
	return std.Listen(ctx, in, out)
}
