package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/srt-mcp/srt-mcp/service"
)

// execArgs are execute_code's and execute_code_async's arguments (seed 002).
type execArgs struct {
	Command           string            `json:"command"`
	TimeoutSeconds    *float64          `json:"timeout_seconds,omitempty"`
	Interactive       bool              `json:"interactive,omitempty"`
	WorkingDirectory  string            `json:"working_directory,omitempty"`
	Environment       map[string]string `json:"environment,omitempty"`
	SandboxConfig     *sandboxConfig    `json:"sandbox_config,omitempty"`
	WaitForCompletion *bool             `json:"wait_for_completion,omitempty"`
	SessionID         string            `json:"session_id,omitempty"`
	// seed 001: code in a language, run in the workspace's kernel.
	Code     string   `json:"code,omitempty"`
	Language string   `json:"language,omitempty"`
	Timeout  *float64 `json:"timeout,omitempty"`
}

type sandboxConfig struct {
	Network     *service.Network     `json:"network,omitempty"`
	Filesystem  *service.Filesystem  `json:"filesystem,omitempty"`
	Credentials *service.Credentials `json:"credentials,omitempty"`
}

// executionTools are seed 002's tools, whose errors keep the shape of an
// execution result (execution_id, status "failed", output, error).
var executionTools = map[string]bool{"execute_code": true, "execute_code_async": true, "get_execution_output": true,
	"send_stdin": true, "cancel_execution": true, "list_executions": true, "get_execution_status": true}

// addExecTools (re)registers the two tools whose description names the
// credentials the operator offers: on start and at every settings reload.
func (s *Server) addExecTools(ceiling service.Policy) {
	creds := ""
	if o := service.Offered(ceiling); o != "" {
		creds = " Credentials (sandbox_config.credentials; the sandbox sees stand-ins): " + o + "."
	}
	s.mcp.AddTool(s.tool("execute_code", creds), s.handleExecute(false))
	s.mcp.AddTool(s.tool("execute_code_async", creds), s.handleExecute(true))
}

func (s *Server) addTools() {
	s.addExecTools(s.svc.Ceiling())
	s.svc.WatchCeiling(s.addExecTools)
	s.add("get_execution_output", s.handleOutput)
	s.add("send_stdin", s.handleStdin)
	s.add("cancel_execution", s.handleCancel)
	s.add("list_executions", s.handleList)
	s.add("get_execution_status", s.handleStatus)
}

// exitCode is the end's exit status as a shell reports it: the
// command's own, -1 for a timeout, 128+N for a run cancelled by signal N,
// null while running or when the sandbox failed.
func exitCode(sn service.Snapshot) *int { return service.ExitCode(sn.End) }

// result is an execution's reply: its state and its events after the
// reply's since, as many as the reply's output bound holds.
func (s *Server) result(sn service.Snapshot) map[string]any {
	out, next, cut := pageEvents(sn.Events, sn.NextSeq, s.cfg.ReplyChars)
	if out == nil {
		out = []service.Event{}
	}
	r := map[string]any{
		"execution_id": sn.ID,
		"status":       sn.State.Status(),
		"exit_code":    exitCode(sn),
		"output":       out,
		"next_seq":     next,
	}
	if cut != "" {
		r["cut"] = cut
	}
	if len(sn.Truncated) > 0 || sn.Dropped {
		tr := append([]string(nil), sn.Truncated...)
		if sn.Dropped {
			tr = append(tr, "events")
		}
		r["truncated"] = tr
	}
	if sn.End != nil && sn.End.Type == service.EventError {
		r["error"] = sn.End.ErrCode + ": " + sn.End.Message
	}
	return r
}

func toolError(code, msg string) *mcp.CallToolResult {
	return reply(map[string]any{"execution_id": "", "status": "failed", "output": []any{}, "error": code + ": " + msg}, true)
}

