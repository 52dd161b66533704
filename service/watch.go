package service

// The workspace watch of one run: it streams `file` events (paths created,
// changed or removed in /mnt/data) while the run works, so a client polling
// a long run sees its artifacts appear, and it enforces the workspace
// quota: a run that takes the workspace past SANDBOX_WORKSPACE_QUOTA (or
// past sessions.MaxFiles entries) is stopped, the files it created are
// removed (largest first) until the workspace is back under the quota,
// and the reply says so. The session keeps working.
//
// fsnotify (inotify) says when something changed; the truth is a walk of
// the workspace that never follows a link (sessions.Usage). The watch
// starts at the first check (checkEvery into the run), from a walk that
// reports what the run wrote until then: a run shorter than that, most
// cells, costs no inotify instance and no extra walk. Directories
// are watched through descriptors the server opened without following a
// link (/proc/self/fd/N), never by a path a sandbox could have swapped
// for a link. Past maxWatchedDirs, or where inotify is missing, the watch
// walks every second instead.

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/srt-mcp/srt-mcp/nofollow"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/sessions"
)

const (
	maxWatchedDirs = 64   // directories one run's watch holds open
	maxFileEvents  = 1000 // file events one run reports
	// maxNetworkDecisions bounds the proxy decisions a run's audit line
	// lists (a run can ask for hosts as fast as it likes).
	maxNetworkDecisions = 200
	// maxEventName is the longest name a file event reports (CleanName's
	// bound: no tool can name a longer one).
	maxEventName = 1024
	checkEvery   = 250 * time.Millisecond
	pollEvery    = time.Second // when some directories are not watched
	// quotaSlack is how much a stopped cell's kernel may still grow the
	// workspace during its interrupt before it is killed.
	quotaSlack = 16 << 20
)

// runWatch watches a session's workspace while one run works in it. A nil
// *runWatch watches nothing.
type runWatch struct {
	s      *Service
	ss     *sessions.Session
	quota  int64 // <= 0: none
	limit  int64 // what this run may bring the workspace to
	start  sessions.Usage
	before sessions.Listing
	base   sessions.Survey // the session when the run began: what removal leaves

	mu        sync.Mutex
	sink      func(runner.Event)
	h         runner.Handle
	cell      bool
	ended     bool   // the terminal event went out: no more file events
	over      string // why the workspace is over its quota ("": it is not)
	stopped   bool   // the watch stopped the run for it
	removed   string // what was removed to get back under the quota
	stopAt    int64
	walked    sessions.Usage // the last walk's (checkHeld adds to it)
	fsw       *fsnotify.Watcher
	dirs      map[string]*watchedDir // watch name -> directory
	blind     bool                   // some directories are not watched: walk on a timer
	dirty     bool
	pending   map[string]*runner.FileChange
	order     []string
	announced map[string]bool
	events    int
	quit      chan struct{}
	loopDone  chan struct{}
	stopOnce  sync.Once
	haltOnce  sync.Once
	network   []string         // the proxy's decisions, as the run's events passed
	after     sessions.Listing // the workspace when the run ended (its artifacts)
	// last is the final look of a watch that ended within the quota
	// (lastOK): the base of the watch that follows it.
	last   sessions.Survey
	lastOK bool

	// idle: the watch of a session between runs (its kernels live on):
	// no run to stop; onOver is called, once and in a goroutine of its
	// own, when the workspace goes past its quota.
	idle   bool
	onOver func()
	kept   map[string]bool // files uploaded meanwhile (keep)

	// onEnd settles the run's end before its terminal event is passed on;
	// afterEnd runs once it was.
	onEnd    func(end runner.Event, network []string)
	afterEnd func()
	endOnce  sync.Once
}

type watchedDir struct {
	d     *nofollow.Dir
	rel   string
	cache bool // a directory of the session's cache: counted, not reported
}

// watched says whether ss's quota is the watch's to enforce: a directory
// workspace under a quota (a workspace's own filesystem bounds it
// instead: a write past it fails in the run).
func (s *Service) watched(ss *sessions.Session) bool {
	return s.cfg.WorkspaceQuota > 0 && !ss.Bounded()
}

