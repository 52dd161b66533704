// Package executions owns a server's executions: the Manager starts each
// one in its own runner process, keeps its append-only event log (read with
// cursors, so a client can poll from where it left off and reconnect
// without losing output), enforces the global and per-owner concurrency
// limits, moves each execution through its lifecycle, and frees finished
// executions after a retention period.
//
// An execution belongs to an owner (an MCP session, or the authenticated
// principal of a client without sessions). Every lookup takes the owner:
// another owner cannot read, write stdin to, or cancel it, and cannot even
// learn that it exists. It also counts against its principal's share of
// the server's execution slots, so that no principal takes them all.
package executions

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/runner"
)

// State is an execution's lifecycle state.
type State string

// States. created → running → exited | timed_out | cancelled | failed.
const (
	StateCreated   State = "created"
	StateRunning   State = "running"
	StateExited    State = "exited"
	StateTimedOut  State = "timed_out"
	StateCancelled State = "cancelled"
	StateFailed    State = "failed"
)

// transitions lists the allowed moves; anything else is a bug.
var transitions = map[State][]State{
	StateCreated: {StateRunning, StateFailed},
	StateRunning: {StateExited, StateTimedOut, StateCancelled, StateFailed},
}

// Done reports whether s is final.
func (s State) Done() bool {
	return s == StateExited || s == StateTimedOut || s == StateCancelled || s == StateFailed
}

// Status is the state as seed 002's tools (and the metrics) name it:
// running (created too), completed, timed_out, cancelled or failed.
func (s State) Status() string {
	switch s {
	case StateExited:
		return "completed"
	case StateTimedOut, StateCancelled, StateFailed:
		return string(s)
	}
	return "running"
}

func canMove(from, to State) bool {
	for _, t := range transitions[from] {
		if t == to {
			return true
		}
	}
	return false
}

// Errors returned by the Manager.
var (
	ErrNotFound = errs.New(errs.NotFound, "no such execution (it never existed or belongs to another session)")
	ErrExpired  = errs.New(errs.Expired, "the execution has expired: finished executions are kept for the retention period (SANDBOX_RETENTION) and within the server's retained-output budget (SANDBOX_RETAINED_OUTPUT), oldest first out")
	ErrFinished = errs.New(errs.ExecutionFinished, "the execution has finished; its stdin is closed")
)

// limitError is a refused start: too many executions are running, in
// scope ("global" or "session").
func limitError(scope string, limit int) error {
	if scope == "global" {
		return errs.New(errs.TooManyExecutions, "the server is running its maximum of %d executions (SANDBOX_MAX_CONCURRENT); wait for one to finish or cancel one", limit)
	}
	return errs.New(errs.TooManyExecutions, "this session is running its maximum of %d executions (SANDBOX_MAX_PER_SESSION); wait for one to finish or cancel one", limit)
}

// Starter starts one execution; runner.StartProcess is the real one.
type Starter func(spec runner.Spec, sink func(runner.Event)) (runner.Handle, error)

// Config sets the Manager's limits.
type Config struct {
	MaxConcurrent int // running executions, all owners (default 10)
	MaxPerOwner   int // running executions per owner (default 5)
	// MaxPerPrincipal bounds the sandboxes one principal runs at once (0:
	// MaxConcurrent): its share of the server.
	MaxPerPrincipal int
	Retention       time.Duration // how long finished executions stay readable (default 15m)
	MaxEvents       int           // events kept per execution (default 20000)
	// MaxRetainedBytes bounds the output all executions hold (default 256
	// MiB): past it, the finished executions that ended first are freed.
	MaxRetainedBytes int64
	// MaxRetainedPerPrincipal bounds what one principal's executions hold
	// (0: MaxRetainedBytes): past it, that principal's own finished
	// executions go first, then its running ones' output is dropped, so
	// that one key's output never frees another's results.
	MaxRetainedPerPrincipal int64
	Start                   Starter // default runner.StartProcess
	// Replica, when set, names this server in every execution id it mints
	// (exec_<replica>_<uuid>), so a proxy can route a call to its owner.
	Replica string
}