func (s *Server) handleExecute(async bool) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a execArgs
		if err := req.BindArguments(&a); err != nil {
			return toolError("invalid_arguments", err.Error()), nil
		}
		if a.Code != "" || a.Language != "" {
			if a.Command != "" {
				return toolError("invalid_arguments", "give either command (a shell command) or code with language, not both"), nil
			}
			if strings.TrimSpace(a.Code) == "" {
				return toolError("invalid_arguments", "code is empty; give the source to run"), nil
			}
			return s.handleCode(ctx, req, a, async)
		}
		if strings.TrimSpace(a.Command) == "" {
			return toolError("invalid_arguments", "command is empty; give the shell command to run (or code with language)"), nil
		}
		ca := service.CommandArgs{Command: a.Command, Cwd: a.WorkingDirectory, Env: a.Environment, Interactive: a.Interactive,
			Timeout: a.TimeoutSeconds, InSession: a.SessionID != ""}
		if a.SandboxConfig != nil {
			ca.Network, ca.Filesystem, ca.Credentials = a.SandboxConfig.Network, a.SandboxConfig.Filesystem, a.SandboxConfig.Credentials
		}
		c := callerOf(ctx)
		var ws *service.Workspace
		if a.SessionID != "" {
			// Checked before a session is made for it (Start checks it
			// again, as it does for a call without one).
			if _, err := s.svc.CommandSpec(ca); err != nil {
				return toolErr(err), nil
			}
			var err error
			if ws, _, err = s.svc.OpenWorkspace(c, a.SessionID); err != nil {
				return toolErr(err), nil
			}
		}
		r, err := s.svc.Start(ctx, service.Request{Op: "execute_code", Kind: "command", Caller: c, Workspace: ws, ByID: true, Label: a.Command, Command: &ca})
		if err != nil {
			return toolErr(err), nil
		}
		wait := !async && (a.WaitForCompletion == nil || *a.WaitForCompletion)
		if !wait {
			sn := r.Exec.Snapshot(0)
			return reply(map[string]any{"execution_id": r.ID(), "status": sn.State.Status(), "exit_code": exitCode(sn),
				"output": []any{}, "next_seq": 0}, false), nil
		}
		res := s.finish(ctx, req, r)
		sn := res.Snapshot
		v, isErr := s.result(sn), sn.State == service.StateFailed
		if res.QuotaExceeded != "" {
			v["error"] = "quota_exceeded: " + res.QuotaExceeded
			isErr = true
		}
		return reply(v, isErr), nil
	}
}

// finish waits for a run, sending its output as progress notifications
// when the request asks for them. If the client goes away first, the run
// is stopped the gentle way (an interrupt, SIGTERM, then a kill).
func (s *Server) finish(ctx context.Context, req mcp.CallToolRequest, r *service.Run) service.Result {
	s.taskStarted(ctx, r) // a task-augmented call is answered now (tasks.go)
	s.waitWithProgress(ctx, req, r.Exec)
	return r.Wait(ctx)
}

// toolErr is a seed 002 error reply for any error of the service.
func toolErr(err error) *mcp.CallToolResult {
	code, msg := service.CodeOf(err)
	return toolError(code, msg)
}

// waitWithProgress waits for the end of e; when the request carries a
// progress token it sends the output as it comes, batched at most every
// ProgressInterval. The final result always has the complete output.
func (s *Server) waitWithProgress(ctx context.Context, req mcp.CallToolRequest, e *service.Execution) {
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	srv := server.ServerFromContext(ctx)
	if token == nil || srv == nil {
		e.Wait(ctx, 0, true)
		return
	}
	var sent uint64
	progress := 0
	tick := time.NewTicker(s.cfg.ProgressInterval)
	defer tick.Stop()
	for {
		sn := e.Snapshot(sent)
		var msg strings.Builder
		for _, ev := range sn.Events {
			if ev.Type == service.EventStdout || ev.Type == service.EventStderr {
				msg.Write(ev.Data)
			}
		}
		if msg.Len() > 0 && !sn.State.Done() {
			progress++
			text := service.ValidUTF8(msg.String())
			if len(text) > 16<<10 {
				text = text[len(text)-16<<10:]
			}
			err := srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
				"progressToken": token, "progress": progress, "message": text,
			})
			if err == nil {
				sent = sn.NextSeq
			}
		}
		if sn.State.Done() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

type idArgs struct {
	ExecutionID string `json:"execution_id"`
}

func (s *Server) lookup(ctx context.Context, id string) (*service.Execution, *mcp.CallToolResult) {
	e, err := s.svc.Execution(callerOf(ctx), id)
	if err != nil {
		return nil, toolErr(err)
	}
	return e, nil
}

func (s *Server) handleOutput(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		ExecutionID string   `json:"execution_id"`
		Wait        bool     `json:"wait"`
		WaitFor     string   `json:"wait_for"`
		WaitTimeout *float64 `json:"wait_timeout_seconds"`
		SinceSeq    *uint64  `json:"since_seq"`
		LastEventID any      `json:"last_event_id"`
	}
	if err := req.BindArguments(&a); err != nil {
		return toolError("invalid_arguments", err.Error()), nil
	}
	e, errRes := s.lookup(ctx, a.ExecutionID)
	if errRes != nil {
		return errRes, nil
	}
	var since uint64
	if a.SinceSeq != nil {
		since = *a.SinceSeq
	} else if a.LastEventID != nil {
		var n uint64
		if _, err := fmt.Sscan(fmt.Sprint(a.LastEventID), &n); err != nil {
			return toolError("invalid_arguments", "last_event_id must be an event seq number"), nil
		}
		since = n
	}
	var sn service.Snapshot
	if a.Wait {
		d := 30 * time.Second
		if a.WaitTimeout != nil && *a.WaitTimeout > 0 {
			d = time.Duration(*a.WaitTimeout * float64(time.Second))
		}
		if d > s.cfg.MaxWait {
			d = s.cfg.MaxWait
		}
		wctx, cancel := context.WithTimeout(ctx, d)
		sn = e.Wait(wctx, since, a.WaitFor != "output")
		cancel()
	} else {
		sn = e.Snapshot(since)
	}
	return reply(s.result(sn), false), nil
}

