package runner

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process is a runner started by StartProcess: the parent's handle on one
// execution running in its own "srt-mcp __runner" process. Its methods match
// Run's, and its events are the runner's, delivered to the sink in order.
type Process struct {
	cmd  *exec.Cmd
	sink func(Event)
	// pool is the Pool that started it; from is set when its runner serves
	// one execution after another: once this one ended cleanly, it goes
	// back to the pool.
	from *spawned
	pool *Pool

	mu       sync.Mutex
	ctl      *os.File
	term     *Event
	done     chan struct{}
	stdinC   bool
	killed   bool // Kill was called: the runner is not reused
	released bool // the runner went back to the pool: Kill no longer applies

	soonTimer *time.Timer // see Pool: the execution counts as returning soon
	soonDone  bool
}

// StartProcess re-executes the srt-mcp binary in runner mode and hands it
// spec over fd 3. The runner's lifetime is tied to this process (Pdeathsig
// on Linux, EOF on the control fd everywhere).
func StartProcess(spec Spec, sink func(Event)) (*Process, error) {
	return StartProcessWith("", spec, sink)
}

// StartProcessWith is StartProcess with an explicit srt-mcp binary to run
// as the runner (and, bind-mounted, as the sandbox's exec stage); "" means
// this process's own executable.
func StartProcessWith(binary string, spec Spec, sink func(Event)) (*Process, error) {
	body, err := specBody(spec)
	if err != nil {
		return nil, err
	}
	r, err := spawnRunner(binary, "", false)
	if err != nil {
		return nil, err
	}
	return r.run(body, sink, nil), nil
}

func specBody(spec Spec) ([]byte, error) {
	spec.Version = SpecVersion
	body, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	if len(body) > MaxSpecBytes {
		return nil, fmt.Errorf("the execution spec is %d bytes, more than the %d the runner accepts", len(body), MaxSpecBytes)
	}
	return body, nil
}

// spawned is a runner process that has started and waits for its next
// execution: on its spec pipe (fresh), or, having served some, on its
// hand-off socket (see handoff.go).
type spawned struct {
	cmd              *exec.Cmd
	specW, evR, ctlW *os.File // this execution's parent ends
	hand             *os.File // the hand-off socket; nil for a one-execution runner
	runs             int      // executions handed to it so far
	idleSince        time.Time
	// shape is the routing key (prestartKey) of the sandbox the runner
	// starts after its current execution, "" for none; gen is the pool's
	// generation it was handed its last execution in.
	shape string
	gen   uint64
	// readyAfter is the execution (by number) after which the runner's
	// pre-started sandbox is ready (readReady); it holds one when that is
	// its last. noneAfter is the last after which it said it holds none.
	readyAfter, noneAfter atomic.Int64
}

// prestarted reports whether the runner holds a ready sandbox for the
// next execution of its shape.
func (r *spawned) prestarted() bool { return r.shape != "" && r.readyAfter.Load() == int64(r.runs) }

// holdsNone reports whether the runner holds no sandbox and starts none:
// it takes any execution at once. A runner neither holding one nor none
// is still starting one; an execution handed to it would wait for that.
func (r *spawned) holdsNone() bool { return r.shape == "" || r.noneAfter.Load() == int64(r.runs) }

// runPipes are one execution's three pipes.
type runPipes struct {
	specR, specW, evR, evW, ctlR, ctlW *os.File
}

func newRunPipes() (*runPipes, error) {
	var p runPipes
	var err error
	if p.specR, p.specW, err = os.Pipe(); err != nil {
		return nil, err
	}
	if p.evR, p.evW, err = os.Pipe(); err != nil {
		p.specR.Close()
		p.specW.Close()
		return nil, err
	}
	if p.ctlR, p.ctlW, err = os.Pipe(); err != nil {
		p.closeChild()
		p.closeParent()
		return nil, err
	}
	return &p, nil
}