// eventOverhead is what one event costs beyond what it carries, for the
// budget (its struct, its slot in the log; measured ~3x what the old
// figure of 128 assumed).
const eventOverhead = 384

// eventSize is what an event holds, for the budget: every string a run
// chose (output, a file's path, a host it asked for, a message) counts,
// not the output alone.
func eventSize(ev runner.Event) int64 {
	n := int64(eventOverhead + len(ev.Data) + len(ev.Message) + len(ev.Report) + len(ev.Signal) + len(ev.ErrCode))
	if f := ev.File; f != nil {
		n += int64(len(f.Path) + len(f.Op))
	}
	if v := ev.Violation; v != nil {
		n += int64(len(v.Host) + len(v.Path) + len(v.Rule) + len(v.Action) + len(v.Protocol) + len(v.Method) + len(v.Reason))
		for _, c := range v.Credentials {
			n += int64(len(c))
		}
	}
	for _, t := range ev.Truncated {
		n += int64(len(t))
	}
	return n
}

// maxExpired bounds how many freed ids are remembered (to answer
// ErrExpired rather than ErrNotFound).
const maxExpired = 100000

// Manager is the registry of executions.
type Manager struct {
	cfg     Config
	mu      sync.Mutex
	execs   map[string]*Execution
	running map[string]int // owner -> running count
	// sandboxesOf counts the running sandboxes of each principal.
	sandboxesOf map[string]int
	total       int
	freed       int // executions freed since the last reclaim
	// sandboxes counts the running executions that started a sandbox
	// (MaxConcurrent bounds them; cells run in a kernel already started).
	sandboxes int
	bytes     int64             // output held by all executions
	bytesOf   map[string]int64  // output held by each principal's executions
	expired   map[string]string // freed id -> owner
	expOrd    []string
	stop      chan struct{}
	once      sync.Once
}

// NewManager returns a Manager and starts its retention sweeper.
func NewManager(cfg Config) *Manager {
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = 10
	}
	if cfg.MaxPerOwner <= 0 {
		cfg.MaxPerOwner = 5
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 15 * time.Minute
	}
	if cfg.MaxEvents <= 0 {
		cfg.MaxEvents = 20000
	}
	if cfg.MaxRetainedBytes <= 0 {
		cfg.MaxRetainedBytes = 256 << 20
	}
	if cfg.Start == nil {
		cfg.Start = func(s runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
			return runner.StartProcess(s, sink)
		}
	}
	m := &Manager{cfg: cfg, execs: map[string]*Execution{}, running: map[string]int{}, sandboxesOf: map[string]int{},
		bytesOf: map[string]int64{}, expired: map[string]string{}, stop: make(chan struct{})}
	go m.sweepLoop()
	return m
}

// Owner is who an execution belongs to.
type Owner struct {
	// Key scopes it: lookups (Lookup's may) and the per-owner limit.
	Key string
	// Principal counts its sandbox against the principal's share of the
	// server ("": the server's own work, unshared).
	Principal string
}

// Execution is one run and its event log.
type Execution struct {
	ID        string
	Owner     string // its Owner's Key
	Principal string
	Label     string // the command, for listings
	Created   time.Time
	m         *Manager

	mu        sync.Mutex
	state     State
	events    []runner.Event
	dropped   bool // events past MaxEvents were dropped
	changed   chan struct{}
	handle    runner.Handle
	end       *runner.Event
	endedAt   time.Time
	bytes     int64  // what its events hold, for the budget
	seq       uint64 // the last event's number
	sandbox   bool   // counted against MaxConcurrent
	forgotten bool   // its owner is gone: freed when it ends
}

// Start launches spec for owner. It refuses, never queues, when a limit is
// reached.
func (m *Manager) Start(owner Owner, label string, spec runner.Spec) (*Execution, error) {
	return m.StartWith(owner, label, spec, m.cfg.Start)
}

// Starter returns the Manager's own launcher.
func (m *Manager) Starter() Starter { return m.cfg.Start }

