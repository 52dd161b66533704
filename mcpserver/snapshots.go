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
	s.add("snapshot_workspace", s.handleSnapshot)
	s.add("restore_workspace", s.handleRestore)
	s.add("fork_workspace", s.handleFork)
	s.add("list_snapshots", s.handleListSnapshots)
	s.add("delete_snapshot", s.handleDeleteSnapshot)
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
	return reply(v, false), nil
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
	return reply(v, false), nil
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
	return reply(v, false), nil
}

// stoppedNote says that the interpreters of a session being copied were
// stopped because a program of theirs kept its filesystem busy.
func stoppedNote(stopped []string) string {
	return "; its " + strings.Join(stopped, " and ") + " interpreter kept a write going in the workspace and was stopped for the copy: variables and imports are gone, files are not"
}

func (s *Server) handleListSnapshots(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	list := s.svc.Snapshots(callerOf(ctx))
	out := []map[string]any{}
	for i := range list {
		out = append(out, snapshotJSON(&list[i]))
	}
	return reply(map[string]any{"snapshots": out}, false), nil
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
	return reply(map[string]any{"snapshot_id": a.SnapshotID, "status": "deleted"}, false), nil
}