// closeChild closes the runner's ends (once it has its own copies).
func (p *runPipes) closeChild() {
	for _, f := range []*os.File{p.specR, p.evW, p.ctlR} {
		if f != nil {
			f.Close()
		}
	}
}

func (p *runPipes) closeParent() {
	for _, f := range []*os.File{p.specW, p.evR, p.ctlW} {
		if f != nil {
			f.Close()
		}
	}
}

// spawnRunner starts "srt-mcp __runner" with its three pipes, the stage
// binary as fd 6 when stage is not "", and with handoff a socket on which
// it takes one execution after another.
func spawnRunner(binary, stage string, handoff bool) (*spawned, error) {
	self := binary
	if self == "" {
		var err error
		if self, err = selfExe(); err != nil {
			return nil, fmt.Errorf("locate the srt-mcp binary: %w", err)
		}
	}
	var stageF *os.File
	if stage != "" {
		f, err := os.Open(stage)
		if err != nil {
			return nil, fmt.Errorf("open the stage binary: %w", err)
		}
		defer f.Close() // the runner has its own copy once started
		stageF = f
	}
	pipes, err := newRunPipes()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, ModeRunner)
	cmd.Args[0] = "srt-mcp-runner"
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.ExtraFiles = []*os.File{pipes.specR, pipes.evW, pipes.ctlR}
	if stageF != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, stageF)
		cmd.Args = append(cmd.Args, argStageFD)
	}
	var hand, handChild *os.File
	if handoff {
		fds, err := streamSocketpair()
		if err != nil {
			pipes.closeChild()
			pipes.closeParent()
			return nil, err
		}
		// Non-blocking, so that reading what the runner says (readReady)
		// waits in the runtime's poller, not on a thread.
		_ = unix.SetNonblock(fds[0], true)
		hand, handChild = os.NewFile(uintptr(fds[0]), "runner-handoff"), os.NewFile(uintptr(fds[1]), "runner-handoff-child")
		cmd.ExtraFiles = append(cmd.ExtraFiles, handChild)
		cmd.Args = append(cmd.Args, fmt.Sprintf("%s%d", argHandoffPrefix, 2+len(cmd.ExtraFiles)))
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = runnerSysProcAttr()
	err = cmd.Start()
	pipes.closeChild()
	if handChild != nil {
		handChild.Close()
	}
	if err != nil {
		pipes.closeParent()
		if hand != nil {
			hand.Close()
		}
		return nil, fmt.Errorf("start runner: %w", err)
	}
	r := &spawned{cmd: cmd, specW: pipes.specW, evR: pipes.evR, ctlW: pipes.ctlW, hand: hand}
	if hand != nil {
		go r.readReady()
	}
	return r, nil
}

// rearm hands a runner that has served an execution the pipes of the next.
func (r *spawned) rearm() error {
	pipes, err := newRunPipes()
	if err != nil {
		return err
	}
	err = sendRun(r.hand, pipes.specR, pipes.evW, pipes.ctlR)
	pipes.closeChild()
	if err != nil {
		pipes.closeParent()
		return fmt.Errorf("hand the runner its next execution: %w", err)
	}
	r.specW, r.evR, r.ctlW = pipes.specW, pipes.evR, pipes.ctlW
	return nil
}

// run hands the runner its spec and follows its events; a pool that is
// not nil gets the runner back when the execution ended cleanly.
func (r *spawned) run(body []byte, sink func(Event), pool *Pool) *Process {
	p := &Process{cmd: r.cmd, sink: sink, ctl: r.ctlW, done: make(chan struct{})}
	p.pool = pool
	if pool != nil && r.hand != nil {
		p.from = r
	}
	r.runs++
	specW, evR := r.specW, r.evR
	r.specW, r.evR, r.ctlW = nil, nil, nil // the Process's now
	go func() {
		_, _ = specW.Write(body)
		specW.Close()
	}()
	go p.readEvents(evR)
	return p
}