// StartWith is Start with another launcher (a data session's backend).
func (m *Manager) StartWith(owner Owner, label string, spec runner.Spec, start Starter) (*Execution, error) {
	return m.start(owner, label, spec, start, true)
}

// StartCell starts a cell of an interpreter that already runs (a
// session's kernel): it counts against the owner's limit but not against
// MaxConcurrent, which bounds the sandboxes started at once (the kernels
// themselves are bounded by the session cap).
func (m *Manager) StartCell(owner Owner, label string, start Starter) (*Execution, error) {
	return m.start(owner, label, runner.Spec{}, start, false)
}

func (m *Manager) start(o Owner, label string, spec runner.Spec, start Starter, global bool) (*Execution, error) {
	owner := o.Key
	m.mu.Lock()
	if global && m.sandboxes >= m.cfg.MaxConcurrent {
		m.mu.Unlock()
		return nil, limitError("global", m.cfg.MaxConcurrent)
	}
	if share := m.cfg.MaxPerPrincipal; global && o.Principal != "" && share > 0 && m.sandboxesOf[o.Principal] >= share {
		m.mu.Unlock()
		return nil, errs.New(errs.TooManyExecutions, "this API key is running %d executions, its share of the server's %d (SANDBOX_MAX_CONCURRENT is shared between keys); wait for one to finish or cancel one",
			m.sandboxesOf[o.Principal], m.cfg.MaxConcurrent)
	}
	if m.running[owner] >= m.cfg.MaxPerOwner {
		m.mu.Unlock()
		return nil, limitError("session", m.cfg.MaxPerOwner)
	}
	id := uuid.NewString()
	if m.cfg.Replica != "" {
		id = "exec_" + m.cfg.Replica + "_" + id
	}
	e := &Execution{ID: id, Owner: owner, Principal: o.Principal, Label: label, Created: time.Now(), m: m,
		state: StateCreated, changed: make(chan struct{}), sandbox: global}
	m.execs[e.ID] = e
	m.total++
	if global {
		m.sandboxes++
		m.sandboxesOf[o.Principal]++
	}
	m.running[owner]++
	m.mu.Unlock()

	spec.ID = e.ID
	spec.Version = runner.SpecVersion
	h, err := start(spec, e.onEvent)
	if err != nil {
		code, msg := runner.ErrCodeInternal, err.Error()
		var re *runner.Error
		if errors.As(err, &re) { // the backend said what went wrong
			code, msg = re.Code, re.Message
		}
		e.onEvent(runner.Event{Seq: 1, Type: runner.EventError, TS: float64(time.Now().UnixNano()) / 1e9,
			ErrCode: code, Message: msg})
		return e, nil
	}
	e.mu.Lock()
	if !e.state.Done() { // a run that already ended keeps no handle
		e.handle = h
	}
	if e.state == StateCreated {
		e.move(StateRunning)
	}
	e.mu.Unlock()
	return e, nil
}

// onEvent appends one runner event; the terminal one settles the state.
//
// What the event holds is reserved in the server's retained-output budget
// first: a running execution's output past the budget (once every finished
// execution that could be freed is) is dropped, and the execution says its
// events were cut. Terminal events are always kept.
func (e *Execution) onEvent(ev runner.Event) {
	size := eventSize(ev)
	reserved := e.m.reserve(e.Principal, size, ev.Terminal())
	e.mu.Lock()
	// The execution numbers its events itself: the server adds events of
	// its own (file changes) between the runner's.
	e.seq++
	ev.Seq = e.seq
	if reserved && (len(e.events) < e.m.cfg.MaxEvents || ev.Terminal()) {
		e.events = append(e.events, ev)
		e.bytes += size
	} else {
		e.dropped = true
		if reserved {
			e.m.unreserve(e.Principal, size)
		}
	}
	var released bool
	if ev.Terminal() && e.end == nil {
		end := ev
		e.end = &end
		e.endedAt = time.Now()
		// What ran it (a runner, a cell, its watch) is no longer needed:
		// a finished execution holds only its events.
		e.handle = nil
		if e.state == StateCreated {
			e.move(StateRunning)
		}
		switch ev.Type {
		case runner.EventExit:
			e.move(StateExited)
		case runner.EventTimeout:
			e.move(StateTimedOut)
		case runner.EventCancelled:
			e.move(StateCancelled)
		default:
			e.move(StateFailed)
		}
		released = true
	}
	close(e.changed)
	e.changed = make(chan struct{})
	forgotten := e.forgotten
	e.mu.Unlock()
	if released {
		e.m.release(e)
		if forgotten { // its owner is gone: nobody can read it
			e.m.mu.Lock()
			if e.m.execs[e.ID] == e {
				e.m.freeLocked(e)
			}
			e.m.mu.Unlock()
		}
	}
}

