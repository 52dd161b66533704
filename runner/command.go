package runner

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
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
}

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
	return &spawned{cmd: cmd, specW: pipes.specW, evR: pipes.evR, ctlW: pipes.ctlW, hand: hand}, nil
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

// discard ends a runner that waits for an execution.
func (r *spawned) discard() {
	for _, f := range []*os.File{r.specW, r.ctlW, r.hand} {
		if f != nil {
			f.Close() // EOF on its spec or its hand-off socket: it exits
		}
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
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

	mu      sync.Mutex
	idle    []*spawned
	filling int
	soon    int // runners of executions started within returnSoon
	closed  bool
}

const (
	maxIdleRunners = 32
	idleRunnerTTL  = 10 * time.Second
	returnSoon     = 2 * time.Second
)

// NewPool keeps size runners of binary ("": this executable) waiting; size
// 0 keeps none and reuses none (a process per execution). A
// stage that is not "" is the binary their sandboxes run inside
// (cmd/srt-mcp-stage); "" means the runner's own.
func NewPool(binary, stage string, size int) *Pool {
	p := &Pool{binary: binary, stage: stage, size: size}
	p.refill()
	return p
}

// Start is StartProcessWith with a waiting runner when there is one.
func (p *Pool) Start(spec Spec, sink func(Event)) (*Process, error) {
	body, err := specBody(spec)
	if err != nil {
		return nil, err
	}
	var r *spawned
	p.mu.Lock()
	for len(p.idle) > 0 && r == nil {
		r = p.idle[len(p.idle)-1] // the most recently used: its pages are warm
		p.idle = p.idle[:len(p.idle)-1]
		if !r.alive() {
			go r.discard()
			r = nil
		}
	}
	p.soon++
	p.mu.Unlock()
	if r != nil && r.runs > 0 {
		if err := r.rearm(); err != nil {
			go r.discard()
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
	h := r.run(body, sink, p)
	t := time.AfterFunc(returnSoon, h.notSoon)
	h.mu.Lock()
	h.soonTimer = t
	h.mu.Unlock()
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
	keep := r != nil && !p.closed && p.size > 0 && len(p.idle) < maxIdleRunners && r.runs < maxRunsPerRunner && r.alive()
	if keep {
		r.idleSince = time.Now()
		p.idle = append(p.idle, r)
		if len(p.idle) > p.size {
			time.AfterFunc(idleRunnerTTL, p.trim)
		}
	}
	p.mu.Unlock()
	if r != nil && !keep {
		go r.discard()
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
		r.discard()
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
				r.discard()
			}
		}()
	}
}

// Close ends the waiting runners; Start still works, without a pool.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, r := range idle {
		r.discard()
	}
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
