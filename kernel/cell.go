package kernel

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/runner"
)

// ErrCodeKernelDied is the error code of a cell whose kernel exited.
const ErrCodeKernelDied = "kernel_died"

// ErrBusy is returned when the kernel is running another cell.
var ErrBusy = errs.New(errs.SessionBusy, "the session's interpreter is running another cell; wait for it to complete")

// CellOptions bound one cell.
type CellOptions struct {
	Timeout   time.Duration // 0: none
	Grace     time.Duration // how long an interrupt has before the kernel is killed (default 3s)
	MaxOutput int64         // per stream, applied in the kernel too; 0: no cap
}

// Cell is one cell running on a kernel, as a runner.Handle: the execution
// manager treats it like any run (events, wait, cancel), so execute_code,
// get_execution_output and cancel_execution work the same for cells.
type Cell struct {
	k    *Kernel
	sink func(runner.Event)
	opt  CellOptions

	mu        sync.Mutex
	seq       uint64
	start     time.Time
	reason    string // timeout or cancelled, once decided
	failed    bool
	sent      map[string]int64
	trunc     map[string]bool
	end       *runner.Event
	done      chan struct{}
	timer     *time.Timer
	killed    bool
	exit      int  // a SystemExit's status (-1: none)
	Restarted bool // the kernel was killed to end the cell: its state is lost
}

var _ runner.Handle = (*Cell)(nil)

// RunCell starts code on k. The kernel must not be running another cell.
func RunCell(k *Kernel, code string, opt CellOptions, sink func(runner.Event)) (*Cell, error) {
	if !k.TryLock() {
		return nil, ErrBusy
	}
	if opt.Grace <= 0 {
		opt.Grace = 3 * time.Second
	}
	c := &Cell{k: k, sink: sink, opt: opt, start: time.Now(), done: make(chan struct{}),
		sent: map[string]int64{}, trunc: map[string]bool{}, exit: -1}
	c.emit(runner.Event{Type: runner.EventReady})
	if _, err := k.Request("exec", map[string]any{"code": code, "max_output": max(opt.MaxOutput, 0)}, c.onFrame); err != nil {
		k.Unlock()
		return nil, err
	}
	if opt.Timeout > 0 {
		c.mu.Lock()
		c.timer = time.AfterFunc(opt.Timeout, func() { c.stop(runner.EventTimeout, false) })
		c.mu.Unlock()
	}
	return c, nil
}

func (c *Cell) emit(ev runner.Event) {
	c.mu.Lock()
	if c.end != nil {
		c.mu.Unlock()
		return
	}
	c.seq++
	ev.Seq = c.seq
	ev.TS = float64(time.Now().UnixNano()) / 1e9
	terminal := ev.Terminal()
	if terminal {
		end := ev
		c.end = &end
		if c.timer != nil {
			c.timer.Stop()
		}
	}
	c.mu.Unlock()
	if terminal {
		// The kernel is free before anyone hears the cell ended: whoever
		// does may start the next cell at once.
		c.k.Unlock()
	}
	c.sink(ev)
	if terminal {
		close(c.done)
	}
}

func (c *Cell) output(stream, data string) {
	c.mu.Lock()
	b := []byte(data)
	if c.opt.MaxOutput > 0 {
		left := c.opt.MaxOutput - c.sent[stream]
		if left <= 0 {
			c.trunc[stream] = true
			c.mu.Unlock()
			return
		}
		if int64(len(b)) > left {
			b = b[:left]
			c.trunc[stream] = true
		}
	}
	c.sent[stream] += int64(len(b))
	c.mu.Unlock()
	c.emit(runner.Event{Type: stream, Data: b})
}

func (c *Cell) truncated() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range []string{runner.EventStdout, runner.EventStderr} {
		if c.trunc[s] {
			out = append(out, s)
		}
	}
	return out
}

