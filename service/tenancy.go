package service

// Who owns what: one model for every door.
//
// Every request reaches the service as a Caller: the principal the guard
// authenticated (an API key, the server's --token, a LibreChat user, or
// anonymous), the MCP session it came in (none for sessionless callers and
// the HTTP doors), and its address. Every handle the server hands out is
// bound to its principal when it is made, and every lookup checks the
// binding here:
//
//   - a data session (workspace) belongs to the principal that opened it:
//     a pooled one from when it is claimed, a LibreChat storage session from
//     its creation. Another principal's handle is session_not_found, like
//     one that does not exist; nothing is adopted by its first user.
//   - an execution belongs to its caller: the MCP session it ran in (bound
//     to its principal by the MCP door), or without one the principal
//     itself, narrowed to the workspace it ran in; runs a door does not hand
//     out by id (run_python, the playground, LibreChat) belong to their
//     workspace and no tool reaches them.
//   - a conversation (seed 003's conversationId, the playground's) is a
//     name in its door's and its principal's own namespace: the service
//     maps it to a workspace with a freshly minted id, so no caller can
//     name, compute or take another's.
//   - a signed download URL names one incarnation of one session.
//
// Without API keys every caller is "anonymous": holding a handle is then
// what gives access (and handles are unguessable); with keys, a handle is
// never a credential on its own.

