package mcpserver

// Stateful workspaces (seed 001 §5-6): execute_code with `code` and
// `language` runs in a long-lived kernel of a data session, so variables
// and imports persist between calls. Without a session_id the call uses the
// caller's workspace: one data session per MCP session (stdio has one),
// created on first use and closed with the MCP session. "__stateless__"
// runs the code in a fresh sandbox instead.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/srt-mcp/srt-mcp/executions"
	"github.com/srt-mcp/srt-mcp/kernel"
	"github.com/srt-mcp/srt-mcp/profiles"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// Stateless is the session_id that asks for a fresh, stateless run.
const Stateless = "__stateless__"

// workspaces binds MCP sessions to data sessions and data sessions to
// their kernels.
type workspaces struct {
	mu        sync.Mutex
	byOwner   map[string]string                    // owner -> data session id
	kernels   map[string]map[string]*kernel.Kernel // data session id -> language -> kernel
	restarted map[string]map[string]string         // data session id -> language -> why it restarted
	starting  map[string]map[string]*sync.Mutex    // one start at a time per session and language
	memory    map[string]int64                     // data session id -> memory limit of its kernels
}

func newWorkspaces() *workspaces {
	return &workspaces{byOwner: map[string]string{}, kernels: map[string]map[string]*kernel.Kernel{},
		restarted: map[string]map[string]string{}, starting: map[string]map[string]*sync.Mutex{}}
}

// workspaceFor returns the data session bound to owner, creating it.
func (s *Server) workspaceFor(owner string) (*sessions.Session, error) {
	w := s.ws
	w.mu.Lock()
	sid := w.byOwner[owner]
	w.mu.Unlock()
	if sid != "" {
		if ss, err := s.data.Sessions.Get(sid); err == nil {
			return ss, nil
		}
	}
	ss := s.pool.take()
	if ss == nil {
		var err error
		if ss, _, err = s.data.Sessions.GetOrCreate(""); err != nil {
			return nil, err
		}
	}
	w.mu.Lock()
	w.byOwner[owner] = ss.ID
	w.mu.Unlock()
	return ss, nil
}

// closeWorkspaceOf closes the data session bound to owner (its MCP session
// ended).
func (s *Server) closeWorkspaceOf(owner string) {
	if s.ws == nil || s.data == nil {
		return
	}
	s.ws.mu.Lock()
	sid := s.ws.byOwner[owner]
	delete(s.ws.byOwner, owner)
	s.ws.mu.Unlock()
	if sid != "" {
		_ = s.data.Sessions.Close(sid)
	}
}

// closeKernels ends a data session's kernels (the session ended).
func (s *Server) closeKernels(sid string) {
	w := s.ws
	w.mu.Lock()
	ks := w.kernels[sid]
	delete(w.kernels, sid)
	delete(w.restarted, sid)
	delete(w.starting, sid)
	delete(w.memory, sid)
	for owner, id := range w.byOwner {
		if id == sid {
			delete(w.byOwner, owner)
		}
	}
	w.mu.Unlock()
	for _, k := range ks {
		k.Close()
	}
}

// kernelSpec is the sandbox of a session's kernel: the data session's
// sandbox without a timeout (cells have their own).
func (s *Server) kernelSpec(ss *sessions.Session, argv []string) runner.Spec {
	spec := s.dataSpec(ss, argv)
	s.ws.mu.Lock()
	if m := s.ws.memory[ss.ID]; m > 0 && (spec.Policy.Limits.MaxMemoryBytes == 0 || m < spec.Policy.Limits.MaxMemoryBytes) {
		spec.Policy.Limits.MaxMemoryBytes = m
	}
	s.ws.mu.Unlock()
	spec.Policy.Limits.Timeout = 0
	spec.Policy.Limits.MaxOutputBytes = 0 // cells cap their own output
	spec.Stdin = runner.StdinPipe
	return spec
}