// watch starts the watch of a run in ss, which held base when the run
// began.
func (s *Service) watch(ss *sessions.Session, base sessions.Survey) *runWatch {
	before, start := base.Files, base.Usage
	quota := int64(0)
	if s.watched(ss) {
		quota = s.cfg.WorkspaceQuota
	}
	w := &runWatch{s: s, ss: ss, quota: quota, start: start, before: before, base: base,
		dirs: map[string]*watchedDir{}, pending: map[string]*runner.FileChange{}, announced: map[string]bool{},
		quit: make(chan struct{}), loopDone: make(chan struct{})}
	// A workspace already over its quota may shrink, not grow; what its
	// processes hold open unlinked is never let stay.
	w.limit = max(w.quota, start.Bytes-start.Held)
	go w.loop()
	return w
}

// startWatch starts watching the workspace (at the first check of a run
// still working) and queues file events for what the run wrote before; it
// returns the workspace's usage from the same walk.
func (w *runWatch) startWatch() sessions.Usage {
	sv := w.ss.Survey(w.quota > 0)
	now, u := sv.Files, sv.Usage
	w.mu.Lock()
	if fsw, err := fsnotify.NewWatcher(); err == nil && watchable {
		w.fsw = fsw
		w.addTree()
	} else {
		if err == nil {
			fsw.Close()
		}
		w.blind = true
	}
	paths := make([]string, 0, len(now))
	for p := range now {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		f := now[p]
		b, existed := w.before[p]
		switch {
		case !existed:
			w.note(f.Filename, &runner.FileChange{Path: p, Op: "created", Size: f.Size})
		case b.Size != f.Size || !b.ModTime.Equal(f.ModTime):
			w.note(f.Filename, &runner.FileChange{Path: p, Op: "changed", Size: f.Size})
		}
	}
	for p, b := range w.before {
		if _, ok := now[p]; !ok {
			w.note(b.Filename, &runner.FileChange{Path: p, Op: "removed"})
		}
	}
	w.mu.Unlock()
	return u
}

// addTree watches the workspace and its directories, then the session's
// cache and its directories, up to maxWatchedDirs in all.
func (w *runWatch) addTree() {
	w.addDirs(w.ss.Workspace, false)
	if w.ss.Cache != "" {
		w.addDirs(w.ss.Cache, true)
	}
}

// addDirs watches the directory top and the directories below it while
// maxWatchedDirs allows.
func (w *runWatch) addDirs(top string, cache bool) {
	root, err := nofollow.OpenTrusted(top)
	if err != nil {
		w.blind = true
		return
	}
	room := maxWatchedDirs - len(w.dirs) - 1
	var subdirs []string
	_ = nofollow.WalkTree(root, sessions.MaxFiles, func(rel string, st nofollow.Stat) error {
		if st.IsDir() {
			if len(subdirs) >= room {
				w.blind = true
				return nil
			}
			subdirs = append(subdirs, rel)
		}
		return nil
	})
	w.add(root, "", cache)
	for _, rel := range subdirs {
		if d, err := root.Walk(rel); err == nil {
			w.add(d, rel, cache)
		}
	}
}

// add watches the open directory d (rel in the workspace, or in the
// cache); w owns d.
func (w *runWatch) add(d *nofollow.Dir, rel string, cache bool) {
	if len(w.dirs) >= maxWatchedDirs {
		d.Close()
		w.blind = true
		return
	}
	name := watchName(d)
	if err := w.fsw.Add(name); err != nil {
		d.Close()
		w.blind = true
		return
	}
	w.dirs[name] = &watchedDir{d: d, rel: rel, cache: cache}
}

func (w *runWatch) loop() {
	defer close(w.loopDone)
	var events <-chan fsnotify.Event
	var errs <-chan error
	tick := time.NewTicker(checkEvery)
	defer tick.Stop()
	lastWalk, lastHeld := time.Now(), time.Now()
	select { // the watch starts at the first check
	case <-w.quit:
		return
	case <-tick.C:
	}
	u := w.startWatch()
	w.mu.Lock()
	w.walked = u
	if w.fsw != nil {
		events, errs = w.fsw.Events, w.fsw.Errors
	}
	w.mu.Unlock()
	w.checkUsage(u, false)
	w.mu.Lock()
	w.flushLocked()
	w.mu.Unlock()
	for {
		select {
		case <-w.quit:
			return
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			w.onChange(ev)
		case _, ok := <-errs: // an overflowed queue: only a walk knows
			if !ok {
				errs = nil
				continue
			}
			w.mu.Lock()
			w.dirty = true
			w.mu.Unlock()
		case now := <-tick.C:
			w.mu.Lock()
			walk := w.dirty || (w.blind && now.Sub(lastWalk) >= pollEvery) || w.over != ""
			w.dirty = false
			w.mu.Unlock()
			if walk {
				lastWalk = now
				w.check(false)
			} else if now.Sub(lastHeld) >= pollEvery {
				lastHeld = now
				w.checkHeld()
			}
			w.mu.Lock()
			w.flushLocked()
			w.mu.Unlock()
		}
	}
}

