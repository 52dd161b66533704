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
)

// Process is a runner started by StartProcess: the parent's handle on one
// execution running in its own "srt-mcp __runner" process. Its methods match
// Run's, and its events are the runner's, delivered to the sink in order.
type Process struct {
	cmd  *exec.Cmd
	sink func(Event)

	mu     sync.Mutex
	ctl    *os.File
	term   *Event
	done   chan struct{}
	stdinC bool
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
	r, err := spawnRunner(binary, "")
	if err != nil {
		return nil, err
	}
	return r.run(body, sink), nil
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

// spawned is a runner process that has started and waits for its spec on
// fd 3 (it holds nothing of any execution yet).
type spawned struct {
	cmd              *exec.Cmd
	specW, evR, ctlW *os.File
}

// spawnRunner starts "srt-mcp __runner" with its three pipes, and the
// stage binary as fd 6 when stage is not "".
func spawnRunner(binary, stage string) (*spawned, error) {
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
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	evR, evW, err := os.Pipe()
	if err != nil {
		specR.Close()
		specW.Close()
		return nil, err
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		specR.Close()
		specW.Close()
		evR.Close()
		evW.Close()
		return nil, err
	}
	cmd := exec.Command(self, ModeRunner)
	cmd.Args[0] = "srt-mcp-runner"
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.ExtraFiles = []*os.File{specR, evW, ctlR}
	if stageF != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, stageF)
		cmd.Args = append(cmd.Args, argStageFD)
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = runnerSysProcAttr()
	err = cmd.Start()
	specR.Close()
	evW.Close()
	ctlR.Close()
	if err != nil {
		specW.Close()
		evR.Close()
		ctlW.Close()
		return nil, fmt.Errorf("start runner: %w", err)
	}
	return &spawned{cmd: cmd, specW: specW, evR: evR, ctlW: ctlW}, nil
}

// run hands the runner its spec and follows its events.
func (r *spawned) run(body []byte, sink func(Event)) *Process {
	p := &Process{cmd: r.cmd, sink: sink, ctl: r.ctlW, done: make(chan struct{})}
	go func() {
		_, _ = r.specW.Write(body)
		r.specW.Close()
	}()
	go p.readEvents(r.evR)
	return p
}

// discard ends a runner that never got a spec.
func (r *spawned) discard() {
	r.specW.Close() // EOF on its spec: it exits
	r.ctlW.Close()
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.evR.Close()
}

// alive tells whether the runner is still waiting (nobody killed it).
func (r *spawned) alive() bool { return processAlive(r.cmd.Process.Pid) }

// A Pool keeps a few runners started ahead of need, so that an execution
// does not wait for a process to start and initialise (a few milliseconds
// of every cold run). A pooled runner has received nothing yet: it is the
// same as a fresh one, only earlier. Each one taken is replaced in the
// background.
type Pool struct {
	binary, stage string
	size          int

	mu      sync.Mutex
	idle    []*spawned
	filling int
	closed  bool
}

// NewPool keeps size runners of binary ("": this executable) waiting. A
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
		r = p.idle[0]
		p.idle = p.idle[1:]
		if !r.alive() {
			go r.discard()
			r = nil
		}
	}
	p.mu.Unlock()
	p.refill()
	if r == nil {
		if r, err = spawnRunner(p.binary, p.stage); err != nil {
			return nil, err
		}
	}
	return r.run(body, sink), nil
}

// refill starts runners in the background up to the pool's size.
func (p *Pool) refill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && len(p.idle)+p.filling < p.size {
		p.filling++
		go func() {
			r, err := spawnRunner(p.binary, p.stage)
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
	if bad != "" {
		// The stream is broken: the runner (and with it its sandbox) is
		// stopped rather than trusted, and left blocked on a full pipe.
		_ = p.cmd.Process.Kill()
	}
	_ = p.cmd.Wait()
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

// Kill ends the runner process itself; its sandbox dies with it.
func (p *Process) Kill() {
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