// kernelFor returns the session's running kernel for language, starting
// one if there is none (or it died). note says why an earlier one is gone.
func (s *Server) kernelFor(ctx context.Context, ss *sessions.Session, language string) (*kernel.Kernel, string, error) {
	w := s.ws
	w.mu.Lock()
	if w.starting[ss.ID] == nil {
		w.starting[ss.ID] = map[string]*sync.Mutex{}
	}
	lk := w.starting[ss.ID][language]
	if lk == nil {
		lk = &sync.Mutex{}
		w.starting[ss.ID][language] = lk
	}
	w.mu.Unlock()
	lk.Lock()
	defer lk.Unlock()
	w.mu.Lock()
	k := w.kernels[ss.ID][language]
	note := w.restarted[ss.ID][language]
	w.mu.Unlock()
	if k != nil && k.Alive() {
		return k, "", nil
	}
	if k != nil && note == "" {
		note = "the " + language + " kernel had exited (" + k.DeadReason() + "); a new one started without the old variables"
	}
	argv, err := kernel.Argv(language, s.interpreter(language))
	if err != nil {
		return nil, "", err
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	k, err = kernel.Start(sctx, language, s.kernelSpec(ss, argv), kernel.Starter(s.starter(ss)))
	if err != nil {
		return nil, "", err
	}
	w.mu.Lock()
	if w.kernels[ss.ID] == nil {
		w.kernels[ss.ID] = map[string]*kernel.Kernel{}
	}
	w.kernels[ss.ID][language] = k
	if w.restarted[ss.ID] != nil {
		delete(w.restarted[ss.ID], language)
	}
	w.mu.Unlock()
	return k, note, nil
}

// markRestarted records that a cell killed its kernel.
func (s *Server) markRestarted(sid, language, why string) {
	s.ws.mu.Lock()
	if s.ws.restarted[sid] == nil {
		s.ws.restarted[sid] = map[string]string{}
	}
	s.ws.restarted[sid][language] = why
	s.ws.mu.Unlock()
}

// runtimes is the language registry (discovered once).
func (s *Server) runtimes() *profiles.Runtimes {
	s.rtOnce.Do(func() {
		if s.cfg.Runtimes != nil {
			s.rts = s.cfg.Runtimes
			return
		}
		scratch := ""
		if s.data != nil && s.data.Sessions != nil {
			scratch = s.data.Sessions.StateDir()
		} else if c, err := runner.CacheRoot(""); err == nil {
			scratch = c
		}
		rts, err := profiles.DiscoverRuntimes(scratch)
		if err != nil {
			s.cfg.Logger.Error("runtimes", "error", err)
			rts = &profiles.Runtimes{}
		}
		s.rts = rts
	})
	return s.rts
}

// dockerLanguages are what the Docker backend's image runs.
var dockerLanguages = map[string]bool{"python": true, "bash": true}

func (s *Server) runtimeAvailable(rt *profiles.Runtime) bool {
	if s.data != nil && s.data.Backend != nil && s.data.Backend.Name() == "docker" && !dockerLanguages[rt.Language] {
		return false
	}
	return rt.Available
}

func (s *Server) unavailableReason(rt *profiles.Runtime) string {
	if s.data != nil && s.data.Backend != nil && s.data.Backend.Name() == "docker" && !dockerLanguages[rt.Language] {
		return "the Docker backend's image has Python and bash only; use --backend native for " + rt.Language
	}
	return rt.Reason
}

func (s *Server) availableLanguages() []string {
	var out []string
	for _, rt := range s.runtimes().All() {
		if s.runtimeAvailable(rt) {
			out = append(out, rt.Language)
		}
	}
	return out
}

// interpreter is the program that runs language's kernel.
func (s *Server) interpreter(language string) string {
	if language == "javascript" {
		return s.data.Node
	}
	return s.data.Python
}

// validLanguage reports whether language has a kernel here.
func (s *Server) validLanguage(language string) bool {
	rt, ok := s.runtimes().Get(language)
	return ok && rt.Stateful && s.runtimeAvailable(rt)
}

// handleCode is execute_code (and execute_code_async) with `code` and
// `language` (seed 001): a cell in the workspace's kernel, or a fresh
// stateless run.
func (s *Server) handleCode(ctx context.Context, req mcp.CallToolRequest, a execArgs, async bool) (*mcp.CallToolResult, error) {
	if s.data == nil {
		return toolError("invalid_arguments", "this server has no workspaces; use command"), nil
	}
	if strings.TrimSpace(a.Language) == "" {
		return toolError("invalid_arguments", "language is required with code (list_runtimes names them); or give a shell command instead of code"), nil
	}
	rt, ok := s.runtimes().Get(a.Language)
	if !ok {
		return toolError("unsupported_language", fmt.Sprintf("language %q is not one srt-mcp knows; list_runtimes names them (%s)", a.Language, strings.Join(s.availableLanguages(), ", "))), nil
	}
	if !s.runtimeAvailable(rt) {
		return toolError("runtime_unavailable", fmt.Sprintf("%s is not available here: %s", rt.Language, s.unavailableReason(rt))), nil
	}
	lang := rt.Language
	timeout := 30 * time.Second
	if a.Timeout != nil {
		if *a.Timeout < 1 || *a.Timeout > 300 {
			return toolError("invalid_arguments", fmt.Sprintf("timeout %g is out of range: 1 to 300 seconds", *a.Timeout)), nil
		}
		timeout = time.Duration(*a.Timeout * float64(time.Second))
	} else if a.TimeoutSeconds != nil {
		timeout = time.Duration(*a.TimeoutSeconds * float64(time.Second))
	}
	owner := ownerFrom(ctx)
	if a.SessionID == Stateless {
		return s.runStateless(ctx, req, a, rt, timeout, owner, async)
	}
	var ss *sessions.Session
	var err error
	if a.SessionID == "" {
		ss, err = s.workspaceFor(owner)
	} else {
		ss, err = s.data.Sessions.Get(a.SessionID)
	}
	if err == nil {
		err = ss.Acquire()
	}
	if err != nil {
		var se *sessions.Error
		if errors.As(err, &se) {
			return toolError(se.Code, se.Message), nil
		}
		return toolError("internal_error", err.Error()), nil
	}
	var cell *kernel.Cell
	var note string
	var e *executions.Execution
	before := ss.Listing()
	if rt.Stateful {
		var k *kernel.Kernel
		k, note, err = s.kernelFor(ctx, ss, lang)
		if err != nil {
			ss.Release()
			var re *runner.Error
			if errors.As(err, &re) {
				return toolError(re.Code, re.Message), nil
			}
			return toolError("kernel_unavailable", err.Error()), nil
		}
		e, err = s.mgr.StartWith(owner, firstLine(a.Code), runner.Spec{}, func(_ runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
			c, err := kernel.RunCell(k, a.Code, kernel.CellOptions{Timeout: timeout, MaxOutput: s.data.MaxOutputBytes}, sink)
			cell = c
			return c, err
		})
	} else {
		// A language without a kernel: compiled (if it needs it) and run in
		// the session's sandbox, with its files.
		e, err = s.mgr.StartWith(owner, firstLine(a.Code), s.scriptSpec(ss, rt, a.Code, timeout), s.starter(ss))
	}
	if err == nil {
		kind := "script"
		if rt.Stateful {
			kind = "cell"
		}
		s.observe(kind, lang, e)
	}
	if err != nil {
		ss.Release()
		var le *executions.LimitError
		if errors.As(err, &le) {
			return toolError("too_many_executions", err.Error()), nil
		}
		return toolError("internal_error", err.Error()), nil
	}
	released := s.holdSession(ss, e, map[string]any{"op": "execute_code", "language": lang, "code_bytes": len(a.Code), "code_sha256": sha([]byte(a.Code))},
		func() {
			if cell != nil && cell.Restarted {
				s.markRestarted(ss.ID, lang, "the previous cell ended by restarting the kernel: variables and imports are gone")
			}
		})
	wait := !async && (a.WaitForCompletion == nil || *a.WaitForCompletion)
	if !wait {
		sn := e.Snapshot(0)
		r := codeResult(sn, ss.ID, note)
		return structured(r, "started execution "+e.ID+" in session "+ss.ID+"; poll it with get_execution_output", false), nil
	}
	sn := s.waitWithProgress(ctx, req, e)
	if ctx.Err() != nil && !sn.State.Done() {
		_ = e.Cancel(true)
	}
	if sn.State.Done() {
		<-released
	}
	r := codeResult(sn, ss.ID, note)
	markCompileError(r, sn, rt)
	if sn.State.Done() && sn.End != nil && sn.End.Type == runner.EventExit && sn.End.ExitCode == 0 {
		if arts := s.artifactsSince(ss, before); len(arts) > 0 {
			r["artifacts"] = arts
		}
	}
	out := structured(r, codeSummary(r), false)
	if arts, ok := r["artifacts"].([]map[string]any); ok {
		out.Content = append(out.Content, s.artifactContent(ss, map[string]any{"artifacts": arts})...)
	}
	return out, nil
}

// runStateless runs the code once in a fresh sandbox (no kernel, no
// session), with seed 001's result.
func (s *Server) runStateless(ctx context.Context, req mcp.CallToolRequest, a execArgs, rt *profiles.Runtime, timeout time.Duration, owner string, async bool) (*mcp.CallToolResult, error) {
	spec := runner.Spec{Version: runner.SpecVersion, Argv: rt.Argv(a.Code), Cwd: runner.SandboxTmp, PrivateCwd: true,
		Home: s.cfg.Home, Policy: s.dataPolicy(timeout), Stdin: runner.StdinNull, Hide: s.cfg.Hide, Env: map[string]string{"MPLBACKEND": "Agg"}}
	e, err := s.mgr.Start(owner, firstLine(a.Code), spec)
	if err != nil {
		return toolError("too_many_executions", err.Error()), nil
	}
	s.observe("stateless", rt.Language, e)
	if async || (a.WaitForCompletion != nil && !*a.WaitForCompletion) {
		r := codeResult(e.Snapshot(0), Stateless, "")
		return structured(r, "started execution "+e.ID+"; poll it with get_execution_output", false), nil
	}
	sn := s.waitWithProgress(ctx, req, e)
	if ctx.Err() != nil && !sn.State.Done() {
		_ = e.Cancel(true)
	}
	r := codeResult(sn, Stateless, "")
	markCompileError(r, sn, rt)
	return structured(r, codeSummary(r), false), nil
}

// markCompileError reports a failed compile step as such.
func markCompileError(r map[string]any, sn executions.Snapshot, rt *profiles.Runtime) {
	if sn.End != nil && sn.End.Type == runner.EventExit && rt.CompileFailed(sn.End.ExitCode) {
		r["exit_code"] = 1
		r["compile_error"] = true
		r["stderr"] = strings.TrimRight(r["stderr"].(string), "\n") + "\n" + rt.Language + ": compilation failed"
	}
}

// codeResult is seed 001's execute_code result (stdout, stderr, exit_code,
// execution_time_ms, truncated) plus seed 002's execution fields.
func codeResult(sn executions.Snapshot, sessionID, note string) map[string]any {
	r := result(sn)
	stdout, stderr := outputs(sn)
	r["session_id"] = sessionID
	r["stdout"] = toValidUTF8(string(stdout))
	if sn.End != nil {
		r["execution_time_ms"] = float64(sn.End.DurationMS)
		if sn.End.MaxRSSBytes > 0 {
			r["memory_used_bytes"] = sn.End.MaxRSSBytes
		}
		switch sn.End.Type {
		case runner.EventTimeout:
			r["exit_code"] = -1
			msg := fmt.Sprintf("Execution timed out after %g seconds", sn.End.TimeoutSeconds)
			if sn.End.Message != "" {
				msg += "; " + sn.End.Message
			}
			stderr = append(stderr, []byte(msg)...)
		case runner.EventCancelled:
			r["exit_code"] = -1
			stderr = append(stderr, []byte("Execution was cancelled")...)
			if sn.End.Message != "" {
				stderr = append(stderr, []byte("; "+sn.End.Message)...)
			}
		case runner.EventError:
			r["exit_code"] = -1
			stderr = append(stderr, []byte(sn.End.ErrCode+": "+sn.End.Message)...)
		}
	} else {
		r["execution_time_ms"] = float64(0)
	}
	r["stderr"] = toValidUTF8(string(stderr))
	r["truncated"] = len(sn.Truncated) > 0 || sn.Dropped
	if note != "" {
		r["note"] = note
	}
	return r
}

func codeSummary(r map[string]any) string {
	var b strings.Builder
	if n, ok := r["note"].(string); ok {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	if s := r["stdout"].(string); s != "" {
		b.WriteString(s)
	}
	if s := r["stderr"].(string); s != "" {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	if b.Len() == 0 {
		fmt.Fprintf(&b, "(no output; exit_code %v)", r["exit_code"])
	}
	return b.String()
}

func firstLine(code string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(code), "\n")
	if len(line) > 80 {
		line = line[:80] + "..."
	}
	return line
}

// addWorkspaceTools adds seed 001's session tools.
func (s *Server) addWorkspaceTools() {
	add := func(name, title, desc, schema string, readOnly, destructive, idempotent bool, h func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error)) {
		t := mcp.NewToolWithRawSchema(name, desc, json.RawMessage(schema))
		t.Title = title
		annotations(title, readOnly, destructive, idempotent, false)(&t)
		s.mcp.AddTool(t, h)
	}
	add("list_runtimes", "List available runtimes", "List the languages execute_code runs, with version, whether state persists between calls, and why a runtime is unavailable.",
		`{"type": "object", "properties": {}, "additionalProperties": false}`, true, false, true, s.handleListRuntimes)
	add("create_session", "Create an execution session", "Create a stateful session explicitly (execute_code without session_id already uses this connection's workspace). Variables and imports persist across execute_code calls with its session_id; its files live in /mnt/data.",
		`{"type": "object", "properties": {
  "language": {"type": "string", "enum": ["python", "javascript"], "description": "Language of the session's interpreter."},
  "memory_limit_mb": {"type": "integer", "minimum": 64, "maximum": 1024, "description": "Memory limit of the interpreter in MB (default: the operator's)."},
  "timeout_seconds": {"type": "integer", "minimum": 60, "maximum": 3600, "default": 600, "description": "Idle time after which the session is destroyed."}},
  "required": ["language"], "additionalProperties": false}`, false, false, false, s.handleCreateSession)
	add("destroy_session", "Destroy an execution session", "Destroy a session: its interpreter, runs and files.",
		`{"type": "object", "properties": {"session_id": {"type": "string", "description": "Session to destroy."}}, "required": ["session_id"], "additionalProperties": false}`,
		false, true, true, s.handleDestroySession)
	add("get_workspace_info", "Get workspace information", "The variables, imported modules, execution count and memory of a session's interpreter (default: this connection's workspace), read from the running interpreter itself.",
		`{"type": "object", "properties": {"session_id": {"type": "string", "description": "A session; omit for this connection's workspace."},
  "language": {"type": "string", "enum": ["python", "javascript"], "default": "python"}}, "additionalProperties": false}`, true, false, true, s.handleWorkspaceInfo)
	add("reset_workspace", "Reset workspace", "Clear a workspace's variables and imports (a fresh interpreter); its files in /mnt/data stay.",
		`{"type": "object", "properties": {"language": {"type": "string", "enum": ["python", "javascript"], "description": "Language of the new interpreter (default: python)."},
  "session_id": {"type": "string", "description": "A session; omit for this connection's workspace."}}, "additionalProperties": false}`, false, true, true, s.handleResetWorkspace)
}

func (s *Server) handleListRuntimes(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	rts := []map[string]any{}
	var lines []string
	for _, rt := range s.runtimes().All() {
		v := map[string]any{"language": rt.Language, "aliases": rt.Aliases, "stateful": rt.Stateful, "available": s.runtimeAvailable(rt),
			"compiled": rt.Compile != ""}
		if s.runtimeAvailable(rt) {
			v["version"] = rt.Found
		} else {
			v["reason"] = s.unavailableReason(rt)
		}
		rts = append(rts, v)
		state := "available"
		if !s.runtimeAvailable(rt) {
			state = "unavailable: " + s.unavailableReason(rt)
		}
		lines = append(lines, fmt.Sprintf("%s (%s): %s", rt.Language, rt.Found, state))
	}
	return mcp.NewToolResultStructured(map[string]any{"runtimes": rts}, strings.Join(lines, "\n")), nil
}

func (s *Server) handleCreateSession(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		Language       string `json:"language"`
		MemoryLimitMB  *int   `json:"memory_limit_mb"`
		TimeoutSeconds *int   `json:"timeout_seconds"`
	}
	if err := req.BindArguments(&a); err != nil {
		return dataError("invalid_arguments", err.Error(), nil), nil
	}
	if !s.validLanguage(a.Language) {
		return dataError("unsupported_language", fmt.Sprintf("language %q has no persistent interpreter here (python, javascript)", a.Language), nil), nil
	}
	if m := a.MemoryLimitMB; m != nil && (*m < 64 || *m > 1024) {
		return dataError("invalid_arguments", fmt.Sprintf("memory_limit_mb %d is out of range: 64 to 1024", *m), nil), nil
	}
	ttl := 600 * time.Second
	if t := a.TimeoutSeconds; t != nil {
		if *t < 60 || *t > 3600 {
			return dataError("invalid_arguments", fmt.Sprintf("timeout_seconds %d is out of range: 60 to 3600", *t), nil), nil
		}
		ttl = time.Duration(*t) * time.Second
	}
	ss := s.pool.take()
	if ss == nil || a.MemoryLimitMB != nil {
		if ss != nil {
			_ = s.data.Sessions.Close(ss.ID) // its kernel has the operator's memory limit, not the one asked for
		}
		var err error
		if ss, _, err = s.data.Sessions.GetOrCreate(""); err != nil {
			return fromErr(err), nil
		}
	}
	ss.SetTTL(ttl)
	if a.MemoryLimitMB != nil {
		s.ws.mu.Lock()
		if s.ws.memory == nil {
			s.ws.memory = map[string]int64{}
		}
		s.ws.memory[ss.ID] = int64(*a.MemoryLimitMB) << 20
		s.ws.mu.Unlock()
	}
	if _, _, err := s.kernelFor(ctx, ss, a.Language); err != nil {
		_ = s.data.Sessions.Close(ss.ID)
		return dataError("kernel_unavailable", err.Error(), nil), nil
	}
	s.audit(ss, map[string]any{"op": "create_session", "language": a.Language})
	v := map[string]any{"session_id": ss.ID, "language": a.Language, "created_at": ss.Created.UTC().Format(time.RFC3339),
		"expires_at": s.data.Sessions.ExpiresAt(ss).UTC().Format(time.RFC3339)}
	return mcp.NewToolResultStructured(v, fmt.Sprintf("session %s (%s) created; it expires after %s idle", ss.ID, a.Language, ttl)), nil
}