// ForgetOwner frees owner's finished executions now and the running ones
// when they end (the owner's MCP session ended: no one else may read
// them), so that a server's memory follows its live callers.
func (m *Manager) ForgetOwner(owner string) {
	m.ForgetWhere(func(o string) bool { return o == owner })
}

// ForgetWhere is ForgetOwner for every owner that passes may.
func (m *Manager) ForgetWhere(may func(owner string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.execs {
		if !may(e.Owner) {
			continue
		}
		e.mu.Lock()
		done := e.state.Done()
		e.forgotten = true
		e.mu.Unlock()
		if done {
			m.freeLocked(e)
		}
	}
}

// reserve takes n bytes of the retained-output budget for an event of
// principal's. Past principal's share it frees that principal's own
// finished executions first; past the budget, finished executions, those
// that ended first first. If that is not enough the event is refused
// (false), unless force (a terminal event: every execution keeps its end).
func (m *Manager) reserve(principal string, n int64, force bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	share := m.cfg.MaxRetainedPerPrincipal
	shared := principal != "" && share > 0 && share < m.cfg.MaxRetainedBytes
	if shared && m.bytesOf[principal]+n > share {
		m.freeFinishedLocked(func(e *Execution) bool { return e.Principal == principal }, func() bool {
			return m.bytesOf[principal]+n <= share-share/10
		})
	}
	if shared && m.bytesOf[principal]+n > share && !force {
		return false
	}
	if m.bytes+n > m.cfg.MaxRetainedBytes {
		target := m.cfg.MaxRetainedBytes - m.cfg.MaxRetainedBytes/10 - n
		m.freeFinishedLocked(func(*Execution) bool { return true }, func() bool { return m.bytes <= target })
	}
	if m.bytes+n > m.cfg.MaxRetainedBytes && !force {
		return false
	}
	m.bytes += n
	m.bytesOf[principal] += n
	return true
}

// unreserve gives back a reservation whose event was not kept.
func (m *Manager) unreserve(principal string, n int64) {
	m.mu.Lock()
	m.bytes -= n
	m.dropBytesLocked(principal, n)
	m.mu.Unlock()
}

func (m *Manager) dropBytesLocked(principal string, n int64) {
	if m.bytesOf[principal] -= n; m.bytesOf[principal] <= 0 {
		delete(m.bytesOf, principal)
	}
}

// freeFinishedLocked frees the finished executions that pass which, those
// that ended first first, until enough says so.
func (m *Manager) freeFinishedLocked(which func(*Execution) bool, enough func() bool) {
	var done []*Execution
	for _, e := range m.execs {
		if !which(e) {
			continue
		}
		e.mu.Lock()
		if e.state.Done() {
			done = append(done, e)
		}
		e.mu.Unlock()
	}
	sort.Slice(done, func(i, j int) bool { return done[i].endedAt.Before(done[j].endedAt) })
	for _, e := range done {
		if enough() {
			break
		}
		m.freeLocked(e)
	}
}

// freeLocked forgets an execution, remembering its id as expired.
func (m *Manager) freeLocked(e *Execution) {
	m.freed++
	delete(m.execs, e.ID)
	e.mu.Lock()
	m.bytes -= e.bytes
	m.dropBytesLocked(e.Principal, e.bytes)
	e.mu.Unlock()
	m.expired[e.ID] = e.Owner
	m.expOrd = append(m.expOrd, e.ID)
	if len(m.expOrd) > maxExpired {
		drop := m.expOrd[:len(m.expOrd)-maxExpired]
		for _, id := range drop {
			delete(m.expired, id)
		}
		m.expOrd = append([]string(nil), m.expOrd[len(drop):]...)
	}
}

// RetainedBytes is the output all executions hold now.
func (m *Manager) RetainedBytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bytes
}

