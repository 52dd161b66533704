package mcpserver

import (
	"context"
	"net"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/server"

	"github.com/srt-mcp/srt-mcp/guard"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// Who calls, and what is theirs.
//
// A client with an MCP session (2025-11-25 and earlier, and stdio) owns
// what it starts: its executions and its implicit workspace belong to that
// session (no other session can see, feed or cancel them) and end with it.
//
// A sessionless caller (a 2026-07-28 client, or a plain JSON-RPC POST)
// has no session to hang state on (SEP-2567). Its state lives in handles
// the server mints and the model passes back as ordinary arguments:
// session_id (a workspace) and execution_id. Holding a handle is what
// gives access, and only within the caller's principal: one named API key
// never reaches another's handles. Nothing is implicit: a stateful call
// without session_id starts a new workspace and says so, so two agents on
// one machine never share variables, executions or stdin unless they
// share a handle.

// caller is who makes a tool call.
type caller struct {
	principal string // "anonymous", "bearer:…" (--token), "key:NAME" (--token-file), "local" (stdio)
	session   string // the MCP session; "" for a sessionless call
	addr      string // the HTTP client's address
}

type callerKey struct{}

// httpCaller records, for the tool handlers, the principal the guard
// authenticated and the client's address.
func httpCaller(ctx context.Context, r *http.Request) context.Context {
	p := guard.Principal(r.Context())
	if p == "" {
		p = "anonymous"
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return context.WithValue(ctx, callerKey{}, caller{principal: p, addr: host})
}

func callerOf(ctx context.Context) caller {
	c, ok := ctx.Value(callerKey{}).(caller)
	if !ok {
		c.principal = "local" // stdio: the one client
	}
	if sess := server.ClientSessionFromContext(ctx); sess != nil {
		c.session = sess.SessionID()
	}
	return c
}

func (c caller) sessionless() bool { return c.session == "" }

// sessionOwner keys what an MCP session holds (its workspace).
func sessionOwner(mcpSession string) string { return "session:" + mcpSession }

// ownedBySession tells whether an execution owner is the MCP session's.
func ownedBySession(mcpSession string) func(owner string) bool {
	prefix := sessionOwner(mcpSession) + "|"
	return func(owner string) bool { return strings.HasPrefix(owner, prefix) }
}

// base is what the caller's executions belong to: its MCP session, or
// without one its principal.
func (c caller) base() string {
	if !c.sessionless() {
		return sessionOwner(c.session)
	}
	return "principal:" + c.principal
}

// owner is the owner of an execution this caller starts in workspace ws
// ("" for none): its base and the workspace's handle (so a handle can
// list its own executions).
func (c caller) owner(ws string) string {
	if ws == "" {
		ws = "-"
	}
	return c.base() + "|" + ws
}

// may tells whether this caller, holding an execution's id, may reach an
// execution owned by owner.
func (c caller) may(owner string) bool { return strings.HasPrefix(owner, c.base()+"|") }

// sessionsKey names the caller for the sessions one caller may hold.
func (c caller) sessionsKey() string {
	if !c.sessionless() {
		return sessionOwner(c.session)
	}
	return "principal:" + c.principal + "@" + c.addr
}

// anonymous: no key names the caller, so a principal is no boundary
// between callers (list_executions then lists a handle's own only).
func (c caller) anonymous() bool { return c.principal == "anonymous" }

// getSession is the session a handle names, if this caller may use it.
func (s *Server) getSession(c caller, id string) (*sessions.Session, error) {
	if err := s.svc.MayUse(id, c.principal); err != nil {
		return nil, err
	}
	ss, err := s.svc.Get(id)
	if err == nil {
		s.svc.Bind(ss.ID, c.principal)
	}
	return ss, err
}

// openSession is the session a handle names, or a new one ("" or an id
// that names no open session, as seed 000 asks); created says which.
func (s *Server) openSession(c caller, id string) (*sessions.Session, bool, error) {
	if id != "" {
		if err := s.svc.MayUse(id, c.principal); err != nil {
			return nil, false, err
		}
	}
	ss, created, err := s.svc.Session(c.sessionsKey(), id)
	if err == nil {
		s.svc.Bind(ss.ID, c.principal)
	}
	return ss, created, err
}

// workspace is the workspace a stateful call without session_id works in:
// the MCP session's own (made on first use when create is set), or for a
// sessionless caller a new one each time (minted says so; nil without
// create).
func (s *Server) workspace(c caller, create bool) (ss *sessions.Session, minted bool, err error) {
	if !c.sessionless() {
		ss, err = s.svc.Workspace(sessionOwner(c.session), create)
		if ss != nil {
			s.svc.Bind(ss.ID, c.principal)
		}
		return ss, false, err
	}
	if !create {
		return nil, false, nil
	}
	if ss, err = s.svc.NewWorkspace(c.sessionsKey()); err != nil {
		return nil, false, err
	}
	s.svc.Bind(ss.ID, c.principal)
	return ss, true, nil
}

// handleSentence is what a reply says when it minted a workspace handle.
func handleSentence(sid string) string {
	return "This call started workspace " + sid + ": pass session_id \"" + sid + "\" to your next calls to keep its variables and files (without it, each call starts a new, empty workspace)."
}