func (s *Server) handleDestroySession(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		SessionID string `json:"session_id"`
	}
	if err := req.BindArguments(&a); err != nil {
		return dataError("invalid_arguments", err.Error(), nil), nil
	}
	if err := s.data.Sessions.Close(a.SessionID); err != nil {
		return fromErr(err), nil
	}
	return mcp.NewToolResultStructured(map[string]any{"session_id": a.SessionID, "status": "destroyed"}, "session "+a.SessionID+" destroyed"), nil
}

// sessionOrWorkspace is the session named, or the caller's workspace
// (created only when create is set).
func (s *Server) sessionOrWorkspace(ctx context.Context, sid string, create bool) (*sessions.Session, error) {
	if sid != "" {
		return s.data.Sessions.Get(sid)
	}
	owner := ownerFrom(ctx)
	if !create {
		s.ws.mu.Lock()
		sid = s.ws.byOwner[owner]
		s.ws.mu.Unlock()
		if sid == "" {
			return nil, nil
		}
		return s.data.Sessions.Get(sid)
	}
	return s.workspaceFor(owner)
}

func (s *Server) handleWorkspaceInfo(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		SessionID string `json:"session_id"`
		Language  string `json:"language"`
	}
	if err := req.BindArguments(&a); err != nil {
		return dataError("invalid_arguments", err.Error(), nil), nil
	}
	if a.Language == "" {
		a.Language = "python"
	}
	v := map[string]any{"session_id": "", "language": a.Language, "variables": []string{}, "imports": []string{},
		"execution_count": 0, "memory_used_bytes": 0}
	ss, err := s.sessionOrWorkspace(ctx, a.SessionID, false)
	if err != nil {
		return fromErr(err), nil
	}
	if ss == nil {
		return mcp.NewToolResultStructured(v, "no workspace yet: the first execute_code with code starts one"), nil
	}
	v["session_id"], v["created_at"] = ss.ID, ss.Created.UTC().Format(time.RFC3339)
	s.ws.mu.Lock()
	k := s.ws.kernels[ss.ID][a.Language]
	s.ws.mu.Unlock()
	if k != nil && k.Alive() {
		ictx, cancel := context.WithTimeout(ctx, 3*time.Second)
		info, err := k.Info(ictx)
		cancel()
		if err != nil {
			return dataError("kernel_busy", "the interpreter is running a cell; ask again when it is done ("+err.Error()+")", nil), nil
		}
		v["variables"], v["imports"], v["execution_count"], v["memory_used_bytes"] = nonNil(info.Variables), nonNil(info.Modules), info.ExecCount, info.Memory
		v["version"] = k.Version
	}
	return mcp.NewToolResultStructured(v, fmt.Sprintf("session %s: variables %v, imports %v, %v cells run", ss.ID, v["variables"], v["imports"], v["execution_count"])), nil
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