func (e *Execution) move(to State) {
	if !canMove(e.state, to) {
		panic(fmt.Sprintf("executions: illegal transition %s -> %s", e.state, to))
	}
	e.state = to
}

func (m *Manager) release(e *Execution) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.total--
	if e.sandbox {
		m.sandboxes--
		if m.sandboxesOf[e.Principal]--; m.sandboxesOf[e.Principal] <= 0 {
			delete(m.sandboxesOf, e.Principal)
		}
	}
	if m.running[e.Owner]--; m.running[e.Owner] <= 0 {
		delete(m.running, e.Owner)
	}
}

// Snapshot is a consistent view of an execution.
type Snapshot struct {
	ID        string
	State     State
	End       *runner.Event
	Events    []runner.Event // events with Seq > the cursor asked for
	NextSeq   uint64         // the cursor to ask with next time
	Dropped   bool
	Created   time.Time
	Label     string
	Truncated []string
}

// Snapshot returns the events after seq (0: all) and the current state.
func (e *Execution) Snapshot(after uint64) Snapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := Snapshot{ID: e.ID, State: e.state, Dropped: e.dropped, Created: e.Created, Label: e.Label, NextSeq: after}
	i := sort.Search(len(e.events), func(i int) bool { return e.events[i].Seq > after })
	s.Events = append([]runner.Event(nil), e.events[i:]...)
	if n := len(e.events); n > 0 && e.events[n-1].Seq > after {
		s.NextSeq = e.events[n-1].Seq
	}
	if e.end != nil {
		end := *e.end
		s.End = &end
		s.Truncated = end.Truncated
	}
	return s
}

// Wait blocks until an event after seq exists, the execution ended, or ctx
// is done, and returns a snapshot from seq.
func (e *Execution) Wait(ctx context.Context, after uint64, untilDone bool) Snapshot {
	for {
		e.mu.Lock()
		ch := e.changed
		var last uint64
		if n := len(e.events); n > 0 {
			last = e.events[n-1].Seq
		}
		done := e.state.Done()
		e.mu.Unlock()
		if done || (!untilDone && last > after) {
			return e.Snapshot(after)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return e.Snapshot(after)
		}
	}
}

// State returns the current state.
func (e *Execution) State() State {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state
}

// live returns the runner handle of an execution that can still take
// input or be cancelled.
func (e *Execution) live() (runner.Handle, error) {
	e.mu.Lock()
	h, st := e.handle, e.state
	e.mu.Unlock()
	if st.Done() {
		return nil, ErrFinished
	}
	if h == nil {
		return nil, errStarting
	}
	return h, nil
}

var errStarting = errors.New("the execution is still starting; retry")

// SendStdin writes data to the command's stdin.
func (e *Execution) SendStdin(data []byte) error {
	h, err := e.live()
	if err != nil {
		return err
	}
	_, err = h.Write(data)
	if errors.Is(err, runner.ErrExited) {
		return ErrFinished
	}
	return err
}

// CloseStdin ends the command's input (^D on a terminal).
func (e *Execution) CloseStdin() error {
	h, err := e.live()
	if err != nil {
		return err
	}
	return h.CloseStdin()
}

// Cancel ends the execution: SIGTERM, grace, SIGKILL; or SIGKILL at once.
func (e *Execution) Cancel(force bool) error {
	h, err := e.live()
	if errors.Is(err, ErrFinished) {
		return err
	}
	if h != nil {
		h.Cancel(force)
	}
	return nil
}

