package mcpserver

// Stateful workspaces (seed 001 §5-6): execute_code with `code` and
// `language` runs in a long-lived kernel of a data session, so variables
// and imports persist between calls. Without a session_id the call uses the
// caller's workspace: one data session per MCP session (stdio has one),
// created on first use and closed with the MCP session. "__stateless__"
// runs the code in a fresh sandbox instead.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/srt-mcp/srt-mcp/service"
)

// Stateless is the session_id that asks for a fresh, stateless run.
const Stateless = "__stateless__"

// handleCode is execute_code (and execute_code_async) with `code` and
// `language` (seed 001): a cell in the workspace's kernel (a language
// without one runs fresh in the workspace's files), or a stateless run.
func (s *Server) handleCode(ctx context.Context, req mcp.CallToolRequest, a execArgs, async bool) (*mcp.CallToolResult, error) {
	rt, err := s.svc.Runtime(a.Language)
	if err != nil {
		return toolErr(err), nil
	}
	timeout := 30 * time.Second
	if a.Timeout != nil {
		if *a.Timeout < 1 || *a.Timeout > 300 {
			return toolError("invalid_arguments", fmt.Sprintf("timeout %g is out of range: 1 to 300 seconds", *a.Timeout)), nil
		}
		timeout = time.Duration(*a.Timeout * float64(time.Second))
	} else if a.TimeoutSeconds != nil {
		timeout = time.Duration(*a.TimeoutSeconds * float64(time.Second))
	}
	c := callerOf(ctx)
	sr := service.Request{Op: "execute_code", Kind: "script", Caller: c, ByID: true, Language: rt.Language, Code: a.Code, Cell: true, Timeout: timeout}
	minted := false
	switch {
	case a.SessionID == Stateless:
		sr.Kind, sr.Cell = "stateless", false
	case a.SessionID == "":
		sr.Workspace, minted, err = s.svc.ImplicitWorkspace(c, true)
	default:
		sr.Workspace, err = s.svc.LookupWorkspace(c, a.SessionID)
	}
	if err != nil {
		return toolErr(err), nil
	}
	if rt.Stateful && sr.Cell {
		sr.Kind = "cell"
	}
	r, err := s.svc.Start(ctx, sr)
	if err != nil {
		if minted {
			_ = s.svc.CloseWorkspace(c, sr.Workspace.ID()) // a handle nobody was told of
		}
		return toolErr(err), nil
	}
	sid := Stateless
	if r.Workspace != nil {
		sid = r.Workspace.ID()
	}
	note := func(v map[string]any) {
		if minted {
			n, _ := v["note"].(string)
			v["note"] = strings.TrimSpace(n + " " + handleSentence(sid))
		}
	}
	wait := !async && (a.WaitForCompletion == nil || *a.WaitForCompletion)
	if !wait {
		v := s.codeResult(service.Result{ID: r.ID(), Snapshot: r.Exec.Snapshot(0), Note: r.Note}, sid, rt.Language)
		note(v)
		return reply(v, false), nil
	}
	res := s.finish(ctx, req, r)
	v := s.codeResult(res, sid, rt.Language)
	note(v)
	isErr := res.Snapshot.State == service.StateFailed || res.QuotaExceeded != ""
	out := reply(v, isErr)
	if r.Workspace != nil {
		out.Content = append(out.Content, s.artifactContent(ctx, r.Workspace, s.shownFiles(res.Artifacts))...)
	}
	return out, nil
}

