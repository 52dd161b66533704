package mcpserver

// Seed 003's tools: sandbox.run_code (a conversation's files, any runtime,
// signed download URLs) and sandbox.list_runners. A conversation maps to a
// data session of the caller's own (the reply names its session_id), so
// its files are the same ones every other tool sees under that id; its
// name is the caller's alone (service.ConversationWorkspace).

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/srt-mcp/srt-mcp/service"
)

func (s *Server) addSeed003Tools() {
	s.add("sandbox_run_code", s.handleRunCode)
	s.add("sandbox_list_runners", s.handleListRunners)
	// The dotted names are registered too, unlisted (offered drops them),
	// so that a 2026-07-28 caller's Mcp-Param-* headers are checked
	// against the body under them as under the listed names: mcp-go does
	// that before the call is renamed (undot).
	for dotted, name := range dottedNames {
		t := s.tool(name, "")
		t.Name = dotted
		s.mcp.AddTool(t, s.mcp.GetTool(name).Handler)
	}
}

func (s *Server) handleListRunners(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	image := s.svc.RunsOn()
	langs := []map[string]any{}
	for _, rt := range s.svc.Runtimes().All() {
		if ok, _ := s.svc.Available(rt); ok {
			langs = append(langs, map[string]any{"language": rt.Language, "image": image, "version": rt.Found})
		}
	}
	return reply(map[string]any{"languages": langs}, false), nil
}

func (s *Server) handleRunCode(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		ConversationID string `json:"conversationId"`
		Language       string `json:"language"`
		Code           string `json:"code"`
	}
	fail := func(msg string) (*mcp.CallToolResult, error) {
		return reply(map[string]any{"success": false, "output": msg, "files": []any{}}, true), nil
	}
	failErr := func(err error) (*mcp.CallToolResult, error) {
		code, msg := service.CodeOf(err)
		r, _ := fail(code + ": " + msg)
		r.StructuredContent.(map[string]any)["error"] = code
		return r, nil
	}
	if err := req.BindArguments(&a); err != nil {
		return fail("invalid arguments: " + err.Error())
	}
	if strings.TrimSpace(a.ConversationID) == "" {
		return fail("conversationId is empty; give the conversation whose files the code works on")
	}
	if _, err := s.svc.Runtime(a.Language); err != nil {
		return fail(fmt.Sprintf("no runner for language %q; sandbox.list_runners names the ones here (%s)", a.Language, strings.Join(s.svc.Languages(), ", ")))
	}
	c := callerOf(ctx)
	ws, err := s.svc.ConversationWorkspace(c, "mcp", a.ConversationID, true)
	if err != nil {
		return failErr(err)
	}
	r, err := s.svc.Start(ctx, service.Request{Op: "sandbox.run_code", Kind: "run_code", Caller: c, Workspace: ws, Language: a.Language, Code: a.Code})
	if err != nil {
		return failErr(err)
	}
	res := r.Wait(ctx)
	output := res.Stdout
	if res.Stderr != "" {
		if output != "" && !strings.HasSuffix(output, "\n") {
			output += "\n"
		}
		output += res.Stderr
	}
	if x := res.Explain(r.Runtime.Language); x != "" {
		output += "\n" + x
	}
	files := []map[string]any{}
	listed, more := s.svc.Files(c, ws, "sandbox.run_code")
	shown := s.shownFiles(listed)
	if more += len(listed) - len(shown); more > 0 {
		output += fmt.Sprintf("\n(%d more files in the conversation are not listed)", more)
	}
	for _, f := range shown {
		fd := map[string]any{"name": f.Name}
		if f.URL != "" {
			fd["url"] = f.URL
		}
		files = append(files, fd)
	}
	output, cut := clip(output, s.cfg.ReplyChars)
	v := map[string]any{"success": res.OK(), "output": output, "files": files, "session_id": ws.ID()}
	if cut > 0 {
		v["cut"] = fmt.Sprintf("%d bytes of output are cut from the middle of this reply (it holds at most %d characters); write long output to a file of the conversation and read it from its download URL", cut, s.cfg.ReplyChars)
	}
	return reply(v, res.QuotaExceeded != "" || (res.End != nil && res.End.Type == service.EventError)), nil
}