// onChange notes one inotify event.
func (w *runWatch) onChange(ev fsnotify.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dirty = true
	dir := w.dirs[filepath.Dir(ev.Name)]
	if dir == nil {
		return
	}
	base := filepath.Base(ev.Name)
	rel := base
	if dir.rel != "" {
		rel = dir.rel + "/" + base
	}
	if dir.cache { // counted by the next walk; no file events for the cache
		if ev.Has(fsnotify.Create) {
			if st, err := dir.d.Lstat(base); err == nil && st.IsDir() {
				if sub, err := dir.d.Sub(base); err == nil {
					w.add(sub, rel, true)
				}
			}
		}
		return
	}
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		if w.announced[rel] || w.before[sessions.WorkspaceMount+"/"+rel].Path != "" {
			w.note(rel, &runner.FileChange{Path: sessions.WorkspaceMount + "/" + rel, Op: "removed"})
		}
		return
	}
	st, err := dir.d.Lstat(base)
	if err != nil {
		return
	}
	switch {
	case st.IsDir() && ev.Has(fsnotify.Create):
		if sub, err := dir.d.Sub(base); err == nil {
			w.add(sub, rel, false)
		}
	case st.Mode.IsRegular():
		op := "changed"
		if _, existed := w.before[sessions.WorkspaceMount+"/"+rel]; !existed && !w.announced[rel] {
			op = "created"
		}
		w.note(rel, &runner.FileChange{Path: sessions.WorkspaceMount + "/" + rel, Op: op, Size: st.Size})
	}
}

// note queues a file event (a file created and changed since the last
// flush is still "created"). The path a client sees is the name the
// sandbox made, made safe to show.
func (w *runWatch) note(rel string, fc *runner.FileChange) {
	if len(rel) > maxEventName {
		return // past any name a tool can take: counted by the quota, not reported
	}
	fc.Path = WorkspaceMount + "/" + safe(rel)
	old, ok := w.pending[rel]
	if !ok {
		if len(w.order) >= maxFileEvents {
			return
		}
		w.order = append(w.order, rel)
	}
	if ok && old.Op == "created" && fc.Op == "changed" {
		fc.Op = "created"
	}
	w.pending[rel] = fc
}

// flushLocked sends the queued file events to the run (called with w.mu
// held: never after the run's terminal event).
func (w *runWatch) flushLocked() {
	if w.sink == nil || w.ended {
		return
	}
	for _, rel := range w.order {
		fc := w.pending[rel]
		if w.events >= maxFileEvents {
			break
		}
		w.events++
		w.announced[rel] = fc.Op != "removed"
		w.sink(runner.Event{Type: runner.EventFile, TS: float64(time.Now().UnixNano()) / 1e9, File: fc})
	}
	w.order = w.order[:0]
	clear(w.pending)
}

// check walks the workspace and stops the run that took it past its
// quota: at once, or for a cell, an interrupt first (its kernel and
// variables survive) and a kill if it keeps writing.
func (w *runWatch) check(final bool) {
	if w.quota <= 0 {
		return
	}
	u, err := w.ss.Usage()
	if err != nil {
		return
	}
	w.mu.Lock()
	w.walked = u
	w.mu.Unlock()
	w.checkUsage(u, final)
}

// checkHeld is check without the walk: the last walk's usage with what
// the session's processes hold open unlinked now. Writes to a file with
// no name left reach no watched directory, so between walks only this
// sees them.
func (w *runWatch) checkHeld() {
	if w.quota <= 0 {
		return
	}
	held := w.ss.HeldUnlinked()
	w.mu.Lock()
	u := w.walked
	w.mu.Unlock()
	u.Bytes += held - u.Held
	u.Held = held
	w.checkUsage(u, false)
}