// discard ends a runner that waits for an execution: EOF on its spec or
// its hand-off socket, and it exits once it has taken down the sandbox it
// started ahead and removed its runs' cgroups (the kernel may hold them a
// few milliseconds after a sandbox's end); killed only if it has not
// exited after discardGrace (a killed runner leaves them to the sweep).
func (r *spawned) discard() {
	for _, f := range []*os.File{r.specW, r.ctlW, r.hand} {
		if f != nil {
			f.Close()
		}
	}
	exited := make(chan struct{})
	go func() {
		select {
		case <-exited:
		case <-time.After(discardGrace):
			_ = r.cmd.Process.Kill()
		}
	}()
	_ = r.cmd.Wait()
	close(exited)
	if r.evR != nil {
		r.evR.Close()
	}
}

// alive tells whether the runner is still waiting (nobody killed it).
func (r *spawned) alive() bool { return processAlive(r.cmd.Process.Pid) }

// A Pool keeps runners started ahead of need, so that an execution does
// not wait for a process to start and initialise (a few milliseconds of
// every cold run), and takes each runner back when its execution ended
// cleanly: a runner serves one execution after another (handoff.go), so
// the CPU of starting a process is paid once per runner, not per run.
//
// It keeps size runners idle, counting those of executions that started
// within returnSoon (they are about to come back: a sequential caller then
// never waits for a start, and no runner is started per execution); an
// execution that runs longer (a kernel) stops counting. After a burst it
// keeps what came back (up to maxIdleRunners) for idleRunnerTTL, so that
// the next burst finds them, then lets the extra ones go.
type Pool struct {
	binary, stage string
	size          int
	// prestart: each execution's runner starts a sandbox for the next
	// execution of the same shape once it is done (prestart.go); Start
	// hands an execution to a runner holding one of its shape.
	prestart bool

	// ending counts the runners being ended (letGo): Close waits for
	// them, so that none is left working in the server's cache once it
	// returns.
	ending atomic.Int64
	// busy are the executions its runners serve (Close tells them to start
	// no sandbox ahead when they end).
	busy map[*Process]bool

	mu      sync.Mutex
	idle    []*spawned
	filling int
	soon    int // runners of executions started within returnSoon
	closed  bool
	gen     uint64 // Drain calls: a runner from before one keeps no sandbox
	stats   PrestartStats
	cpu     cpuGauge
	// busyLimit is prestartBusyLimit (tests that need sandboxes started
	// ahead whatever else runs raise it).
	busyLimit float64
	// onDiscard hears why a pre-started sandbox changed while it waited or
	// could not start (OnDiscard).
	onDiscard func(result, reason string)
}

// OnDiscard calls f with the result (PrestartChanged, PrestartFailed) and
// the reason of every pre-started sandbox that changed while it waited or
// could not start: the operator's to read (it names the run's host paths),
// not for a public endpoint.
func (p *Pool) OnDiscard(f func(result, reason string)) {
	p.mu.Lock()
	p.onDiscard = f
	p.mu.Unlock()
}

// PrestartStats counts how the pool's executions got their sandboxes.
type PrestartStats struct {
	// Claimed ran in a sandbox started ahead of them; Cold started their
	// own (the runner had none), as did Unfit (the runner's was of another
	// shape), Changed (the runner's changed while it waited) and Failed
	// (the runner's could not be started). Unfit, Changed and Failed
	// sandboxes were discarded.
	Claimed, Cold, Unfit, Changed, Failed uint64
	// BuildSeconds is the time the pre-started sandboxes that were used
	// or discarded took to start, in all; Builds how many they were.
	BuildSeconds float64
	Builds       uint64
	// Ready is the idle runners whose sandbox is started and recorded,
	// waiting for a run of its shape.
	Ready int
}

