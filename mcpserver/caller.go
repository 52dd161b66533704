package mcpserver

import (
	"context"
	"net/http"

	"github.com/mark3labs/mcp-go/server"

	"github.com/srt-mcp/srt-mcp/guard"
	"github.com/srt-mcp/srt-mcp/service"
)

// Who calls, and what is theirs: the service's tenancy model (see
// service/tenancy.go). This door tells it the principal the guard
// authenticated, the client's address and the MCP session the call came
// in; an MCP session is itself bound to the principal that opened it
// (sessionids.go), so that another key presenting its id is told it does
// not exist.
//
// A client with an MCP session (2025-11-25 and earlier, and stdio) owns
// what it starts: its executions and its implicit workspace belong to that
// session and end with it. A sessionless caller (a 2026-07-28 client, or a
// plain JSON-RPC POST) keeps its state in handles the server mints and the
// model passes back as ordinary arguments (SEP-2567): session_id and
// execution_id, reachable only within the caller's principal.

type callerKey struct{}

// httpCaller records, for the tool handlers, the principal the guard
// authenticated and the client's address.
func httpCaller(ctx context.Context, r *http.Request) context.Context {
	return context.WithValue(ctx, callerKey{}, service.CallerOf(guard.Principal(r.Context()), r.RemoteAddr))
}

// callerOf is the caller of a tool call: its principal and address, and
// its MCP session when it has one. Without HTTP it is stdio's one client.
func callerOf(ctx context.Context) service.Caller {
	c, ok := ctx.Value(callerKey{}).(service.Caller)
	if !ok {
		c.Principal = "local"
	}
	if sess := server.ClientSessionFromContext(ctx); sess != nil {
		c.Session = sess.SessionID()
	}
	return c
}

// handleSentence is what a reply says when it minted a workspace handle.
func handleSentence(sid string) string {
	return "This call started workspace " + sid + ": pass session_id \"" + sid + "\" to your next calls to keep its variables and files (without it, each call starts a new, empty workspace)."
}
