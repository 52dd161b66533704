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
// snapshot TTL, within c's snapshot budget. A session's interpreter that
// keeps its filesystem from freezing (a thread left writing) is stopped:
// stopped names those, whose next cell says why it starts afresh.
func (s *Service) SnapshotWorkspace(c Caller, w *Workspace, name string) (info *WorkspaceSnapshot, stopped []string, err error) {
	ss := w.ss
	if err := ss.Acquire(); err != nil {
		return nil, nil, err
	}
	defer ss.Release()
	start := time.Now()
	info, err = s.reg.Snapshot(ss, name, s.cfg.SnapshotTTL, s.cfg.SnapshotBudget, s.stopWriters(ss, &stopped, "snapshot_workspace"))
	if err != nil {
		s.audit(c, ss, map[string]any{"op": "snapshot_workspace", "name": name, "error": errs.CodeOf(err), "interpreters_stopped": stopped})
		return nil, stopped, err
	}
	s.audit(c, ss, map[string]any{"op": "snapshot_workspace", "name": name, "snapshot_id": info.ID, "size_bytes": info.Bytes,
		"duration_ms": time.Since(start).Milliseconds(), "interpreters_stopped": stopped})
	return info, stopped, nil
}

// stopWriters is the busy of a freeze of ss's filesystem for op: it stops
// ss's interpreters, which alone may still hold a write in it (the caller
// holds the session, no run is in it), records their languages in
// *stopped and tells the next cell of each why it starts afresh.
func (s *Service) stopWriters(ss *sessions.Session, stopped *[]string, op string) func() {
	return func() {
		*stopped = s.stopSandboxes(ss)
		for _, lang := range *stopped {
			s.markRestarted(ss.ID, lang, op+" stopped the "+lang+" interpreter: a program of it kept a write into the workspace going, so its filesystem could not be copied; its variables and imports are gone, its files are not")
		}
	}
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
// or of c's workspace from as it is now (copied straight into the new
// workspace: no snapshot is made for it). stopped names the interpreters
// of from that had to stop for the copy (see SnapshotWorkspace).
func (s *Service) ForkWorkspace(ctx context.Context, c Caller, id string, from *Workspace) (ws *Workspace, info *WorkspaceSnapshot, stopped []string, err error) {
	if from == nil {
		if _, err := s.reg.SnapshotOf(id, c.Principal); err != nil {
			return nil, nil, nil, err // before a workspace is made for it
		}
	}
	ss, err := s.newWorkspace(c)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := ss.Acquire(); err != nil {
		return nil, nil, nil, err
	}
	if from == nil {
		info, _, err = s.restoreHeld(c, ss, id, false)
	} else {
		err = s.forkHeld(c, from.ss, ss, &stopped)
		info = &WorkspaceSnapshot{SessionID: from.ss.ID}
		if used, _, ok := ss.Space(); ok {
			info.Bytes = used
		}
	}
	ss.Release()
	if err != nil {
		_ = s.reg.Close(ss.ID)
		return nil, nil, stopped, err
	}
	return wrap(ss), info, stopped, nil
}

// forkHeld copies src's files into dst (held, new).
func (s *Service) forkHeld(c Caller, src, dst *sessions.Session, stopped *[]string) error {
	if err := src.Acquire(); err != nil {
		return err
	}
	defer src.Release()
	s.stopSandboxes(dst) // a pooled session may have started its interpreter
	err := s.reg.Fork(src, dst, s.stopWriters(src, stopped, "fork_workspace"))
	rec := map[string]any{"op": "fork_workspace", "session_id": src.ID, "interpreters_stopped": *stopped}
	if err != nil {
		rec["error"] = errs.CodeOf(err)
	}
	s.audit(c, dst, rec)
	return err
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