// codeResult is seed 001's execute_code result (stdout, stderr, exit_code,
// execution_time_ms, truncated) plus seed 002's execution fields, whose
// output events are then the ones stdout and stderr do not already carry.
// exit_code is the program's; -1 for a timeout or a sandbox failure (then
// with error); 128+N for a run cancelled by signal N (130: an interrupted
// cell); 1 with compile_error for a failed compile step.
func (s *Server) codeResult(res service.Result, sessionID, language string) map[string]any {
	sn := res.Snapshot
	var events []service.Event
	for _, e := range sn.Events {
		if e.Type != service.EventStdout && e.Type != service.EventStderr {
			events = append(events, e)
		}
	}
	sn.Events = events
	r := s.result(sn)
	r["session_id"] = sessionID
	out := clipStreams(res.Stdout, res.StderrWithEnd(language), s.cfg.ReplyChars)
	r["stdout"], r["stderr"] = out.stdout, out.stderr
	if cut := out.note; cut != "" {
		cut += "get_execution_output with execution_id " + sn.ID + " and since_seq=0 pages through all of it"
		if events, ok := r["cut"].(string); ok {
			cut += "; " + events
		}
		r["cut"] = cut
	}
	r["execution_time_ms"] = float64(res.Duration())
	if sn.End != nil && sn.End.MaxRSSBytes > 0 {
		r["memory_used_bytes"] = sn.End.MaxRSSBytes
	}
	if c := res.ExitCode(); c != nil {
		r["exit_code"] = *c
	} else if sn.End != nil {
		r["exit_code"] = -1
	}
	if res.CompileFailed {
		r["exit_code"] = 1
		r["compile_error"] = true
	}
	if res.QuotaExceeded != "" {
		r["error"] = "quota_exceeded: " + res.QuotaExceeded
	}
	r["truncated"] = len(sn.Truncated) > 0 || sn.Dropped
	if res.Note != "" {
		r["note"] = res.Note
	}
	if len(res.Artifacts) > 0 {
		shown := s.shownFiles(res.Artifacts)
		r["artifacts"] = artifactList(shown)
		if more := len(res.Artifacts) - len(shown); more > 0 {
			r["more_artifacts"] = more // list_artifacts has them
		}
	}
	return r
}

// addWorkspaceTools adds seed 001's session tools.
func (s *Server) addWorkspaceTools() {
	s.add("list_runtimes", s.handleListRuntimes)
	s.add("create_session", s.handleCreateSession)
	s.add("list_workspaces", s.handleListWorkspaces)
	s.add("destroy_session", s.handleDestroySession)
	s.add("get_workspace_info", s.handleWorkspaceInfo)
	s.add("reset_workspace", s.handleResetWorkspace)
}

func (s *Server) handleListRuntimes(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	rts := []map[string]any{}
	for _, rt := range s.svc.Runtimes().All() {
		ok, why := s.svc.Available(rt)
		v := map[string]any{"language": rt.Language, "aliases": rt.Aliases, "stateful": rt.Stateful, "available": ok,
			"compiled": rt.Compile != ""}
		if ok {
			v["version"] = rt.Found
		} else {
			v["reason"] = why
		}
		rts = append(rts, v)
	}
	return reply(map[string]any{"runtimes": rts}, false), nil
}

func (s *Server) handleCreateSession(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		Language       string `json:"language"`
		MemoryLimitMB  *int   `json:"memory_limit_mb"`
		TimeoutSeconds *int   `json:"timeout_seconds"`
		Name           string `json:"name"`
		Persist        bool   `json:"persist"`
	}
	if err := req.BindArguments(&a); err != nil {
		return dataError("invalid_arguments", err.Error(), nil), nil
	}
	if !s.svc.Stateful(a.Language) {
		return dataError("unsupported_language", fmt.Sprintf("language %q has no persistent interpreter here (python, javascript)", a.Language), nil), nil
	}
	var memory int64
	if m := a.MemoryLimitMB; m != nil {
		if *m < 64 || *m > 1024 {
			return dataError("invalid_arguments", fmt.Sprintf("memory_limit_mb %d is out of range: 64 to 1024", *m), nil), nil
		}
		memory = int64(*m) << 20
	}
	ttl := 600 * time.Second
	if t := a.TimeoutSeconds; t != nil {
		if *t < 60 || *t > 3600 {
			return dataError("invalid_arguments", fmt.Sprintf("timeout_seconds %d is out of range: 60 to 3600", *t), nil), nil
		}
		ttl = time.Duration(*t) * time.Second
	}
	if a.Persist && a.Name == "" {
		return dataError("invalid_arguments", "persist needs a name: the handle to find the workspace again (create_session {name, persist: true} returns it after a restart, or on another replica)", nil), nil
	}
	ws, resumed, err := s.svc.CreateSession(ctx, callerOf(ctx), service.SessionRequest{Language: a.Language, Memory: memory, TTL: ttl, Name: a.Name, Persist: a.Persist})
	if err != nil {
		return fromErr(err), nil
	}
	v := map[string]any{"session_id": ws.ID(), "language": a.Language, "created_at": ws.Created().UTC().Format(time.RFC3339),
		"expires_at": s.svc.ExpiresAt(ws).UTC().Format(time.RFC3339)}
	if a.Persist {
		v["name"], v["persist"], v["resumed"] = a.Name, true, resumed
		v["note"] = fmt.Sprintf("after %s idle it is suspended, its files kept", ttl)
		if resumed {
			v["note"] = "resumed from storage: a new interpreter started, files are as they were"
		}
	}
	return reply(v, false), nil
}