const (
	maxIdleRunners = 32
	idleRunnerTTL  = 10 * time.Second
	returnSoon     = 2 * time.Second
	// closeWait bounds how long Close waits for the runners it ended;
	// discardGrace how long one is given to exit by itself.
	closeWait    = 5 * time.Second
	discardGrace = 5 * time.Second
)

// NewPool keeps size runners of binary ("": this executable) waiting; size
// 0 keeps none and reuses none (a process per execution). A
// stage that is not "" is the binary their sandboxes run inside
// (cmd/srt-mcp-stage); "" means the runner's own.
func NewPool(binary, stage string, size int) *Pool {
	p := &Pool{binary: binary, stage: stage, size: size, busyLimit: prestartBusyLimit, busy: map[*Process]bool{}}
	p.refill()
	return p
}

// Prestart makes each runner start, after an execution, a sandbox for the
// next execution of the same shape (see prestart.go), and keeps at least
// sandboxes runners waiting when idle (each holds one once it has served
// an execution). 0 turns it off.
func (p *Pool) Prestart(sandboxes int) {
	p.mu.Lock()
	p.prestart = sandboxes > 0
	if sandboxes > p.size {
		p.size = sandboxes
	}
	p.mu.Unlock()
	p.refill()
}

// PrestartNow reports whether a run ending now would start a sandbox
// ahead of the next (the pool pre-starts them and the machine is within
// its CPU budget): the Docker backend asks it for its sessions' next runs.
func (p *Pool) PrestartNow() bool {
	p.mu.Lock()
	on, limit := p.prestart, p.busyLimit
	p.mu.Unlock()
	return on && p.cpu.Busy() < limit
}

// PrestartBusyLimit sets the CPU budget of sandboxes started ahead: none
// is started after a run when the machine was busier than percent (of all
// its CPUs) since the pool's last look; 100 or more: always.
func (p *Pool) PrestartBusyLimit(percent float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.busyLimit = percent / 100
	if percent >= 100 {
		p.busyLimit = 2
	}
}

// Drain lets go of every pre-started sandbox (the operator's ceiling
// changed: they were made under the old one): idle runners are ended, and
// those serving an execution are when it ends.
func (p *Pool) Drain() {
	p.mu.Lock()
	p.gen++
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, r := range idle {
		p.letGo(r)
	}
	p.refill()
}

// Stats reports how the pool's executions got their sandboxes.
func (p *Pool) Stats() PrestartStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	for _, r := range p.idle {
		if r.gen == p.gen && r.prestarted() {
			st.Ready++
		}
	}
	return st
}

// count records an execution's sandbox (out nil: its runner had none).
func (p *Pool) count(out *PrestartOutcome) {
	p.mu.Lock()
	if out == nil {
		p.stats.Cold++
		p.mu.Unlock()
		return
	}
	discarded := false
	switch out.Result {
	case PrestartClaimed:
		p.stats.Claimed++
	case PrestartUnfit:
		p.stats.Unfit++
	case PrestartChanged:
		p.stats.Changed++
		discarded = true
	default:
		p.stats.Failed++
		discarded = true
	}
	p.stats.Builds++
	p.stats.BuildSeconds += out.BuildMS / 1000
	f := p.onDiscard
	p.mu.Unlock()
	if discarded && f != nil {
		f(out.Result, out.Reason)
	}
}

// prestartKey is what Start matches an execution with a runner's
// pre-started sandbox by: the spec without what comes with the go
// message or is the run's alone (its id, command, environment, stdio,
// rlimits, timeout, output cap, credentials' values). The runner checks
// the sandbox itself (sandboxShape); the key only routes. "" when the
// execution's sandbox is not pre-started (an interactive one, or one with
// mounts of its own: a data session's).
func prestartKey(spec Spec) string {
	if spec.Stdin == StdinPTY || len(spec.Mounts) > 0 {
		return ""
	}
	spec.ID, spec.Argv, spec.Direct, spec.Env, spec.Egress = "", nil, nil, nil, nil
	spec.Stdin, spec.Rows, spec.Cols, spec.Report, spec.Prestart, spec.Grace = "", 0, 0, false, false, 0
	l := &spec.Policy.Limits
	l.Timeout, l.MaxOutputBytes, l.MaxFileSizeBytes, l.MaxOpenFiles = 0, 0, 0, 0
	b, err := json.Marshal(spec)
	if err != nil {
		return ""
	}
	return string(b)
}