func (s *Server) handleResetWorkspace(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		SessionID string `json:"session_id"`
		Language  string `json:"language"`
	}
	if err := req.BindArguments(&a); err != nil {
		return dataError("invalid_arguments", err.Error(), nil), nil
	}
	if a.Language == "" {
		a.Language = "python"
	}
	if !s.validLanguage(a.Language) {
		return dataError("unsupported_language", fmt.Sprintf("language %q has no persistent interpreter here (python, javascript)", a.Language), nil), nil
	}
	ss, err := s.sessionOrWorkspace(ctx, a.SessionID, true)
	if err != nil {
		return fromErr(err), nil
	}
	if err := ss.Acquire(); err != nil {
		return fromErr(err), nil
	}
	defer ss.Release()
	s.ws.mu.Lock()
	old := s.ws.kernels[ss.ID]
	delete(s.ws.kernels, ss.ID)
	delete(s.ws.restarted, ss.ID)
	s.ws.mu.Unlock()
	for _, k := range old {
		k.Close()
	}
	if _, _, err := s.kernelFor(ctx, ss, a.Language); err != nil {
		return dataError("kernel_unavailable", err.Error(), nil), nil
	}
	s.audit(ss, map[string]any{"op": "reset_workspace", "language": a.Language})
	return mcp.NewToolResultStructured(map[string]any{"session_id": ss.ID, "language": a.Language, "status": "reset"},
		"workspace "+ss.ID+" reset: a fresh "+a.Language+" interpreter; files in /mnt/data are kept"), nil
}