func (s *Server) handleListWorkspaces(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	out := []map[string]any{}
	for _, w := range s.svc.Workspaces(callerOf(ctx)) {
		v := map[string]any{"session_id": w.ID, "persist": w.Persist, "state": w.State, "size_bytes": w.Bytes,
			"last_used": w.LastUsed.UTC().Format(time.RFC3339), "expires_at": w.Expires.UTC().Format(time.RFC3339)}
		if w.Name != "" {
			v["name"] = w.Name
		}
		out = append(out, v)
	}
	return reply(map[string]any{"workspaces": out}, false), nil
}

func (s *Server) handleDestroySession(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		SessionID string `json:"session_id"`
	}
	if err := req.BindArguments(&a); err != nil {
		return dataError("invalid_arguments", err.Error(), nil), nil
	}
	if err := s.svc.CloseWorkspace(callerOf(ctx), a.SessionID); err != nil {
		return fromErr(err), nil
	}
	return reply(map[string]any{"session_id": a.SessionID, "status": "destroyed"}, false), nil
}

// sessionOrWorkspace is the session named, or the caller's workspace
// (created only when create is set; nil when there is none).
//
// A sessionless caller has no workspace of its own: create mints a new
// one (minted), else there is none.
func (s *Server) sessionOrWorkspace(ctx context.Context, sid string, create bool) (ws *service.Workspace, minted bool, err error) {
	c := callerOf(ctx)
	if sid != "" {
		ws, err = s.svc.LookupWorkspace(c, sid)
		return ws, false, err
	}
	return s.svc.ImplicitWorkspace(c, create)
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
	ss, _, err := s.sessionOrWorkspace(ctx, a.SessionID, false)
	if err != nil {
		return fromErr(err), nil
	}
	if ss == nil {
		if callerOf(ctx).Session == "" {
			return reply(v, false), nil
		}
		return reply(v, false), nil
	}
	v["session_id"], v["created_at"] = ss.ID(), ss.Created().UTC().Format(time.RFC3339)
	info, err := s.svc.KernelInfo(ctx, ss, a.Language)
	if err != nil {
		return fromErr(err), nil
	}
	if info.Running {
		v["variables"], v["imports"], v["execution_count"], v["memory_used_bytes"] = nonNil(info.Variables), nonNil(info.Modules), info.ExecCount, info.Memory
		v["version"] = info.Version
	}
	return reply(v, false), nil
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
	if !s.svc.Stateful(a.Language) {
		return dataError("unsupported_language", fmt.Sprintf("language %q has no persistent interpreter here (python, javascript)", a.Language), nil), nil
	}
	if a.SessionID == "" && callerOf(ctx).Session == "" {
		return dataError("invalid_arguments", "session_id is required: without an MCP session there is no implicit workspace; pass the session_id an earlier call returned", nil), nil
	}
	ss, _, err := s.sessionOrWorkspace(ctx, a.SessionID, true)
	if err != nil {
		return fromErr(err), nil
	}
	if err := s.svc.ResetKernel(ctx, callerOf(ctx), ss, a.Language); err != nil {
		return fromErr(err), nil
	}
	return reply(map[string]any{"session_id": ss.ID(), "language": a.Language, "status": "reset"}, false), nil
}