// Start is StartProcessWith with a waiting runner when there is one: one
// holding a sandbox of the execution's shape when the pool pre-starts
// them.
func (p *Pool) Start(spec Spec, sink func(Event)) (*Process, error) {
	p.mu.Lock()
	prestart, gen := p.prestart, p.gen
	p.mu.Unlock()
	key := ""
	if prestart {
		key = prestartKey(spec)
	}
	// Within a CPU budget: on a busy machine the run's runner starts no
	// sandbox after it (see prestartBusyLimit), but a waiting one of the
	// run's shape is still used.
	ahead := key != "" && p.PrestartNow()
	spec.Prestart = ahead
	body, err := specBody(spec)
	if err != nil {
		return nil, err
	}
	var r *spawned
	p.mu.Lock()
	for len(p.idle) > 0 && r == nil {
		// The most recently used runner holding the shape's sandbox, else
		// the most recently used holding none (its pages are warm); else a
		// new runner, or, with the pool full, one holding a sandbox of
		// another shape (discarded in a few milliseconds). Never one whose
		// sandbox is still starting: the run would wait for it, for as long
		// as another caller's policy takes to plan.
		pick := -1
		for i := len(p.idle) - 1; i >= 0 && pick < 0 && key != ""; i-- {
			if p.idle[i].shape == key && p.idle[i].gen == gen && p.idle[i].prestarted() {
				pick = i
			}
		}
		for i := len(p.idle) - 1; i >= 0 && pick < 0; i-- {
			if p.idle[i].holdsNone() {
				pick = i
			}
		}
		if pick < 0 && (key != "" && len(p.idle)+p.soon < maxIdleRunners) {
			break
		}
		for i := len(p.idle) - 1; i >= 0 && pick < 0; i-- {
			if p.idle[i].prestarted() {
				pick = i
			}
		}
		if pick < 0 {
			break
		}
		r = p.idle[pick]
		p.idle = append(p.idle[:pick], p.idle[pick+1:]...)
		if !r.alive() {
			p.letGo(r)
			r = nil
		}
	}
	p.soon++
	p.mu.Unlock()
	if r != nil && r.runs > 0 {
		if err := r.rearm(); err != nil {
			p.letGo(r)
			r = nil
		}
	}
	p.refill()
	if r == nil {
		if r, err = spawnRunner(p.binary, p.stage, p.size > 0); err != nil {
			p.mu.Lock()
			p.soon--
			p.mu.Unlock()
			p.refill()
			return nil, err
		}
	}
	r.shape, r.gen = key, gen
	if !ahead {
		r.shape = ""
	}
	h := r.run(body, sink, p)
	t := time.AfterFunc(returnSoon, h.notSoon)
	h.mu.Lock()
	h.soonTimer = t
	h.mu.Unlock()
	p.mu.Lock()
	p.busy[h] = true
	closed := p.closed
	p.mu.Unlock()
	if closed {
		_ = h.control(Control{Type: CtlNoPrestart})
	}
	return h, nil
}

// uncount stops counting the execution's runner as about to come back;
// false when it no longer counted.
func (p *Process) uncount() bool {
	p.mu.Lock()
	counted := !p.soonDone
	p.soonDone = true
	p.mu.Unlock()
	if counted {
		p.pool.mu.Lock()
		p.pool.soon--
		p.pool.mu.Unlock()
	}
	return counted
}