// checkUsage is check with the workspace's usage at hand.
func (w *runWatch) checkUsage(u sessions.Usage, final bool) {
	if w.quota <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.over == "" && (u.Over || u.Bytes > w.limit) {
		who := "the run"
		if w.idle {
			who = "something a cell left running (a thread or a process)"
		}
		if u.Over {
			w.over = fmt.Sprintf("%s took the workspace past %d files and directories, the most a workspace may hold (SANDBOX_WORKSPACE_QUOTA counts them too)", who, sessions.MaxFiles)
		} else {
			w.over = fmt.Sprintf("%s took the workspace to %s, past its %s quota (SANDBOX_WORKSPACE_QUOTA)", who, human(u.Bytes), human(w.quota))
		}
		w.stopAt = u.Bytes
		if w.h != nil && !final {
			w.stopped = true
			w.h.Cancel(!w.cell)
		}
		if w.onOver != nil && !final {
			go w.onOver()
		}
		return
	}
	if w.over != "" && w.cell && w.h != nil && !final && u.Bytes > w.stopAt+quotaSlack {
		w.h.Cancel(true) // the interrupt did not stop the writing
	}
}

// wrap returns the sink the run's events go through: file events are
// interleaved, none follows the terminal event, and the run's end is
// settled (the watch stopped, onEnd called) before the terminal event is
// passed on.
func (w *runWatch) wrap(sink func(runner.Event)) func(runner.Event) {
	if w == nil {
		return sink
	}
	w.mu.Lock()
	w.sink = sink
	w.mu.Unlock()
	return func(ev runner.Event) {
		if v := ev.Violation; v != nil && v.Kind == "network" && v.Decision != "transfer" {
			w.mu.Lock()
			if len(w.network) < maxNetworkDecisions {
				w.network = append(w.network, fmt.Sprintf("%s %s:%d", v.Decision, v.Host, v.Port))
			}
			w.mu.Unlock()
		}
		if !ev.Terminal() {
			sink(ev)
			return
		}
		w.mu.Lock()
		w.flushLocked()
		w.ended = true
		w.mu.Unlock()
		w.end(ev)
		sink(ev)
		if w.afterEnd != nil {
			w.afterEnd()
		}
	}
}

// end stops the watch and settles the run's end, once.
func (w *runWatch) end(ev runner.Event) {
	w.endOnce.Do(func() {
		w.stop()
		if w.onEnd != nil {
			w.mu.Lock()
			network := append([]string(nil), w.network...)
			w.mu.Unlock()
			w.onEnd(ev, network)
		}
	})
}

// endWithout settles the end of a run whose terminal event never passed
// the watch (it failed to start).
func (w *runWatch) endWithout(ev *runner.Event) {
	end := runner.Event{Type: runner.EventError, ErrCode: runner.ErrCodeInternal}
	if ev != nil {
		end = *ev
	}
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
	w.end(end)
	if w.afterEnd != nil {
		w.afterEnd()
	}
}

// attach gives the watch the run to stop.
func (w *runWatch) attach(h runner.Handle, cell bool) {
	if w == nil || h == nil {
		return
	}
	w.mu.Lock()
	w.h, w.cell = h, cell
	over := w.over != ""
	w.mu.Unlock()
	if over {
		h.Cancel(!cell)
	}
}

// fileSize is the largest file a fresh run may write (RLIMIT_FSIZE): what
// the quota leaves, but never less than 16 MiB (the limit covers the
// sandbox's /tmp too: a compiler's output must fit); 0: no limit.
func (w *runWatch) fileSize() int64 {
	if w == nil || w.quota <= 0 {
		return 0
	}
	return max(w.limit-w.start.Bytes, quotaSlack)
}