import (
	"context"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// Caller is who makes a request.
type Caller struct {
	// Principal is who authenticated: "anonymous", "bearer:…" (--token),
	// "key:NAME" (--token-file), "local" (stdio), "librechat:…".
	Principal string
	// Session is the MCP session the call came in ("" for sessionless
	// callers and the HTTP doors).
	Session string
	// Addr is the client's address.
	Addr string
}

// CallerOf is the caller of an HTTP request: the principal its route's
// authentication named ("" is anonymous) and the host of its address.
func CallerOf(principal, remoteAddr string) Caller {
	if principal == "" {
		principal = "anonymous"
	}
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	return Caller{Principal: principal, Addr: host}
}

// Anonymous reports that no key names the caller: a principal is then no
// boundary between callers.
func (c Caller) Anonymous() bool { return c.Principal == "anonymous" || c.Principal == "" }

// base is what the caller's executions belong to: its MCP session, or
// without one its principal.
func (c Caller) base() string {
	if c.Session != "" {
		return "session:" + strconv.Quote(c.Session)
	}
	// Quoted: no principal's name (a JWT subject may hold any character)
	// is a prefix of another's owner key.
	return "principal:" + strconv.Quote(c.Principal)
}

// owner is the owner of an execution the caller starts in workspace ws
// ("" for none): its base and the workspace's handle, so that a handle can
// list its own executions.
func (c Caller) owner(ws string) string {
	if ws == "" {
		ws = "-"
	}
	return c.base() + "|" + ws
}

// may tells whether the caller, holding an execution's id, may reach an
// execution owned by owner.
func (c Caller) may(owner string) bool { return strings.HasPrefix(owner, c.base()+"|") }

// key names the caller for the sessions one caller may hold open: its MCP
// session, or its principal from its address.
func (c Caller) key() string {
	if c.Session != "" {
		return "session:" + c.Session
	}
	return "principal:" + c.Principal + "@" + c.Addr
}

// dataOwner owns the runs of a workspace that no tool reaches by id.
func dataOwner(sessionID string) string { return "data:" + sessionID }

// Workspace is a data session as a door sees it: its handle and its age.
// Everything done in it goes through the service.
type Workspace struct{ ss *sessions.Session }

// ID is the workspace's handle (sess_…).
func (w *Workspace) ID() string { return w.ss.ID }

// Created is when the workspace was made.
func (w *Workspace) Created() time.Time { return w.ss.Created }

func wrap(ss *sessions.Session) *Workspace {
	if ss == nil {
		return nil
	}
	return &Workspace{ss: ss}
}

// share is a principal's part of a server-wide cap: all of it when the
// operator shares nothing (PrincipalShare 0 or 1), else the fraction,
// rounded up, at least one.
func (s *Service) share(limit int) int { return ShareOf(limit, s.cfg.PrincipalShare) }

// ShareOf is fraction of limit, rounded up and at least one; all of it
// when fraction is 0 or 1 (or limit is none).
func ShareOf(limit int, fraction float64) int {
	if fraction <= 0 || fraction >= 1 || limit <= 0 {
		return limit
	}
	return max(1, int(math.Ceil(float64(limit)*fraction)))
}

// callers counts the sessions each caller opened, so that one caller
// cannot take every session of the server.
type callers struct {
	mu       sync.Mutex
	byCaller map[string]map[string]bool // caller key -> its open session ids
	of       map[string]string          // session id -> caller key
}

func newCallers() *callers {
	return &callers{byCaller: map[string]map[string]bool{}, of: map[string]string{}}
}

func (c *callers) forget(sid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if caller, ok := c.of[sid]; ok {
		delete(c.of, sid)
		delete(c.byCaller[caller], sid)
		if len(c.byCaller[caller]) == 0 {
			delete(c.byCaller, caller)
		}
	}
}

// full refuses a caller that holds MaxSessionsPerCaller sessions; called
// with c.mu held.
func (s *Service) fullLocked(c Caller, close string) error {
	if n := len(s.callers.byCaller[c.key()]); n >= s.cfg.MaxSessionsPerCaller {
		return errs.New(errs.MaxSessions, "this caller already holds %d open sessions, the most one caller may (SANDBOX_MAX_SESSIONS_PER_CALLER); close one (%s) or reuse its session_id", n, close)
	}
	return nil
}

// claimedLocked records that c opened ss; called with callers.mu held.
func (s *Service) claimedLocked(c Caller, ss *sessions.Session) {
	k := c.key()
	if s.callers.byCaller[k] == nil {
		s.callers.byCaller[k] = map[string]bool{}
	}
	s.callers.byCaller[k][ss.ID] = true
	s.callers.of[ss.ID] = k
}

// OpenWorkspace is c's workspace id: a new one when id is "" or names no
// open session (seed 000 lets a caller name a new session), the open one
// when it is c's; created says which. Another principal's is
// session_not_found.
func (s *Service) OpenWorkspace(c Caller, id string) (w *Workspace, created bool, err error) {
	if id != "" {
		if ss, err := s.reg.Lookup(id, c.Principal); err == nil {
			return wrap(ss), false, nil
		}
	}
	s.callers.mu.Lock()
	defer s.callers.mu.Unlock()
	if err := s.fullLocked(c, "close_session"); err != nil {
		return nil, false, err
	}
	ss, created, err := s.reg.Open(id, c.Principal)
	if err != nil || !created {
		return wrap(ss), created, err
	}
	s.claimedLocked(c, ss)
	return wrap(ss), true, nil
}

// LookupWorkspace is c's open workspace id (session_not_found for one that
// does not exist or is another principal's).
func (s *Service) LookupWorkspace(c Caller, id string) (*Workspace, error) {
	ss, err := s.reg.Lookup(id, c.Principal)
	if err != nil {
		return nil, err
	}
	return wrap(ss), nil
}

// CloseWorkspace closes c's workspace id: its runs are cancelled, its
// kernels and sandbox removed, its files deleted.
func (s *Service) CloseWorkspace(c Caller, id string) error {
	// A suspended persistent workspace goes without being resumed first
	// (which a caller at its cap of open sessions could not).
	if found, err := s.reg.DestroyPersistent(id, c.Principal); found {
		return err
	}
	ss, err := s.reg.Lookup(id, c.Principal)
	if err != nil {
		return err
	}
	return s.reg.Close(ss.ID)
}

// newWorkspace makes a workspace for c (from the warm pool when one is
// ready).
func (s *Service) newWorkspace(c Caller) (*sessions.Session, error) {
	s.callers.mu.Lock()
	defer s.callers.mu.Unlock()
	if err := s.fullLocked(c, "destroy_session"); err != nil {
		return nil, err
	}
	ss := s.pool.take(c.Principal)
	if ss == nil {
		var err error
		if ss, _, err = s.reg.Open("", c.Principal); err != nil {
			return nil, err
		}
	}
	s.claimedLocked(c, ss)
	return ss, nil
}

// implicit binds MCP sessions to the workspace that is theirs.
type implicit struct {
	mu      sync.Mutex
	byMCP   map[string]string // MCP session -> data session id
	byConvo map[string]string // door, principal, conversation -> data session id
}

// ImplicitWorkspace is the workspace a stateful call without session_id
// works in: its MCP session's own (made on first use when create is set),
// or for a sessionless caller a new one each time (minted says so; nil
// without create).
func (s *Service) ImplicitWorkspace(c Caller, create bool) (w *Workspace, minted bool, err error) {
	if c.Session == "" {
		if !create {
			return nil, false, nil
		}
		ss, err := s.newWorkspace(c)
		return wrap(ss), err == nil, err
	}
	s.implicit.mu.Lock()
	sid := s.implicit.byMCP[c.Session]
	s.implicit.mu.Unlock()
	if sid != "" {
		if ss, err := s.reg.Lookup(sid, c.Principal); err == nil {
			return wrap(ss), false, nil
		}
	}
	if !create {
		return nil, false, nil
	}
	ss, err := s.newWorkspace(c)
	if err != nil {
		return nil, false, err
	}
	s.implicit.mu.Lock()
	s.implicit.byMCP[c.Session] = ss.ID
	s.implicit.mu.Unlock()
	return wrap(ss), false, nil
}

// EndMCPSession ends what an MCP session held (its client deleted it, it
// idled out, its stream or stdin closed): its running executions are
// cancelled, its finished ones forgotten (nobody else may read them), its
// workspace closed.
func (s *Service) EndMCPSession(mcpSession string) int {
	prefix := Caller{Session: mcpSession}.base() + "|"
	owned := func(owner string) bool { return strings.HasPrefix(owner, prefix) }
	n := s.mgr.CancelWhere(owned, false)
	s.mgr.ForgetWhere(owned)
	s.implicit.mu.Lock()
	sid := s.implicit.byMCP[mcpSession]
	delete(s.implicit.byMCP, mcpSession)
	s.implicit.mu.Unlock()
	if sid != "" {
		_ = s.reg.Close(sid)
	}
	return n
}

// ConversationWorkspace is the workspace of a conversation (seed 003's
// conversationId, the playground's conversation) in door's namespace of
// c's principal: made on first use when create is set (nil, nil when it is
// not and there is none). Its id is minted like any other, never derived
// from the name: a caller cannot name or take another's.
func (s *Service) ConversationWorkspace(c Caller, door, conversation string, create bool) (*Workspace, error) {
	if strings.TrimSpace(conversation) == "" {
		return nil, errs.OnField(errs.InvalidArguments, "conversation", "", "is empty; name the conversation whose files the code works on")
	}
	if len(conversation) > 256 {
		return nil, errs.OnField(errs.InvalidArguments, "conversation", "", "is longer than 256 bytes")
	}
	key := door + "\x00" + c.Principal + "\x00" + conversation
	// One conversation's first calls arrive together: they must make one
	// workspace, not two.
	s.convoMu.Lock()
	defer s.convoMu.Unlock()
	s.implicit.mu.Lock()
	sid := s.implicit.byConvo[key]
	s.implicit.mu.Unlock()
	if sid != "" {
		if ss, err := s.reg.Lookup(sid, c.Principal); err == nil {
			return wrap(ss), nil
		}
	}
	if !create {
		return nil, nil
	}
	w, _, err := s.OpenWorkspace(c, "")
	if err != nil {
		return nil, err
	}
	s.implicit.mu.Lock()
	s.implicit.byConvo[key] = w.ID()
	s.implicit.mu.Unlock()
	return w, nil
}

// forgetImplicit drops the names that pointed at a closed session.
func (s *Service) forgetImplicit(sid string) {
	s.implicit.mu.Lock()
	defer s.implicit.mu.Unlock()
	for k, v := range s.implicit.byMCP {
		if v == sid {
			delete(s.implicit.byMCP, k)
		}
	}
	for k, v := range s.implicit.byConvo {
		if v == sid {
			delete(s.implicit.byConvo, k)
		}
	}
}

// NewStorage makes a storage session for c (the LibreChat Code API's
// files, kept ttl idle; at most max such sessions, perCaller of them c's:
// past that c's least recently used one makes room): it is c's from the
// start.
func (s *Service) NewStorage(c Caller, ttl time.Duration, max, perCaller int) (*Workspace, error) {
	ss, err := s.reg.CreateStorage(ttl, max, perCaller, c.Principal)
	return wrap(ss), err
}

// CreateSession opens a workspace with a running interpreter for language
// (seed 001's create_session): memory, when set, bounds its interpreter;
// ttl is its idle lifetime.
func (s *Service) CreateSession(ctx context.Context, c Caller, r SessionRequest) (w *Workspace, resumed bool, err error) {
	if !s.Stateful(r.Language) {
		return nil, false, errs.New(errs.UnsupportedLang, "language %q has no persistent interpreter here (python, javascript)", r.Language)
	}
	var ss *sessions.Session
	switch {
	case r.Persist:
		if ss, resumed, err = s.persistentWorkspace(c, r.Name); err != nil {
			return nil, false, err
		}
	case r.Name != "":
		return nil, false, errs.OnField(errs.InvalidArguments, "persist", "", "a name is for a persistent workspace: pass persist: true with it (or no name)")
	default:
		if ss, err = s.newWorkspace(c); err != nil {
			return nil, false, err
		}
	}
	if r.Memory > 0 {
		// A pooled session's kernel has the operator's memory limit, not
		// the one asked for: it starts again with this one.
		s.closeKernels(ss.ID)
		s.kernels(ss.ID).setMemory(r.Memory)
	}
	ss.SetTTL(r.TTL)
	if _, _, err := s.kernelFor(ctx, ss, r.Language); err != nil {
		if !r.Persist {
			_ = s.reg.Close(ss.ID)
		}
		return nil, false, errs.New(errs.KernelUnavailable, "%v", err)
	}
	s.Audit(ss, map[string]any{"op": "create_session", "language": r.Language, "principal": c.Principal, "name": r.Name, "persist": r.Persist, "resumed": resumed})
	return wrap(ss), resumed, nil
}

// SessionRequest is what create_session asks for.
type SessionRequest struct {
	Language string
	Memory   int64         // the interpreter's memory limit (0: the operator's)
	TTL      time.Duration // idle time after which it closes (a persistent one is suspended)
	Name     string        // a persistent workspace's name
	Persist  bool          // the workspace outlives the server (see sessions/persist.go)
}

// persistentWorkspace is c's persistent workspace name: the open one, a
// suspended one resumed (resumed true), or a new one.
func (s *Service) persistentWorkspace(c Caller, name string) (*sessions.Session, bool, error) {
	s.callers.mu.Lock()
	defer s.callers.mu.Unlock()
	ss, created, err := s.reg.CreatePersistent(c.Principal, name)
	if err != nil {
		return nil, false, err
	}
	if created {
		if err := s.fullLocked(c, "destroy_session"); err != nil {
			_ = s.reg.Close(ss.ID)
			return nil, false, err
		}
	}
	s.claimedLocked(c, ss)
	return ss, ss.Resumed() && !created, nil
}

// Workspaces lists c's workspaces: its open sessions and its persistent
// workspaces (suspended ones too).
func (s *Service) Workspaces(c Caller) []sessions.WorkspaceInfo { return s.reg.Workspaces(c.Principal) }

// ExpiresAt is when w closes if it stays idle.
func (s *Service) ExpiresAt(w *Workspace) time.Time { return s.reg.ExpiresAt(w.ss) }