func (c *Cell) onFrame(f Frame) {
	switch f.Ev {
	case "stdout", "stderr":
		c.output(f.Ev, f.Data)
	case "result":
		c.output(runner.EventStdout, f.Repr+"\n")
	case "truncated": // the kernel dropped the rest of a stream
		if f.Stream == runner.EventStdout || f.Stream == runner.EventStderr {
			c.mu.Lock()
			c.trunc[f.Stream] = true
			c.mu.Unlock()
		}
	case evOversize: // the server dropped a frame: the cell fails, says why
		c.mu.Lock()
		c.failed = true
		c.mu.Unlock()
		c.emit(runner.Event{Type: runner.EventStderr, Data: []byte("srt-mcp: " + f.Data + "\n")})
	case "error":
		c.mu.Lock()
		c.failed = true
		if f.Ename == "SystemExit" {
			// sys.exit(n) in a cell ends the cell (the kernel stays) with
			// n as its exit status, as it would end a script.
			c.exit = systemExitCode(f.Evalue)
		}
		c.mu.Unlock()
	case "done", "dead":
		c.finish(f.Ev == "dead")
	}
}

func (c *Cell) finish(dead bool) {
	c.mu.Lock()
	reason, failed, killed, exit := c.reason, c.failed, c.killed, c.exit
	if dead && killed {
		c.Restarted = true
	}
	c.mu.Unlock()
	dur := time.Since(c.start).Milliseconds()
	ev := runner.Event{DurationMS: dur, Truncated: c.truncated()}
	switch {
	case reason == runner.EventTimeout:
		ev.Type, ev.TimeoutSeconds = runner.EventTimeout, c.opt.Timeout.Seconds()
		if dead {
			ev.Message = "the kernel did not stop on interrupt and was restarted: its variables and imports are gone"
		}
	case reason == runner.EventCancelled:
		ev.Type, ev.Signal = runner.EventCancelled, "SIGINT" // the cell was interrupted
		if dead {
			ev.Signal = "SIGKILL"
			ev.Message = "the kernel was restarted to cancel the cell: its variables and imports are gone"
		}
	case dead:
		ev.Type, ev.ErrCode = runner.EventError, ErrCodeKernelDied
		ev.Message = "the kernel exited during the cell (" + c.k.DeadReason() + "); the next call starts a new one, without the old variables"
	default:
		ev.Type, ev.ExitCode = runner.EventExit, 0
		if failed {
			ev.ExitCode = 1
		}
		if exit >= 0 {
			ev.ExitCode = exit
		}
	}
	c.emit(ev)
}

// stop ends the cell for a reason: an interrupt, then (after the grace
// period, or at once with force) the kernel is killed.
func (c *Cell) stop(reason string, force bool) {
	c.mu.Lock()
	if c.end != nil {
		c.mu.Unlock()
		return
	}
	if c.reason == "" {
		c.reason = reason
	}
	c.mu.Unlock()
	if force {
		c.kill()
		return
	}
	_ = c.k.Interrupt()
	go func() {
		select {
		case <-c.done:
		case <-time.After(c.opt.Grace):
			c.kill()
		}
	}()
}

func (c *Cell) kill() {
	c.mu.Lock()
	c.killed = true
	c.mu.Unlock()
	c.k.Close()
}

// Write implements runner.Handle: cells take no stdin.
func (c *Cell) Write([]byte) (int, error) {
	return 0, errors.New("a kernel cell takes no stdin; pass data in the code or a file in /mnt/data")
}

// CloseStdin implements runner.Handle.
func (c *Cell) CloseStdin() error { return nil }

// Resize implements runner.Handle.
func (c *Cell) Resize(uint16, uint16) error { return errors.New("a kernel cell has no terminal") }

// Signal implements runner.Handle: SIGINT interrupts the cell.
func (c *Cell) Signal(sig syscall.Signal) error {
	if sig == syscall.SIGINT {
		return c.k.Interrupt()
	}
	return errors.New("a kernel cell takes only SIGINT")
}

// Cancel implements runner.Handle.
func (c *Cell) Cancel(force bool) { c.stop(runner.EventCancelled, force) }

// Wait implements runner.Handle.
func (c *Cell) Wait() runner.Event {
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return *c.end
}

// Done implements runner.Handle.
func (c *Cell) Done() <-chan struct{} { return c.done }

// systemExitCode is the exit status Python gives SystemExit(arg): None is
// 0, an integer is itself (mod 256, as the OS sees it), anything else 1.
func systemExitCode(evalue string) int {
	v := strings.TrimSpace(evalue)
	if v == "" || v == "None" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		return n & 0xff
	}
	return 1
}
