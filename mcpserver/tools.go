package mcpserver

import (
	"context"
	"encoding/json"
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

const sandboxConfigSchema = `{
  "type": "object",
  "description": "Narrow or request sandbox permissions for this call. Everything must lie within the operator's ceiling; asking for more is an error that names the entry.",
  "properties": {
    "network": {"type": "object", "properties": {
      "allowed_domains": {"type": "array", "items": {"type": "string"}, "description": "Hosts the command may reach through the proxy, e.g. [\"pypi.org\", \"*.github.com\", \"api.example.com:443\"]. Empty: no network."},
      "denied_domains": {"type": "array", "items": {"type": "string"}, "description": "Hosts to refuse even if allowed."},
      "request_rules": {"type": "array", "description": "Only these requests to a named host, e.g. [{\"host\": \"api.github.com\", \"methods\": [\"GET\"], \"paths\": [\"/repos/acme/\"]}]; applied with the operator's.", "items": {"type": "object", "properties": {
        "host": {"type": "string"}, "methods": {"type": "array", "items": {"type": "string"}}, "paths": {"type": "array", "items": {"type": "string"}}}, "required": ["host"], "additionalProperties": false}},
      "require_host_match": {"type": "boolean", "description": "Refuse (421) a request whose Host or TLS name differs from where it goes."}
    }, "additionalProperties": false},
    "credentials": {"type": "array", "items": {"type": "string"}, "description": "Names of the operator's credentials to use (the tool description lists them); default all. The sandbox sees stand-ins; the proxy sends real values to their hosts only."},
    "filesystem": {"type": "object", "properties": {
      "deny_read": {"type": "array", "items": {"type": "string"}, "description": "Host paths to hide (globs allowed)."},
      "allow_read": {"type": "array", "items": {"type": "string"}, "description": "Host paths to make readable."},
      "allow_write": {"type": "array", "items": {"type": "string"}, "description": "Host paths to make writable. The sandbox's own /tmp is always writable."},
      "deny_write": {"type": "array", "items": {"type": "string"}, "description": "Paths to keep read-only inside writable ones."}
    }, "additionalProperties": false}
  },
  "additionalProperties": false
}`

func execSchema(async bool) json.RawMessage {
	wait := `,
    "wait_for_completion": {"type": "boolean", "default": true, "description": "false: return at once with the execution_id, as execute_code_async does."}`
	if async {
		wait = ""
	}
	return json.RawMessage(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "description": "Shell command to run (bash -c), e.g. \"python3 -c 'print(1)'\" or \"ls -la && cat file\". Give either command, or code with language."},
    "code": {"type": "string", "description": "Source code to run in the workspace's persistent interpreter (seed 001): variables and imports stay for the next call; the value of a trailing expression is printed like a REPL; open matplotlib figures are saved to /mnt/data."},
    "language": {"type": "string", "description": "Language of code: python and javascript keep state between calls; typescript, bash, c, cpp, go, java, rust, php, r, fortran and d run (and compile) fresh each call in the same workspace files. Aliases: py, js, ts, rs, f90, sh, c++. list_runtimes says which are installed here."},
    "timeout": {"type": "integer", "minimum": 1, "maximum": 300, "default": 30, "description": "With code: seconds before the cell is interrupted (SIGINT; if the interpreter does not stop, it is restarted and the reply says so)."},
    "timeout_seconds": {"type": "number", "default": 60, "description": "Wall-clock limit; the command gets SIGTERM, then SIGKILL. At most the operator's maximum."},
    "interactive": {"type": "boolean", "default": false, "description": "Run on a pseudo-terminal (for prompts and REPLs); answer with send_stdin."},
    "working_directory": {"type": "string", "default": "/tmp", "description": "Directory to start in: /tmp (the sandbox's private, writable scratch space), /mnt/data with a session_id, or an absolute host path the operator allows."},
    "session_id": {"type": "string", "description": "A data session (sess_ + 12 hex digits, as from upload_file, run_python or create_session): its files are mounted read-write at /mnt/data, which becomes the default working directory. One run per session at a time. With code: omit it to use this connection's workspace (a client without an MCP session gets a new workspace each time: the reply's session_id is its handle, so pass it back to keep variables and files), or pass \"__stateless__\" for a fresh interpreter."},
    "environment": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Environment variables to set. Nothing of the server's environment is passed."},
    "sandbox_config": ` + sandboxConfigSchema + wait + `
  },
  "additionalProperties": false
}`)
}

const eventSchema = `{"type": "object", "properties": {
  "seq": {"type": "integer"}, "type": {"type": "string", "enum": ["ready","stdout","stderr","violation","file","exit","timeout","cancelled","error"]},
  "ts": {"type": "number"}, "data": {"type": "string"}, "data_b64": {"type": "string"},
  "code": {"anyOf": [{"type": "integer"}, {"type": "string"}]}, "duration_ms": {"type": "integer"}, "timeout_seconds": {"type": "number"},
  "message": {"type": "string"}, "signal": {"type": "string"}, "violation": {"type": "object"},
  "file": {"type": "object", "description": "A workspace file the run created, changed or removed (seen while it ran).", "properties": {
    "path": {"type": "string"}, "op": {"type": "string", "enum": ["created", "changed", "removed"]}, "size_bytes": {"type": "integer"}}},
  "truncated": {"type": "array", "items": {"type": "string"}}}, "required": ["seq", "type", "ts"]}`

const resultSchema = `{
  "type": "object",
  "properties": {
    "execution_id": {"type": "string"},
    "status": {"type": "string", "enum": ["running", "completed", "timed_out", "cancelled", "failed"]},
    "exit_code": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
    "output": {"type": "array", "items": ` + eventSchema + `},
    "next_seq": {"type": "integer", "description": "Pass as since_seq to get_execution_output to receive only newer events."},
    "truncated": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "boolean"}], "description": "command: the streams cut at the output limit; code: whether output was cut."},
    "error": {"type": "string"},
    "session_id": {"type": "string", "description": "code: the workspace session the cell ran in"},
    "stdout": {"type": "string"},
    "stderr": {"type": "string"},
    "execution_time_ms": {"type": "number"},
    "note": {"type": "string", "description": "code: why the interpreter was restarted, when it was"},
    "artifacts": {"type": "array", "items": {"type": "object"}, "description": "code: files the cell created or changed in /mnt/data"}
  },
  "required": ["execution_id", "status", "output"]
}`

const idOnlySchema = `{"type": "object", "properties": {
  "execution_id": {"type": "string", "description": "The id returned by execute_code or execute_code_async."}},
  "required": ["execution_id"], "additionalProperties": false}`

// executionTools are seed 002's tools, whose errors keep the shape of an
// execution result (execution_id, status "failed", output, error).
var executionTools = map[string]bool{"execute_code": true, "execute_code_async": true, "get_execution_output": true,
	"send_stdin": true, "cancel_execution": true, "list_executions": true, "get_execution_status": true}

// addExecTools (re)registers the two tools whose description names the
// credentials the operator offers: on start and at every settings reload.
func (s *Server) addExecTools(ceiling service.Policy) {
	creds := ""
	if o := service.Offered(ceiling); o != "" {
		creds = " Credentials offered (sandbox_config.credentials; the sandbox sees stand-ins): " + o + "."
	}
	s.mcp.AddTool(mcp.NewToolWithRawSchema("execute_code",
		"Run a shell command in a fresh OS sandbox and wait for it to finish. Returns execution_id, status, exit_code and the complete output as events [{type, data, ts}]. Output also streams as progress notifications when the request carries a progress token. Use execute_code_async for runs longer than a minute."+creds,
		execSchema(false)),
		s.handleExecute(false))
	s.mcp.AddTool(mcp.NewToolWithRawSchema("execute_code_async",
		"Start a shell command in a fresh OS sandbox and return its execution_id at once (status \"running\"). Poll with get_execution_output, answer prompts with send_stdin, stop with cancel_execution."+creds,
		execSchema(true)),
		s.handleExecute(true))
}

func (s *Server) addTools() {
	s.addExecTools(s.svc.Ceiling())
	s.svc.WatchCeiling(s.addExecTools)
	s.mcp.AddTool(mcp.NewToolWithRawSchema("get_execution_output",
		"Get an execution's output events and status. With since_seq (or last_event_id) only newer events are returned; with wait=true the call blocks until the execution finishes (or new output arrives with wait_for=\"output\").",
		json.RawMessage(`{"type": "object", "properties": {
  "execution_id": {"type": "string"},
  "wait": {"type": "boolean", "default": false, "description": "Block until the execution finishes (at most wait_timeout_seconds)."},
  "wait_for": {"type": "string", "enum": ["completion", "output"], "default": "completion", "description": "With wait: return as soon as new output arrives (\"output\") instead of at completion."},
  "wait_timeout_seconds": {"type": "number", "default": 30},
  "since_seq": {"type": "integer", "description": "Return only events with seq greater than this (use next_seq from the previous reply)."},
  "last_event_id": {"anyOf": [{"type": "string"}, {"type": "integer"}], "description": "Same as since_seq (SSE-style name)."}},
  "required": ["execution_id"], "additionalProperties": false}`)),
		s.handleOutput)
	s.mcp.AddTool(mcp.NewToolWithRawSchema("send_stdin",
		"Send input to a running execution's stdin (include \"\\n\" to end a line). close_stdin=true ends the input (^D on a terminal).",
		json.RawMessage(`{"type": "object", "properties": {
  "execution_id": {"type": "string"},
  "input_data": {"type": "string", "description": "Text to write to stdin."},
  "close_stdin": {"type": "boolean", "default": false, "description": "End the input after input_data (if any)."}},
  "required": ["execution_id"], "additionalProperties": false}`)),
		s.handleStdin)
	s.mcp.AddTool(mcp.NewToolWithRawSchema("cancel_execution",
		"Cancel a running execution: SIGTERM to every process in its sandbox, then SIGKILL after a grace period; force=true kills at once.",
		json.RawMessage(`{"type": "object", "properties": {
  "execution_id": {"type": "string"},
  "force": {"type": "boolean", "default": false}},
  "required": ["execution_id"], "additionalProperties": false}`)),
		s.handleCancel)
	s.mcp.AddTool(mcp.NewToolWithRawSchema("list_executions",
		"List your executions (running and recently finished) with their status: this MCP session's, or without one your API key's. session_id narrows the list to one workspace's (without an MCP session or an API key it is required: a workspace handle is then the only thing that is yours).",
		json.RawMessage(`{"type": "object", "properties": {
  "session_id": {"type": "string", "description": "Only the executions of this workspace (the session_id an execute_code reply named)."}}, "additionalProperties": false}`)),
		s.handleList)
	s.mcp.AddTool(mcp.NewToolWithRawSchema("get_execution_status",
		"Get an execution's status, exit code, command and timing without its output.",
		json.RawMessage(idOnlySchema)),
		s.handleStatus)
	s.setAnnotations()
}

// setAnnotations adds output schemas and hints to the registered tools.
func (s *Server) setAnnotations() {
	type meta struct {
		title                                        string
		readOnly, destructive, idempotent, openWorld bool
		output                                       string
	}
	listSchema := `{"type": "object", "properties": {"executions": {"type": "array", "items": {"type": "object", "properties": {
  "execution_id": {"type": "string"}, "status": {"type": "string"}, "exit_code": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
  "command": {"type": "string"}, "created_at": {"type": "string"}}}}}, "required": ["executions"]}`
	statusSchema := `{"type": "object", "properties": {"execution_id": {"type": "string"}, "status": {"type": "string"},
  "exit_code": {"anyOf": [{"type": "integer"}, {"type": "null"}]}, "command": {"type": "string"}, "created_at": {"type": "string"},
  "duration_ms": {"type": "integer"}, "events": {"type": "integer"}, "truncated": {"type": "array", "items": {"type": "string"}},
  "error": {"type": "string"}}, "required": ["execution_id", "status"]}`
	stdinSchema := `{"type": "object", "properties": {"execution_id": {"type": "string"}, "status": {"type": "string"},
  "bytes_written": {"type": "integer"}, "stdin_closed": {"type": "boolean"}}, "required": ["execution_id", "status"]}`
	tools := map[string]meta{
		"execute_code":         {"Execute code in a sandbox", false, true, false, true, resultSchema},
		"execute_code_async":   {"Start code in a sandbox", false, true, false, true, resultSchema},
		"get_execution_output": {"Get execution output", true, false, true, false, resultSchema},
		"send_stdin":           {"Send stdin", false, false, false, false, stdinSchema},
		"cancel_execution":     {"Cancel an execution", false, true, true, false, statusSchema},
		"list_executions":      {"List executions", true, false, true, false, listSchema},
		"get_execution_status": {"Get execution status", true, false, true, false, statusSchema},
	}
	for name, m := range tools {
		st := s.mcp.GetTool(name)
		if st == nil {
			continue
		}
		t := st.Tool
		annotations(m.title, m.readOnly, m.destructive, m.idempotent, m.openWorld)(&t)
		t.Title = m.title
		t.RawOutputSchema = json.RawMessage(m.output)
		s.mcp.AddTool(t, st.Handler)
	}
}

// exitCode is the end's exit status as a shell reports it: the
// command's own, -1 for a timeout, 128+N for a run cancelled by signal N,
// null while running or when the sandbox failed.
func exitCode(sn service.Snapshot) *int { return service.ExitCode(sn.End) }

func result(sn service.Snapshot) map[string]any {
	out := sn.Events
	if out == nil {
		out = []service.Event{}
	}
	r := map[string]any{
		"execution_id": sn.ID,
		"status":       sn.State.Status(),
		"exit_code":    exitCode(sn),
		"output":       out,
		"next_seq":     sn.NextSeq,
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

// summary is the text content: what happened, then the output.
func summary(sn service.Snapshot) string {
	var b strings.Builder
	switch {
	case sn.End == nil:
		fmt.Fprintf(&b, "execution %s is running", sn.ID)
	case sn.End.Type == service.EventExit:
		fmt.Fprintf(&b, "exit code %d after %d ms", sn.End.ExitCode, sn.End.DurationMS)
		if sn.End.Signal != "" {
			fmt.Fprintf(&b, " (%s)", sn.End.Signal)
		}
	case sn.End.Type == service.EventTimeout:
		fmt.Fprintf(&b, "timed out after %gs (exit_code -1)", sn.End.TimeoutSeconds)
	case sn.End.Type == service.EventCancelled:
		b.WriteString("cancelled")
	default:
		fmt.Fprintf(&b, "failed: %s: %s", sn.End.ErrCode, sn.End.Message)
	}
	var out, errs strings.Builder
	for _, e := range sn.Events {
		switch e.Type {
		case service.EventStdout:
			out.Write(e.Data)
		case service.EventStderr:
			errs.Write(e.Data)
		case service.EventViolation:
			if v := e.Violation; v != nil && v.Decision == "deny" {
				switch {
				case v.Kind == "request":
					fmt.Fprintf(&errs, "[sandbox] denied %s %s%s%s (%s)\n", v.Method, v.Host, portSuffix(v.Port), v.Path, v.Rule)
				case v.Reason != "":
					fmt.Fprintf(&errs, "[sandbox] denied %s %s%s: %s (%s)\n", v.Kind, v.Host, portSuffix(v.Port), v.Reason, v.Rule)
				default:
					fmt.Fprintf(&errs, "[sandbox] denied %s %s%s (%s)\n", v.Kind, v.Host, portSuffix(v.Port), v.Rule)
				}
			}
		}
	}
	const maxText = 64 << 10
	for _, part := range []struct {
		name string
		s    *strings.Builder
	}{{"stdout", &out}, {"stderr", &errs}} {
		if part.s.Len() == 0 {
			continue
		}
		text := service.ValidUTF8(part.s.String())
		if len(text) > maxText {
			text = text[:maxText] + "\n[... cut here; the full output is in structuredContent.output]"
		}
		fmt.Fprintf(&b, "\n--- %s ---\n%s", part.name, text)
	}
	if len(sn.Truncated) > 0 {
		fmt.Fprintf(&b, "\n[output truncated at the limit: %s]", strings.Join(sn.Truncated, ", "))
	}
	return b.String()
}

func portSuffix(p int) string {
	if p == 0 {
		return ""
	}
	return fmt.Sprintf(":%d", p)
}

func structured(v map[string]any, text string, isErr bool) *mcp.CallToolResult {
	r := mcp.NewToolResultStructured(v, text)
	r.IsError = isErr
	return r
}

func toolError(code, msg string) *mcp.CallToolResult {
	return structured(map[string]any{"execution_id": "", "status": "failed", "output": []any{}, "error": code + ": " + msg}, code+": "+msg, true)
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
		if _, err := s.svc.CommandSpec(ca); err != nil { // before a session is made for it
			return toolErr(err), nil
		}
		c := callerOf(ctx)
		var ws *service.Workspace
		if a.SessionID != "" {
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
			return structured(map[string]any{"execution_id": r.ID(), "status": sn.State.Status(), "exit_code": exitCode(sn),
				"output": []any{}, "next_seq": 0}, "started execution "+r.ID()+"; poll it with get_execution_output", false), nil
		}
		res := s.finish(ctx, req, r)
		sn := res.Snapshot
		v, text, isErr := result(sn), summary(sn), sn.State == service.StateFailed
		if res.QuotaExceeded != "" {
			v["error"] = "quota_exceeded: " + res.QuotaExceeded
			text += "\nquota_exceeded: " + res.QuotaExceeded
			isErr = true
		}
		return structured(v, text, isErr), nil
	}
}

// finish waits for a run, sending its output as progress notifications
// when the request asks for them. If the client goes away first, the run
// is stopped the gentle way (an interrupt, SIGTERM, then a kill).
func (s *Server) finish(ctx context.Context, req mcp.CallToolRequest, r *service.Run) service.Result {
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
	return structured(result(sn), summary(sn), false), nil
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
	return structured(v, fmt.Sprintf("wrote %d bytes to %s's stdin", len(a.InputData), e.ID()), false), nil
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
	return structured(statusMap(sn), "execution "+e.ID()+" is "+sn.State.Status(), false), nil
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
	return structured(statusMap(sn), "execution "+e.ID()+" is "+sn.State.Status(), false), nil
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
		return structured(map[string]any{"executions": []map[string]any{}},
			"no executions listed: without an MCP session or an API key, pass the session_id of a workspace to list its executions (or poll an execution by its execution_id)", false), nil
	}
	execs, err := s.svc.Executions(c, a.SessionID)
	if err != nil {
		return toolErr(err), nil
	}
	list := []map[string]any{}
	var lines []string
	for _, e := range execs {
		sn := e.Snapshot(^uint64(0) >> 1)
		list = append(list, map[string]any{"execution_id": e.ID(), "status": sn.State.Status(), "exit_code": exitCode(sn),
			"command": e.Label(), "created_at": e.Created().UTC().Format(time.RFC3339Nano)})
		lines = append(lines, fmt.Sprintf("%s %s %s", e.ID(), sn.State.Status(), e.Label()))
	}
	text := "no executions"
	if len(lines) > 0 {
		text = strings.Join(lines, "\n")
	}
	return structured(map[string]any{"executions": list}, text, false), nil
}