func (s *Server) handleStdin(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		ExecutionID string `json:"execution_id"`
		InputData   string `json:"input_data"`
		CloseStdin  bool   `json:"close_stdin"`
	}
	if err := req.BindArguments(&a); err != nil {
		return toolError("invalid_arguments", err.Error()), nil
	}
	if a.InputData == "" && !a.CloseStdin {
		return toolError("invalid_arguments", "nothing to send: give input_data (include \"\\n\" to end a line), close_stdin=true, or both"), nil
	}
	e, errRes := s.lookup(ctx, a.ExecutionID)
	if errRes != nil {
		return errRes, nil
	}
	if a.InputData != "" {
		if err := e.SendStdin([]byte(a.InputData)); err != nil {
			if errors.Is(err, service.ErrFinished) {
				return toolErr(err), nil
			}
			return toolError("stdin_failed", err.Error()), nil
		}
	}
	if a.CloseStdin {
		if err := e.CloseStdin(); err != nil && !errors.Is(err, service.ErrFinished) {
			return toolError("stdin_failed", err.Error()), nil
		}
	}
	v := map[string]any{"execution_id": e.ID(), "status": e.State().Status(), "bytes_written": len(a.InputData), "stdin_closed": a.CloseStdin}
	return reply(v, false), nil
}

func (s *Server) handleCancel(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		ExecutionID string `json:"execution_id"`
		Force       bool   `json:"force"`
	}
	if err := req.BindArguments(&a); err != nil {
		return toolError("invalid_arguments", err.Error()), nil
	}
	e, errRes := s.lookup(ctx, a.ExecutionID)
	if errRes != nil {
		return errRes, nil
	}
	if err := e.Cancel(a.Force); err != nil && !errors.Is(err, service.ErrFinished) {
		return toolError("cancel_failed", err.Error()), nil
	}
	wctx, cancel := context.WithTimeout(ctx, service.CancelGrace+3*time.Second)
	sn := e.Wait(wctx, 0, true)
	cancel()
	return reply(statusMap(sn), false), nil
}

func statusMap(sn service.Snapshot) map[string]any {
	v := map[string]any{"execution_id": sn.ID, "status": sn.State.Status(), "exit_code": exitCode(sn),
		"command": sn.Label, "created_at": sn.Created.UTC().Format(time.RFC3339Nano), "events": int(sn.NextSeq)}
	if sn.End != nil {
		v["duration_ms"] = sn.End.DurationMS
		if sn.End.Type == service.EventError {
			v["error"] = sn.End.ErrCode + ": " + sn.End.Message
		}
	}
	if len(sn.Truncated) > 0 || sn.Dropped {
		tr := append([]string(nil), sn.Truncated...)
		if sn.Dropped {
			tr = append(tr, "events")
		}
		v["truncated"] = tr
	}
	return v
}

func (s *Server) handleStatus(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a idArgs
	if err := req.BindArguments(&a); err != nil {
		return toolError("invalid_arguments", err.Error()), nil
	}
	e, errRes := s.lookup(ctx, a.ExecutionID)
	if errRes != nil {
		return errRes, nil
	}
	sn := e.Snapshot(0)
	sn.Events = nil
	return reply(statusMap(sn), false), nil
}

// handleList lists the caller's executions: its MCP session's; without
// one, its principal's (a named key's), narrowed to one workspace handle
// by session_id; an anonymous sessionless caller has nothing that is its
// own but its handles, so it must name one.
func (s *Server) handleList(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		SessionID string `json:"session_id"`
	}
	if err := req.BindArguments(&a); err != nil {
		return toolError("invalid_arguments", err.Error()), nil
	}
	c := callerOf(ctx)
	if a.SessionID == "" && c.Session == "" && c.Anonymous() {
		return reply(map[string]any{"executions": []map[string]any{},
			"note": "without an MCP session or an API key, pass the session_id of a workspace to list its executions (or poll an execution by its execution_id)"}, false), nil
	}
	execs, err := s.svc.Executions(c, a.SessionID)
	if err != nil {
		return toolErr(err), nil
	}
	list := []map[string]any{}
	for _, e := range execs {
		sn := e.Snapshot(^uint64(0) >> 1)
		list = append(list, map[string]any{"execution_id": e.ID(), "status": sn.State.Status(), "exit_code": exitCode(sn),
			"command": e.Label(), "created_at": e.Created().UTC().Format(time.RFC3339Nano)})
	}
	return reply(map[string]any{"executions": list}, false), nil
}