// Done is closed when the execution has its terminal event.
func (e *Execution) Done() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		e.Wait(context.Background(), 0, true)
		close(done)
	}()
	return done
}

// Get finds owner's execution id.
func (m *Manager) Get(owner, id string) (*Execution, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.execs[id]
	if !ok || e.Owner != owner {
		if o, gone := m.expired[id]; gone && o == owner {
			return nil, ErrExpired
		}
		return nil, ErrNotFound
	}
	return e, nil
}

// Lookup finds execution id for a caller that holds its id and may reach
// what its owner owns (may answers for the owner; never nil).
func (m *Manager) Lookup(id string, may func(owner string) bool) (*Execution, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.execs[id]
	if !ok || !may(e.Owner) {
		if o, gone := m.expired[id]; gone && may(o) {
			return nil, ErrExpired
		}
		return nil, ErrNotFound
	}
	return e, nil
}

// ListWhere returns the executions whose owner passes may, oldest first.
func (m *Manager) ListWhere(may func(owner string) bool) []*Execution {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Execution
	for _, e := range m.execs {
		if may(e.Owner) {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// List returns owner's executions, oldest first.
func (m *Manager) List(owner string) []*Execution {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Execution
	for _, e := range m.execs {
		if e.Owner == owner {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// CancelOwner cancels every running execution of owner (a session ended).
func (m *Manager) CancelOwner(owner string, force bool) int {
	return m.CancelWhere(func(o string) bool { return o == owner }, force)
}

// CancelWhere is CancelOwner for every owner that passes may.
func (m *Manager) CancelWhere(may func(owner string) bool, force bool) int {
	n := 0
	for _, e := range m.ListWhere(may) {
		if e.Cancel(force) == nil {
			n++
		}
	}
	return n
}

// Running reports the number of running executions.
func (m *Manager) Running() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total
}

// RunningExcept is how many executions are not done, those of owners
// aside (read at one moment: a difference of separate reads can be off
// by one, below zero even, while those owners' runs start and end).
func (m *Manager) RunningExcept(owners ...string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.total
	for _, o := range owners {
		n -= m.running[o]
	}
	return n
}

// RunningOf is how many of owner's executions are not done.
func (m *Manager) RunningOf(owner string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running[owner]
}

func (m *Manager) sweepLoop() {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	sweep := time.Now()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			if now.Sub(sweep) >= time.Minute {
				m.Sweep(now)
				sweep = now
			}
			m.reclaim()
		}
	}
}

// reclaimAfter is how many executions must have been freed since the last
// time before the Manager gives their memory back to the OS.
const reclaimAfter = 1000

// reclaim returns memory to the OS once many executions were freed (a
// burst of callers came and went): Go keeps a heap it grew for a load
// until its scavenger gets round to it, and a server's footprint should
// follow its live callers.
func (m *Manager) reclaim() {
	m.mu.Lock()
	n := m.freed
	if n >= reclaimAfter {
		m.freed = 0
	}
	m.mu.Unlock()
	if n >= reclaimAfter {
		debug.FreeOSMemory()
	}
}

// Sweep frees executions that finished more than Retention before now.
func (m *Manager) Sweep(now time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, e := range m.execs {
		e.mu.Lock()
		old := e.state.Done() && now.Sub(e.endedAt) > m.cfg.Retention
		e.mu.Unlock()
		if old {
			m.freeLocked(e)
			n++
		}
	}
	return n
}

// Shutdown cancels every execution and waits for them, up to ctx.
func (m *Manager) Shutdown(ctx context.Context) {
	m.once.Do(func() { close(m.stop) })
	m.mu.Lock()
	var all []*Execution
	for _, e := range m.execs {
		all = append(all, e)
	}
	m.mu.Unlock()
	for _, e := range all {
		_ = e.Cancel(false)
	}
	for _, e := range all {
		select {
		case <-e.Done():
		case <-ctx.Done():
			for _, e := range all {
				_ = e.Cancel(true)
			}
			return
		}
	}
}