// stop ends the watch (the run ended). A run stopped for the quota has the
// files it created removed, largest first, until the workspace is back
// under the quota.
func (w *runWatch) stop() {
	if w == nil {
		return
	}
	w.stopOnce.Do(func() {
		w.halt()
		w.mu.Lock()
		over := w.over
		w.mu.Unlock()
		// A last look (a run may end right after a burst), which also
		// lists what the run left: its artifacts.
		sv := w.ss.Survey(w.quota > 0)
		after, u := sv.Files, sv.Usage
		if over == "" {
			w.checkUsage(u, true)
			w.mu.Lock()
			over = w.over
			w.mu.Unlock()
		}
		if over == "" {
			w.mu.Lock()
			w.after = after
			w.last, w.lastOK = sv, true
			w.mu.Unlock()
		}
		if over != "" {
			note := w.removeCreated()
			w.mu.Lock()
			w.removed = note
			w.mu.Unlock()
		}
	})
}

// halt ends the watch's loop and lets go of its inotify instance and
// directories, without a last look (see stop).
func (w *runWatch) halt() {
	w.haltOnce.Do(func() {
		close(w.quit)
		<-w.loopDone
		w.mu.Lock()
		if w.fsw != nil {
			w.fsw.Close()
		}
		for _, d := range w.dirs {
			d.d.Close()
		}
		w.dirs = nil
		w.mu.Unlock()
	})
}

// final is the watch's last look when it ended within the quota (ok
// false: it did not, or it has not ended).
func (w *runWatch) final() (sessions.Survey, bool) {
	if w == nil {
		return sessions.Survey{}, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.lastOK
}

// overBase is the base of a run the watch found past the quota (ok false:
// it was not, or there was no watch).
func (w *runWatch) overBase() (sessions.Survey, bool) {
	if w == nil {
		return sessions.Survey{}, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.base, w.over != ""
}

// keep counts a file the server wrote (an upload) among what the watch
// found there: a removal for the quota never takes it.
func (w *runWatch) keep(path string) {
	w.mu.Lock()
	if w.kept == nil {
		w.kept = map[string]bool{}
	}
	w.kept[path] = true
	w.mu.Unlock()
}

// removeCreated removes what the run created until the workspace is under
// its quota again, and says what it removed.
func (w *runWatch) removeCreated() string {
	base := w.base
	w.mu.Lock()
	if len(w.kept) > 0 {
		base = base.Keep(slices.Collect(maps.Keys(w.kept))...)
	}
	w.mu.Unlock()
	removed, u, err := w.ss.Trim(base, w.quota)
	if err != nil {
		return "; " + err.Error()
	}
	return removedNote(removed, u, w.quota)
}

// removedNote says what a Trim removed and where the session stands.
func removedNote(removed []sessions.Removed, u sessions.Usage, quota int64) string {
	var names, cut []string
	for _, r := range removed {
		list, say := &names, fmt.Sprintf("%s (%s)", safe(r.Name), human(r.Bytes))
		if r.Cut {
			list, say = &cut, fmt.Sprintf("%s (to %s)", safe(r.Name), human(r.CutTo))
		}
		switch n := len(*list); {
		case n < 5:
			*list = append(*list, say)
		case n == 5:
			*list = append(*list, "...")
		}
	}
	var b strings.Builder
	if len(names) > 0 {
		fmt.Fprintf(&b, "; what it created was removed: %s", strings.Join(names, ", "))
	}
	if len(cut) > 0 {
		fmt.Fprintf(&b, "; files that were there before and grew were cut back to their size before: %s", strings.Join(cut, ", "))
	}
	if u.Bytes > quota || u.Over {
		fmt.Fprintf(&b, "; the workspace and its cache still hold %s, over the quota: delete files before writing more", human(u.Bytes))
	} else {
		fmt.Fprintf(&b, "; the workspace holds %s again and the session keeps working", human(u.Bytes))
	}
	return b.String()
}

// changed lists the files the run created or changed, from the walk at its
// end (ok false: there was none, list again).
func (w *runWatch) changed() (files []sessions.FileInfo, ok bool) {
	if w == nil {
		return nil, false
	}
	w.mu.Lock()
	after := w.after
	w.mu.Unlock()
	if after == nil {
		return nil, false
	}
	return sessions.Changed(w.before, after), true
}

// exceeded says why the run was stopped for the quota ("" if it was not).
func (w *runWatch) exceeded() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.over == "" {
		return ""
	}
	if w.stopped {
		return "the run was stopped: " + w.over + w.removed
	}
	return w.over + w.removed
}

// human writes a byte count the way the flags take it.
func human(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
