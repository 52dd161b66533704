package service

// The quota between runs. A session's kernels live on after their cell
// ends, and what a cell left running (a thread, a subprocess) may go on
// writing. While no run holds a directory workspace whose session has
// kernels, a watch like a run's (inotify, a walk every checkEvery when
// something changed) keeps its quota: past it, the session's kernels are
// stopped at once, and what was made since the last run ended is removed
// (sessions.Trim, as after a run stopped for the quota) until the session
// fits; the next cell of each stopped kernel says why. The next run (or
// reset_workspace) takes over from the idle watch, and the run's end
// starts the next one.
//
// Every run's end also leaves the next run its base (what the session held
// then, uploads since added): the next run starts from it without walking
// the workspace and the cache again, and whatever came in between (a
// thread of a kernel) counts as the next run's, removable if it goes past
// the quota.

import (
	"time"

	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/kernel"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// idleWatch is a session between runs.
type idleWatch struct {
	ss     *sessions.Session // this incarnation (a closed id may be opened again)
	base   sessions.Survey   // what it held when the last run ended
	w      *runWatch         // the watch while kernels live (nil: none)
	killed bool              // its kernels were stopped (under the set's mu)
	langs  []string          // which
	kept   []string          // files uploaded since (under the set's mu)
}

// liveKernels says whether the session has a kernel running.
func (s *Service) liveKernels(sid string) *sessionKernels {
	s.ws.mu.Lock()
	sk := s.ws.k[sid]
	s.ws.mu.Unlock()
	if sk == nil {
		return nil
	}
	sk.mu.Lock()
	defer sk.mu.Unlock()
	for _, k := range sk.byLang {
		if k.Alive() {
			return sk
		}
	}
	return nil
}

// startIdle records the base of ss's next run and, if it has a kernel
// running, starts its idle watch (ss held by the caller, about to be
// released; its quota watched); prev is the watch of the run that just
// ended (its last look is the base), nil for none.
func (s *Service) startIdle(ss *sessions.Session, prev *runWatch) {
	if !s.watched(ss) {
		return
	}
	base, ok := prev.final()
	if !ok {
		if b, over := prev.overBase(); over {
			// The run went past the quota: what it made (and what a thread
			// it left goes on writing) stays removable down to its base.
			base = b
		} else {
			base = ss.Survey(true)
		}
	}
	iw := &idleWatch{ss: ss, base: base}
	sk := s.liveKernels(ss.ID)
	if sk != nil {
		w := s.watch(ss, base)
		w.idle = true
		w.onOver = func() { s.idleOver(ss, sk, iw) }
		iw.w = w
	} else {
		sk = s.kernels(ss.ID)
	}
	sk.mu.Lock()
	old := sk.idle
	sk.idle = iw
	sk.mu.Unlock()
	if old != nil && old.w != nil {
		old.w.halt()
	}
	if ss.Closed() {
		// It ended meanwhile: its end may have let go of the set before
		// iw was in it.
		sk.mu.Lock()
		if sk.idle == iw {
			sk.idle = nil
		}
		sk.mu.Unlock()
		if iw.w != nil {
			iw.w.halt()
		}
	}
}

// pauseIdle ends ss's idle watch (ss held by the caller: a run starts):
// if it found the workspace past its quota, the kernels are stopped and
// what was made since the last run is removed first. It returns the base
// the last run left (ok false: survey again).
func (s *Service) pauseIdle(ss *sessions.Session) (sessions.Survey, bool) {
	s.ws.mu.Lock()
	sk := s.ws.k[ss.ID]
	s.ws.mu.Unlock()
	if sk == nil {
		return sessions.Survey{}, false
	}
	sk.mu.Lock()
	iw := sk.idle
	sk.idle = nil
	sk.mu.Unlock()
	if iw == nil {
		return sessions.Survey{}, false
	}
	if iw.ss != ss {
		if iw.w != nil {
			iw.w.halt()
		}
		return sessions.Survey{}, false
	}
	if iw.w != nil {
		iw.w.halt()
		iw.w.mu.Lock()
		over := iw.w.over
		iw.w.mu.Unlock()
		if over != "" {
			s.settleIdle(ss, sk, iw)
			return sessions.Survey{}, false
		}
	}
	base := iw.base
	sk.mu.Lock()
	if len(iw.kept) > 0 {
		base = base.Keep(iw.kept...)
	}
	sk.mu.Unlock()
	return base, true
}

// idleOver is called when an idle watch finds the workspace past its
// quota: the session's kernels stop at once; once the session is free (a
// file operation may hold it for a moment), what was made since the last
// run is removed. A run that takes the session first does that itself
// (pauseIdle).
func (s *Service) idleOver(ss *sessions.Session, sk *sessionKernels, iw *idleWatch) {
	s.idleKill(ss, sk, iw)
	for {
		sk.mu.Lock()
		current := sk.idle == iw
		sk.mu.Unlock()
		if !current {
			return // a run or the session's end took over
		}
		err := ss.Acquire()
		if err == nil {
			break
		}
		if !errs.Has(err, "session_busy") {
			return // closed
		}
		time.Sleep(checkEvery / 5)
	}
	defer ss.Release()
	sk.mu.Lock()
	current := sk.idle == iw
	if current {
		sk.idle = nil
	}
	sk.mu.Unlock()
	if current {
		s.settleIdle(ss, sk, iw)
	}
}

// idleKill stops the session's kernels for iw, once.
func (s *Service) idleKill(ss *sessions.Session, sk *sessionKernels, iw *idleWatch) {
	iw.w.mu.Lock()
	over := iw.w.over
	iw.w.mu.Unlock()
	sk.mu.Lock()
	if iw.killed {
		sk.mu.Unlock()
		return
	}
	iw.killed = true
	ks := sk.byLang
	sk.byLang = map[string]*kernel.Kernel{}
	for lang := range ks {
		iw.langs = append(iw.langs, lang)
		sk.restarted[lang] = "the " + lang + " kernel was stopped between cells: " + over + "; its variables are gone"
	}
	sk.mu.Unlock()
	for _, k := range ks {
		k.Close()
	}
	s.cfg.Logger.Warn("stopped a session's kernels: the workspace went past its quota between cells", "session_id", ss.ID, "why", over)
}

// settleIdle ends iw (ss held by the caller) and, if it found the
// workspace past its quota, stops the kernels and removes what was made
// since the last run; the next cells say so.
func (s *Service) settleIdle(ss *sessions.Session, sk *sessionKernels, iw *idleWatch) {
	iw.w.stop() // a last look; past the quota, the removal
	iw.w.mu.Lock()
	over, removed := iw.w.over, iw.w.removed
	iw.w.mu.Unlock()
	if over == "" {
		return
	}
	s.idleKill(ss, sk, iw)
	sk.mu.Lock()
	for _, lang := range iw.langs {
		sk.restarted[lang] = "the " + lang + " kernel was stopped between cells: " + over + removed + "; its variables are gone"
	}
	sk.mu.Unlock()
}

// idleKeep tells ss's idle watch (if any) that the server wrote path (an
// upload, within the quota): a removal for the quota never takes it.
func (s *Service) idleKeep(ss *sessions.Session, path string) {
	s.ws.mu.Lock()
	sk := s.ws.k[ss.ID]
	s.ws.mu.Unlock()
	if sk == nil {
		return
	}
	sk.mu.Lock()
	iw := sk.idle
	if iw != nil && iw.ss != ss {
		iw = nil
	}
	if iw != nil {
		iw.kept = append(iw.kept, path)
	}
	sk.mu.Unlock()
	if iw != nil && iw.w != nil {
		iw.w.keep(path)
	}
}
