package service

import (
	"context"
	"sync"
	"time"

	"github.com/srt-mcp/srt-mcp/sessions"
)

// callers counts the sessions each caller opened, so that one caller
// cannot take every session of the server.
type callers struct {
	mu       sync.Mutex
	byCaller map[string]map[string]bool // caller -> its open session ids
	of       map[string]string          // session id -> caller
	bound    map[string]string          // session id -> the principal it belongs to
}

func newCallers() *callers {
	return &callers{byCaller: map[string]map[string]bool{}, of: map[string]string{}, bound: map[string]string{}}
}

func (c *callers) forget(sid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.bound, sid)
	if caller, ok := c.of[sid]; ok {
		delete(c.of, sid)
		delete(c.byCaller[caller], sid)
		if len(c.byCaller[caller]) == 0 {
			delete(c.byCaller, caller)
		}
	}
}

// Bind makes the session belong to principal, unless it already belongs
// to one: a principal's handles reach none of another's sessions (see
// MayUse).
func (s *Service) Bind(sid, principal string) {
	if principal == "" {
		return
	}
	c := s.callers
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.bound[sid]; !ok {
		c.bound[sid] = principal
	}
}

// MayUse refuses (as session_not_found: a handle of another principal's
// is no different from one that does not exist) a session bound to a
// principal other than this one.
func (s *Service) MayUse(sid, principal string) error {
	c := s.callers
	c.mu.Lock()
	p, ok := c.bound[sid]
	c.mu.Unlock()
	if ok && p != principal {
		return errorf("session_not_found", "No active session with id %s (session ids look like sess_0123456789ab)", sid)
	}
	return nil
}

// NewWorkspace opens a new workspace for caller (from the warm pool when
// one is ready): a sessionless caller's handle.
func (s *Service) NewWorkspace(caller string) (*sessions.Session, error) { return s.fromPool(caller) }

// Session returns the session id for caller, creating it when id is ""
// (a fresh id) or names no open session; created says which. A caller
// holds at most MaxSessionsPerCaller sessions at once (max_sessions).
func (s *Service) Session(caller, id string) (ss *sessions.Session, created bool, err error) {
	if id != "" {
		if ss, err := s.reg.Get(id); err == nil {
			return ss, false, nil
		}
	}
	c := s.callers
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.byCaller[caller]); caller != "" && n >= s.cfg.MaxSessionsPerCaller {
		return nil, false, errorf("max_sessions", "this caller already holds %d open sessions, the most one caller may (SANDBOX_MAX_SESSIONS_PER_CALLER); close one (close_session) or reuse its session_id", n)
	}
	ss, created, err = s.reg.GetOrCreate(id)
	if err != nil || !created {
		return ss, created, err
	}
	s.claimed(caller, ss)
	return ss, true, nil
}

// claimed records that caller opened ss; called with c.mu held.
func (s *Service) claimed(caller string, ss *sessions.Session) {
	if caller == "" {
		return
	}
	c := s.callers
	if c.byCaller[caller] == nil {
		c.byCaller[caller] = map[string]bool{}
	}
	c.byCaller[caller][ss.ID] = true
	c.of[ss.ID] = caller
}

// Get returns an open session.
func (s *Service) Get(id string) (*sessions.Session, error) { return s.reg.Get(id) }

// CloseSession closes a session: its runs are cancelled, its kernels and
// sandbox removed, its files deleted.
func (s *Service) CloseSession(id string) error { return s.reg.Close(id) }

// workspaces binds callers (MCP sessions) to the data session that is
// their workspace, and data sessions to their kernels.
type workspaces struct {
	mu      sync.Mutex
	byOwner map[string]string // caller -> data session id
	k       map[string]*sessionKernels
}

func newWorkspaces() *workspaces {
	return &workspaces{byOwner: map[string]string{}, k: map[string]*sessionKernels{}}
}

// Workspace returns caller's workspace: the data session bound to it,
// created (from the warm pool when one waits) on first use when create is
// set; nil, nil when there is none and create is not set.
func (s *Service) Workspace(caller string, create bool) (*sessions.Session, error) {
	w := s.ws
	w.mu.Lock()
	sid := w.byOwner[caller]
	w.mu.Unlock()
	if sid != "" {
		if ss, err := s.reg.Get(sid); err == nil {
			return ss, nil
		}
	}
	if !create {
		return nil, nil
	}
	ss, err := s.fromPool(caller)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.byOwner[caller] = ss.ID
	w.mu.Unlock()
	return ss, nil
}

// fromPool claims a warm session for caller, or creates a cold one.
func (s *Service) fromPool(caller string) (*sessions.Session, error) {
	c := s.callers
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.byCaller[caller]); caller != "" && n >= s.cfg.MaxSessionsPerCaller {
		return nil, errorf("max_sessions", "this caller already holds %d open sessions, the most one caller may (SANDBOX_MAX_SESSIONS_PER_CALLER); close one (destroy_session) or reuse its session_id", n)
	}
	ss := s.pool.take()
	if ss == nil {
		var err error
		if ss, _, err = s.reg.GetOrCreate(""); err != nil {
			return nil, err
		}
	}
	s.claimed(caller, ss)
	return ss, nil
}

// CloseWorkspace closes caller's workspace (the caller went away).
func (s *Service) CloseWorkspace(caller string) {
	s.ws.mu.Lock()
	sid := s.ws.byOwner[caller]
	delete(s.ws.byOwner, caller)
	s.ws.mu.Unlock()
	if sid != "" {
		_ = s.reg.Close(sid)
	}
}

// CreateSession opens a session with a running interpreter for language
// (seed 001's create_session): memory, when set, bounds its interpreter;
// ttl is its idle lifetime.
func (s *Service) CreateSession(ctx context.Context, caller, language string, memory int64, ttl time.Duration) (*sessions.Session, error) {
	if !s.Stateful(language) {
		return nil, errorf("unsupported_language", "language %q has no persistent interpreter here (python, javascript)", language)
	}
	ss, err := s.fromPool(caller)
	if err != nil {
		return nil, err
	}
	if memory > 0 {
		// A pooled session's kernel has the operator's memory limit, not
		// the one asked for: it starts again with this one.
		s.closeKernels(ss.ID)
		s.kernels(ss.ID).setMemory(memory)
	}
	ss.SetTTL(ttl)
	if _, _, err := s.kernelFor(ctx, ss, language); err != nil {
		_ = s.reg.Close(ss.ID)
		return nil, errorf("kernel_unavailable", "%v", err)
	}
	s.Audit(ss, map[string]any{"op": "create_session", "language": language})
	return ss, nil
}

// WriteFile stores an upload in the session's workspace (atomically, never
// through a link) if it fits the workspace quota; it returns the file's
// /mnt/data path.
func (s *Service) WriteFile(ss *sessions.Session, rel string, data []byte, overwrite bool) (string, error) {
	if q := s.cfg.WorkspaceQuota; q > 0 {
		u, err := ss.Usage()
		if err != nil {
			return "", err
		}
		old := int64(0)
		if f, info, err := ss.Open(rel); err == nil {
			old = info.Size
			f.Close()
		}
		if after := u.Bytes - old + int64(len(data)); after > q || u.Over {
			return "", errorf("quota_exceeded", "%s (%s) does not fit: the workspace holds %s of its %s quota (SANDBOX_WORKSPACE_QUOTA); delete files first",
				rel, human(int64(len(data))), human(u.Bytes), human(q))
		}
	}
	return ss.WriteFile(rel, data, overwrite)
}