// endSoon: the execution ended; its runner is back or gone (the caller
// then tells the pool, which refills).
func (p *Process) endSoon() {
	p.mu.Lock()
	t := p.soonTimer
	p.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	p.uncount()
	p.pool.mu.Lock()
	delete(p.pool.busy, p)
	p.pool.mu.Unlock()
}

// notSoon: the execution runs long; its runner no longer counts as idle.
func (p *Process) notSoon() {
	if p.uncount() {
		p.pool.refill()
	}
}

// Idle is the number of runners waiting for an execution.
func (p *Pool) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// done takes back a runner whose execution ended (nil: it is gone) and
// keeps it if it ended cleanly, the pool has room and it has not served
// its share.
func (p *Pool) done(r *spawned) {
	p.mu.Lock()
	// A runner handed its execution before a Drain may hold a sandbox
	// made under the old ceiling: it goes.
	keep := r != nil && !p.closed && p.size > 0 && len(p.idle) < maxIdleRunners && r.runs < maxRunsPerRunner && r.gen == p.gen && r.alive()
	if keep {
		r.idleSince = time.Now()
		p.idle = append(p.idle, r)
		if len(p.idle) > p.size {
			time.AfterFunc(idleRunnerTTL, p.trim)
		}
	}
	p.mu.Unlock()
	if r != nil && !keep {
		p.letGo(r)
	}
	p.refill()
}

// trim lets go of the idle runners beyond size that waited idleRunnerTTL
// (the oldest first: Start takes the most recent).
func (p *Pool) trim() {
	p.mu.Lock()
	var drop []*spawned
	for len(p.idle) > p.size && time.Since(p.idle[0].idleSince) >= idleRunnerTTL {
		drop = append(drop, p.idle[0])
		p.idle = p.idle[1:]
	}
	p.mu.Unlock()
	for _, r := range drop {
		p.letGo(r)
	}
}

// refill starts runners in the background until size of them are idle or
// serving this pool's executions (which bring theirs back).
func (p *Pool) refill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && len(p.idle)+p.filling+p.soon < p.size {
		p.filling++
		go func() {
			r, err := spawnRunner(p.binary, p.stage, true)
			p.mu.Lock()
			p.filling--
			if err == nil && !p.closed {
				p.idle = append(p.idle, r)
				r = nil
			}
			p.mu.Unlock()
			if r != nil {
				p.letGo(r)
			}
		}()
	}
}

// letGo ends r in the background (Close waits for it).
func (p *Pool) letGo(r *spawned) {
	p.ending.Add(1)
	go func() {
		defer p.ending.Add(-1)
		r.discard()
	}()
}

// Close ends the waiting runners and the sandboxes they started ahead,
// starts none any more (a draining server's last runs start their own),
// and returns once every runner the pool let go has exited (closeWait at
// most); the runners still serving an execution are ended when it ends.
// Start still works, without a pool.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	p.prestart = false
	idle := p.idle
	p.idle = nil
	busy := make([]*Process, 0, len(p.busy))
	for h := range p.busy {
		busy = append(busy, h)
	}
	p.mu.Unlock()
	for _, r := range idle {
		p.letGo(r)
	}
	// The runs going on were told to start a sandbox ahead when they end.
	for _, h := range busy {
		_ = h.control(Control{Type: CtlNoPrestart})
	}
	// Bounded: a runner the kernel cannot end at once (blocked on a
	// filesystem) must not hold the server's exit.
	awaitNone(&p.ending, closeWait)
}

