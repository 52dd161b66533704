package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/srt-mcp/srt-mcp/service"
)

// addSnapshotTools adds the workspace snapshot tools (issue 26): snapshot,
// restore, fork, list and delete. Snapshots belong to the caller's key.
func (s *Server) addSnapshotTools() {
	add := s.addRawTool
	sid := `"session_id": {"type": "string", "description": "The session (sess_…)."}`
	snap := `"snapshot_id": {"type": "string", "description": "A snapshot of yours (snap_…)."}`
	add("snapshot_workspace", "Snapshot a workspace", "Save a copy of a session's files (/mnt/data and its ~/.cache) as a snapshot you can restore or fork later; kept 24 h by default.",
		`{"type": "object", "properties": {`+sid+`, "name": {"type": "string", "maxLength": 128, "description": "Your name for it."}}, "required": ["session_id", "name"], "additionalProperties": false}`,
		false, false, false, s.handleSnapshot)
	add("restore_workspace", "Restore a workspace", "Replace a session's files with a snapshot's; its interpreter restarts (variables are lost).",
		`{"type": "object", "properties": {`+sid+`, `+snap+`}, "required": ["session_id", "snapshot_id"], "additionalProperties": false}`,
		false, true, true, s.handleRestore)
	add("fork_workspace", "Fork a workspace", "Make a new session whose files are a copy of a snapshot's or of a session's (give one of the two).",
		`{"type": "object", "properties": {`+snap+`, `+sid+`}, "additionalProperties": false}`,
		false, false, false, s.handleFork)
	add("list_snapshots", "List snapshots", "List your snapshots: id, name, session, size and expiry.",
		`{"type": "object", "properties": {}, "additionalProperties": false}`, true, false, true, s.handleListSnapshots)
	add("delete_snapshot", "Delete a snapshot", "Delete one of your snapshots.",
		`{"type": "object", "properties": {`+snap+`}, "required": ["snapshot_id"], "additionalProperties": false}`,
		false, true, true, s.handleDeleteSnapshot)
}

func snapshotJSON(i *service.WorkspaceSnapshot) map[string]any {
	return map[string]any{"snapshot_id": i.ID, "name": i.Name, "session_id": i.SessionID, "size_bytes": i.Bytes,
		"created_at": i.Created.UTC().Format(time.RFC3339), "expires_at": i.Expires.UTC().Format(time.RFC3339)}
}

func (s *Server) handleSnapshot(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		SessionID string `json:"session_id"`
		Name      string `json:"name"`
	}
	if err := req.BindArguments(&a); err != nil {
		return dataError("invalid_arguments", err.Error(), nil), nil
	}
	c := callerOf(ctx)
	ws, err := s.svc.LookupWorkspace(c, a.SessionID)
	if err != nil {
		return fromErr(err), nil
	}
	info, stopped, err := s.svc.SnapshotWorkspace(c, ws, a.Name)
	if err != nil {
		return fromErr(err), nil
	}
	v := snapshotJSON(info)
	text := fmt.Sprintf("snapshot %s of %s (%d bytes) saved; it expires %s", info.ID, a.SessionID, info.Bytes, info.Expires.UTC().Format(time.RFC3339))
	if len(stopped) > 0 {
		v["interpreters_restarted"] = stopped
		text += stoppedNote(stopped)
	}
	return mcp.NewToolResultStructured(v, text), nil
}

func (s *Server) handleRestore(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		SessionID  string `json:"session_id"`
		SnapshotID string `json:"snapshot_id"`
	}
	if err := req.BindArguments(&a); err != nil {
		return dataError("invalid_arguments", err.Error(), nil), nil
	}
	c := callerOf(ctx)
	ws, err := s.svc.LookupWorkspace(c, a.SessionID)
	if err != nil {
		return fromErr(err), nil
	}
	info, stopped, err := s.svc.RestoreWorkspace(c, ws, a.SnapshotID)
	if err != nil {
		return fromErr(err), nil
	}
	v := snapshotJSON(info)
	v["session_id"] = a.SessionID
	v["interpreters_restarted"] = stopped
	text := fmt.Sprintf("%s restored from snapshot %s (%s)", a.SessionID, info.ID, info.Name)
	if len(stopped) > 0 {
		text += "; its " + strings.Join(stopped, " and ") + " interpreter restarted: variables and imports are gone"
	}
	return mcp.NewToolResultStructured(v, text), nil
}

func (s *Server) handleFork(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		SnapshotID string `json:"snapshot_id"`
		SessionID  string `json:"session_id"`
	}
	if err := req.BindArguments(&a); err != nil {
		return dataError("invalid_arguments", err.Error(), nil), nil
	}
	if (a.SnapshotID == "") == (a.SessionID == "") {
		return dataError("invalid_arguments", "give exactly one of snapshot_id (fork a snapshot) and session_id (fork a session as it is now)", nil), nil
	}
	c := callerOf(ctx)
	var from *service.Workspace
	if a.SessionID != "" {
		ws, err := s.svc.LookupWorkspace(c, a.SessionID)
		if err != nil {
			return fromErr(err), nil
		}
		from = ws
	}
	ws, info, stopped, err := s.svc.ForkWorkspace(ctx, c, a.SnapshotID, from)
	if err != nil {
		return fromErr(err), nil
	}
	v := map[string]any{"session_id": ws.ID(), "forked_from": a.SnapshotID + a.SessionID, "size_bytes": info.Bytes}
	text := fmt.Sprintf("new session %s holds a copy of %s", ws.ID(), a.SnapshotID+a.SessionID)
	if len(stopped) > 0 {
		v["interpreters_restarted"] = stopped
		text += stoppedNote(stopped)
	}
	return mcp.NewToolResultStructured(v, text), nil
}

// stoppedNote says that the interpreters of a session being copied were
// stopped because a program of theirs kept its filesystem busy.
func stoppedNote(stopped []string) string {
	return "; its " + strings.Join(stopped, " and ") + " interpreter kept a write going in the workspace and was stopped for the copy: variables and imports are gone, files are not"
}

func (s *Server) handleListSnapshots(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	list := s.svc.Snapshots(callerOf(ctx))
	out := []map[string]any{}
	var lines []string
	for i := range list {
		out = append(out, snapshotJSON(&list[i]))
		lines = append(lines, fmt.Sprintf("%s %q of %s, %d bytes, expires %s", list[i].ID, list[i].Name, list[i].SessionID, list[i].Bytes, list[i].Expires.UTC().Format(time.RFC3339)))
	}
	if len(lines) == 0 {
		lines = []string{"no snapshots"}
	}
	return mcp.NewToolResultStructured(map[string]any{"snapshots": out}, strings.Join(lines, "\n")), nil
}

func (s *Server) handleDeleteSnapshot(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		SnapshotID string `json:"snapshot_id"`
	}
	if err := req.BindArguments(&a); err != nil {
		return dataError("invalid_arguments", err.Error(), nil), nil
	}
	if err := s.svc.DeleteSnapshot(callerOf(ctx), a.SnapshotID); err != nil {
		return fromErr(err), nil
	}
	return mcp.NewToolResultStructured(map[string]any{"snapshot_id": a.SnapshotID, "status": "deleted"}, "snapshot "+a.SnapshotID+" deleted"), nil
}
