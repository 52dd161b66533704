package service

import (
	"context"
	"time"

	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// WorkspaceSnapshot is a saved copy of a workspace's files (its cache included).
type WorkspaceSnapshot = sessions.SnapshotInfo

// SnapshotWorkspace saves w's files under name (the session held: a run in
// it makes this session_busy); the snapshot is c's alone, kept for the
// snapshot TTL, within c's snapshot budget.
func (s *Service) SnapshotWorkspace(c Caller, w *Workspace, name string) (*WorkspaceSnapshot, error) {
	ss := w.ss
	if err := ss.Acquire(); err != nil {
		return nil, err
	}
	defer ss.Release()
	start := time.Now()
	info, err := s.reg.Snapshot(ss, name, s.cfg.SnapshotTTL, s.cfg.SnapshotBudget)
	if err != nil {
		s.audit(c, ss, map[string]any{"op": "snapshot_workspace", "name": name, "error": errs.CodeOf(err)})
		return nil, err
	}
	s.audit(c, ss, map[string]any{"op": "snapshot_workspace", "name": name, "snapshot_id": info.ID, "size_bytes": info.Bytes,
		"duration_ms": time.Since(start).Milliseconds()})
	return info, nil
}

// RestoreWorkspace replaces w's files with c's snapshot id. The session's
// interpreters stop first (a cell's variables would describe files that
// are gone); the next cell of each says why it starts afresh.
func (s *Service) RestoreWorkspace(c Caller, w *Workspace, id string) (*WorkspaceSnapshot, []string, error) {
	ss := w.ss
	if err := ss.Acquire(); err != nil {
		return nil, nil, err
	}
	defer ss.Release()
	return s.restoreHeld(c, ss, id, true)
}

// restoreHeld restores id into ss (held); note: tell the next cell of each
// interpreter that stopped why it starts afresh.
func (s *Service) restoreHeld(c Caller, ss *sessions.Session, id string, note bool) (*WorkspaceSnapshot, []string, error) {
	stopped := s.stopSandboxes(ss)
	info, err := s.reg.Restore(ss, id)
	if err != nil {
		s.audit(c, ss, map[string]any{"op": "restore_workspace", "snapshot_id": id, "error": errs.CodeOf(err)})
		return nil, nil, err
	}
	for _, lang := range stopped {
		if !note {
			break
		}
		s.markRestarted(ss.ID, lang, "the workspace was restored from snapshot "+info.ID+" ("+info.Name+"): the "+lang+" interpreter restarted; its variables and imports are gone")
	}
	s.audit(c, ss, map[string]any{"op": "restore_workspace", "snapshot_id": info.ID})
	return info, stopped, nil
}

// ForkWorkspace makes c a new workspace holding a copy of c's snapshot id,
// or of c's workspace from (snapshotted for the fork, not kept).
func (s *Service) ForkWorkspace(ctx context.Context, c Caller, id string, from *Workspace) (*Workspace, *WorkspaceSnapshot, error) {
	if from != nil {
		ss := from.ss
		if err := ss.Acquire(); err != nil {
			return nil, nil, err
		}
		tmp, err := s.reg.Snapshot(ss, "fork of "+ss.ID, time.Hour, 0)
		ss.Release()
		if err != nil {
			return nil, nil, err
		}
		defer s.reg.DeleteSnapshot(tmp.ID, c.Principal)
		id = tmp.ID
	} else if _, err := s.reg.SnapshotOf(id, c.Principal); err != nil {
		return nil, nil, err // before a workspace is made for it
	}
	ss, err := s.newWorkspace(c)
	if err != nil {
		return nil, nil, err
	}
	if err := ss.Acquire(); err != nil {
		return nil, nil, err
	}
	info, _, err := s.restoreHeld(c, ss, id, false)
	ss.Release()
	if err != nil {
		_ = s.reg.Close(ss.ID)
		return nil, nil, err
	}
	return wrap(ss), info, nil
}

// Snapshots lists c's snapshots, newest first.
func (s *Service) Snapshots(c Caller) []WorkspaceSnapshot { return s.reg.Snapshots(c.Principal) }

// DeleteSnapshot removes c's snapshot id.
func (s *Service) DeleteSnapshot(c Caller, id string) error {
	return s.reg.DeleteSnapshot(id, c.Principal)
}

// stopSandboxes stops a session's interpreters and its container (the
// Docker backend's), which hold its filesystem, and returns the languages
// whose interpreters ran.
func (s *Service) stopSandboxes(ss *sessions.Session) []string {
	s.ws.mu.Lock()
	sk := s.ws.k[ss.ID]
	s.ws.mu.Unlock()
	var langs []string
	if sk != nil {
		sk.mu.Lock()
		for lang := range sk.byLang {
			langs = append(langs, lang)
		}
		sk.mu.Unlock()
	}
	s.closeKernels(ss.ID)
	s.backend.Recycle(sessions.BoxOf(ss))
	return langs
}
