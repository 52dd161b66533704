package mcpserver

// Seed 003's tools: sandbox.run_code (a conversation's files, any runtime,
// signed download URLs) and sandbox.list_runners. A conversation maps to a
// data session (sess_ + 12 hex of the conversation id's SHA-256), so its
// files are the same ones every other tool sees under that session id.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/srt-mcp/srt-mcp/executions"
	"github.com/srt-mcp/srt-mcp/runner"
)

// ConversationSession is the data session id of a seed 003 conversation.
func ConversationSession(conversationID string) string {
	h := sha256.Sum256([]byte("srt-mcp conversation\x00" + conversationID))
	return "sess_" + hex.EncodeToString(h[:6])
}

func (s *Server) addSeed003Tools() {
	t := mcp.NewToolWithRawSchema("sandbox.run_code", "Run code for a conversation in a fresh sandbox whose working directory /mnt/data holds the conversation's files (kept between calls). Returns success, the combined output, and every file of the conversation with a signed download URL.",
		json.RawMessage(`{"type": "object", "properties": {
  "conversationId": {"type": "string", "minLength": 1, "description": "The conversation whose files the code works on."},
  "language": {"type": "string", "description": "python, javascript, typescript, bash, c, cpp, go, java, rust, php, r, fortran or d (sandbox.list_runners says which are here)."},
  "code": {"type": "string", "description": "Source code."}},
  "required": ["conversationId", "language", "code"], "additionalProperties": false}`))
	t.Title = "Run code"
	annotations(t.Title, false, true, false, false)(&t)
	s.mcp.AddTool(t, s.handleRunCode)
	l := mcp.NewToolWithRawSchema("sandbox.list_runners", "List the languages sandbox.run_code runs here.",
		json.RawMessage(`{"type": "object", "properties": {}, "additionalProperties": false}`))
	l.Title = "List runners"
	annotations(l.Title, true, false, true, false)(&l)
	s.mcp.AddTool(l, s.handleListRunners)
}

func (s *Server) handleListRunners(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	image := "native (bubblewrap)"
	if s.data.Backend != nil && s.data.Backend.Name() == "docker" {
		image = "docker"
	}
	langs := []map[string]any{}
	var names []string
	for _, rt := range s.runtimes().All() {
		if s.runtimeAvailable(rt) {
			langs = append(langs, map[string]any{"language": rt.Language, "image": image, "version": rt.Found})
			names = append(names, rt.Language)
		}
	}
	return mcp.NewToolResultStructured(map[string]any{"languages": langs}, strings.Join(names, ", ")), nil
}

func (s *Server) handleRunCode(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		ConversationID string `json:"conversationId"`
		Language       string `json:"language"`
		Code           string `json:"code"`
	}
	fail := func(msg string) (*mcp.CallToolResult, error) {
		r := mcp.NewToolResultStructured(map[string]any{"success": false, "output": msg, "files": []any{}}, msg)
		r.IsError = true
		return r, nil
	}
	if err := req.BindArguments(&a); err != nil {
		return fail("invalid arguments: " + err.Error())
	}
	if strings.TrimSpace(a.ConversationID) == "" {
		return fail("conversationId is empty; give the conversation whose files the code works on")
	}
	rt, ok := s.runtimes().Get(a.Language)
	if !ok || !s.runtimeAvailable(rt) {
		return fail(fmt.Sprintf("no runner for language %q; sandbox.list_runners names the ones here (%s)", a.Language, strings.Join(s.availableLanguages(), ", ")))
	}
	if len(a.Code) > s.data.MaxCodeBytes {
		return fail(fmt.Sprintf("code is %d bytes, more than the %d-byte limit", len(a.Code), s.data.MaxCodeBytes))
	}
	ss, _, err := s.data.Sessions.GetOrCreate(ConversationSession(a.ConversationID))
	if err == nil {
		err = ss.Acquire()
	}
	if err != nil {
		return fail(err.Error())
	}
	defer ss.Release()
	e, err := s.mgr.StartWith(dataOwner(ss.ID), "sandbox.run_code "+rt.Language, s.scriptSpec(ss, rt, a.Code, s.data.ExecTimeout), s.starter(ss))
	if err != nil {
		return fail(err.Error())
	}
	s.observe("run_code", rt.Language, e)
	sn := waitEnd(ctx, e)
	out, errOut := outputs(sn)
	var stdout, stderr strings.Builder
	stdout.Write(out)
	stderr.Write(errOut)
	output := stdout.String()
	if se := stderr.String(); se != "" {
		if output != "" && !strings.HasSuffix(output, "\n") {
			output += "\n"
		}
		output += se
	}
	success := sn.End != nil && sn.End.Type == runner.EventExit && sn.End.ExitCode == 0
	if sn.End != nil {
		switch {
		case sn.End.Type == runner.EventTimeout:
			output += fmt.Sprintf("\nExecution timed out after %g seconds", sn.End.TimeoutSeconds)
		case sn.End.Type == runner.EventError:
			output += "\n" + sn.End.ErrCode + ": " + sn.End.Message
		case sn.End.Type == runner.EventExit && rt.CompileFailed(sn.End.ExitCode):
			output += "\n" + rt.Language + ": compilation failed"
		}
	}
	files := []map[string]any{}
	for _, f := range ss.List() {
		fd := map[string]any{"name": f.Filename}
		if s.data.Files != nil {
			fd["url"] = s.data.Files.URL(ss.ID, f.Filename)
		}
		files = append(files, fd)
	}
	s.audit(ss, map[string]any{"op": "sandbox.run_code", "language": rt.Language, "code_bytes": len(a.Code), "code_sha256": sha([]byte(a.Code)),
		"success": success, "duration_ms": endDuration(sn)})
	v := map[string]any{"success": success, "output": toValidUTF8(output), "files": files, "session_id": ss.ID}
	r := mcp.NewToolResultStructured(v, fmt.Sprintf("success: %v\n%s", success, output))
	return r, nil
}

func endDuration(sn executions.Snapshot) int64 {
	if sn.End == nil {
		return 0
	}
	return sn.End.DurationMS
}