func (p *Process) readEvents(r *os.File) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 16<<10), 64<<20) // grows for a long line; a kernel's runner lives long
	var last uint64
	bad := "" // why the event stream cannot be trusted
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Type == "" {
			if err == nil {
				err = errors.New("no event type")
			}
			bad = fmt.Sprintf("the runner sent a malformed event line (%v): %.120q", err, sc.Bytes())
			break
		}
		last = e.Seq
		if e.Type == EventReady {
			// How the sandbox was had is the pool's to count, not the
			// caller's to see.
			if p.pool != nil {
				p.pool.count(e.Prestart)
			}
			e.Prestart = nil
		}
		if e.Terminal() {
			p.mu.Lock()
			p.term = &e
			p.mu.Unlock()
		}
		p.sink(e)
		if e.Terminal() {
			break
		}
	}
	if bad == "" && sc.Err() != nil {
		bad = "reading the runner's events: " + sc.Err().Error()
	}
	if bad == "" && p.from != nil && p.term != nil {
		// A pooled runner closes the events pipe right after the terminal
		// event; anything else on it is a broken stream.
		if sc.Scan() {
			bad = fmt.Sprintf("the runner sent an event after the terminal one: %.120q", sc.Bytes())
		} else if sc.Err() == nil {
			p.mu.Lock()
			reuse := !p.killed
			p.released = reuse
			p.ctl.Close()
			p.mu.Unlock()
			if reuse {
				p.endSoon()
				p.pool.done(p.from)
				close(p.done)
				return
			}
		}
	}
	if bad != "" {
		// The stream is broken: the runner (and with it its sandbox) is
		// stopped rather than trusted, and left blocked on a full pipe.
		_ = p.cmd.Process.Kill()
	}
	_ = p.cmd.Wait()
	if p.pool != nil {
		p.endSoon()
		p.pool.done(nil)
	}
	p.mu.Lock()
	if p.term == nil {
		msg := "the runner process ended without reporting how the execution ended (" + p.cmd.ProcessState.String() + ")"
		if bad != "" {
			msg = bad + "; the runner was stopped"
		}
		e := Event{Seq: last + 1, Type: EventError, TS: nowTS(), ErrCode: ErrCodeRunnerCrashed, Message: msg}
		p.term = &e
		p.mu.Unlock()
		p.sink(e)
		p.mu.Lock()
	}
	p.ctl.Close()
	p.mu.Unlock()
	close(p.done)
}

func (p *Process) control(c Control) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.term != nil {
		return ErrExited
	}
	if _, err := p.ctl.Write(append(b, '\n')); err != nil {
		if errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed) {
			return ErrExited
		}
		return err
	}
	return nil
}

// Write sends bytes to the command's stdin.
func (p *Process) Write(b []byte) (int, error) {
	p.mu.Lock()
	closed := p.stdinC
	p.mu.Unlock()
	if closed {
		return 0, errors.New("stdin was already closed")
	}
	if err := p.control(Control{Type: CtlStdin, Data: b}); err != nil {
		return 0, err
	}
	return len(b), nil
}

// CloseStdin closes the command's stdin (^D on a PTY).
func (p *Process) CloseStdin() error {
	err := p.control(Control{Type: CtlStdinClose})
	if err == nil {
		p.mu.Lock()
		p.stdinC = true
		p.mu.Unlock()
	}
	return err
}

// Resize sets the PTY window size.
func (p *Process) Resize(rows, cols uint16) error {
	return p.control(Control{Type: CtlResize, Rows: rows, Cols: cols})
}

// Signal sends sig to every process in the sandbox.
func (p *Process) Signal(sig syscall.Signal) error {
	return p.control(Control{Type: CtlSignal, Signal: signalName(sig)})
}

// Cancel asks the runner to end the execution (SIGTERM, grace, SIGKILL; or
// SIGKILL at once with force).
func (p *Process) Cancel(force bool) {
	_ = p.control(Control{Type: CtlCancel, Force: force})
}

// Kill ends the runner process itself; its sandbox dies with it. A runner
// that has gone back to the pool serves another execution: not this one's
// to kill.
func (p *Process) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released {
		return
	}
	p.killed = true
	_ = p.cmd.Process.Kill()
}

// Wait blocks until the terminal event was delivered and returns it.
func (p *Process) Wait() Event {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return *p.term
}

// Done is closed after the terminal event was delivered.
func (p *Process) Done() <-chan struct{} { return p.done }

// Pid is the runner's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }
