// Package kernel runs long-lived language interpreters inside a session's
// sandbox and drives them over pipes, so variables and imports persist
// between calls. It is srt-mcp's own small protocol (JSON lines), not
// Jupyter's ZMQ stack.
//
//	server                                   kernel (in the sandbox)
//	  |                                         |  started: python3 -u -c <python_kernel.py>
//	  |                                         |       or: node -e <node_kernel.js> (frames prefixed \x1e)
//	  | <------------- {"id":0,"ev":"ready","version":...}
//	  | -- {"op":"exec","id":N,"code":...,"max_output":B} -->  |  runs the cell in its namespace
//	  | <------------- {"id":N,"ev":"stdout","data":...}   fds 1 and 2 are captured, subprocesses
//	  | <------------- {"id":N,"ev":"stderr","data":...}   included; in pieces of at most 64 KiB
//	  | <------------- {"id":N,"ev":"truncated","stream":"stdout"}   the stream passed B bytes
//	  | <------------- {"id":N,"ev":"result","repr":...}   a trailing expression's value, cut
//	  |                                         |          to 1 MiB (or what B leaves) with a note
//	  | <------------- {"id":N,"ev":"error","ename":...}   the traceback went to stderr
//	  | <------------- {"id":N,"ev":"figure","path":...}   open matplotlib figures, saved
//	  | <------------- {"id":N,"ev":"done","ok":bool,"exec_count":K}
//	  | -- {"op":"preload","id":N,"modules":[...]} -> |  imports into the module cache only
//	  | <------------- {"id":N,"ev":"done",...}
//	  | -- {"op":"info","id":N} -------------> |
//	  | <------------- {"id":N,"ev":"info","variables":[...],"modules":[...],...}
//	  | <------------- {"id":N,"ev":"done",...}
//	  | -- SIGINT (runner.Handle.Signal) ----> |  KeyboardInterrupt in the cell: error, done
//
// The kernel's own stdout carries only frames (it moves the user's fds 1
// and 2 onto pipes of its own first). One request runs at a time. A kernel
// that does not answer an interrupt is killed; its owner starts a new one
// and says so.
//
// The cell's output cap (max_output, bytes per stream; 0: none) is applied
// in the kernel: once a stream has sent B bytes, the rest of the cell's
// output on it is counted and dropped there, and one "truncated" frame says
// so; the server caps again (a Node child writing straight to fd 1 is not
// seen by the kernel). The server reads lines in linear time and holds at
// most maxFrame bytes of one: a longer frame is dropped and its cell fails
// with a note (the kernel goes on); a longer line of plain output is passed
// on in pieces.
package kernel

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/srt-mcp/srt-mcp/runner"
)

//go:embed python_kernel.py
var pythonKernel string

//go:embed node_kernel.js
var nodeKernel string

// Starter launches a sandboxed process (a session backend's Start).
type Starter func(spec runner.Spec, sink func(runner.Event)) (runner.Handle, error)

// Frame is one message from a kernel.
type Frame struct {
	ID        uint64   `json:"id"`
	Ev        string   `json:"ev"`
	Data      string   `json:"data,omitempty"`
	Repr      string   `json:"repr,omitempty"`
	Ename     string   `json:"ename,omitempty"`
	Evalue    string   `json:"evalue,omitempty"`
	Path      string   `json:"path,omitempty"`
	Stream    string   `json:"stream,omitempty"` // of a "truncated" frame
	OK        bool     `json:"ok,omitempty"`
	ExecCount int      `json:"exec_count,omitempty"`
	Language  string   `json:"language,omitempty"`
	Version   string   `json:"version,omitempty"`
	Variables []string `json:"variables,omitempty"`
	Modules   []string `json:"modules,omitempty"`
	Memory    int64    `json:"memory_bytes,omitempty"`
}

// maxFrame bounds one line from a kernel: the server holds no more of a
// partial line than this. The drivers keep frames far below it (output in
// pieces of 64 KiB, a REPL value cut to 1 MiB, both JSON-escaped).
var maxFrame = 16 << 20

// evOversize is the frame the server makes (never on the wire) for a frame
// beyond maxFrame that it dropped; its Data says what was lost.
const evOversize = "oversize"

// lineMode is what the reader does with the line it is in.
type lineMode int

const (
	lineRead lineMode = iota // collect the line (a frame, or a line of plain output)
	lineDrop                 // discard an oversize frame up to its newline
	linePass                 // pass a long line of plain output on up to its newline
)

// ErrDead is returned when the kernel process is gone.
var ErrDead = errors.New("the kernel is not running")

// Kernel is one running interpreter.
type Kernel struct {
	Language string
	Version  string
	Started  time.Time

	h       runner.Handle
	mu      sync.Mutex
	nextID  uint64
	waiters map[uint64]func(Frame)
	current uint64       // the request being served
	partial []byte       // the start of a line whose newline has not come yet
	mode    lineMode     // of the line being read
	diag    bytes.Buffer // the kernel process's own stderr (its crashes)
	ready   chan Frame
	dead    chan struct{}
	deadErr string
	busy    sync.Mutex // one request at a time
}

// Argv returns the command that runs the kernel for language with the
// given interpreter.
func Argv(language, interpreter string) ([]string, error) {
	switch language {
	case "python":
		return []string{interpreter, "-u", "-c", pythonKernel}, nil
	case "javascript":
		return []string{interpreter, "-e", nodeKernel}, nil
	}
	return nil, fmt.Errorf("no kernel for %s", language)
}

// Start launches a kernel: spec is the sandbox (its Argv from Argv), start
// the backend. It returns once the kernel said it is ready.
func Start(ctx context.Context, language string, spec runner.Spec, start Starter) (*Kernel, error) {
	k := &Kernel{Language: language, Started: time.Now(), waiters: map[uint64]func(Frame){},
		ready: make(chan Frame, 1), dead: make(chan struct{})}
	spec.Stdin = runner.StdinPipe
	h, err := start(spec, k.onEvent)
	if err != nil {
		return nil, err
	}
	k.h = h
	select {
	case f := <-k.ready:
		k.Version = f.Version
		return k, nil
	case <-k.dead:
		return nil, fmt.Errorf("the %s kernel exited at start-up: %s", language, k.deadErr)
	case <-ctx.Done():
		h.Cancel(true)
		return nil, fmt.Errorf("the %s kernel did not start: %w", language, ctx.Err())
	}
}

func (k *Kernel) onEvent(ev runner.Event) {
	switch ev.Type {
	case runner.EventStdout:
		k.mu.Lock()
		frames := k.split(ev.Data)
		k.mu.Unlock()
		for _, f := range frames {
			k.dispatch(f)
		}
	case runner.EventStderr:
		k.mu.Lock()
		if k.diag.Len() < 64<<10 {
			k.diag.Write(ev.Data)
		}
		k.mu.Unlock()
	default:
		if ev.Terminal() {
			k.mu.Lock()
			k.deadErr = fmt.Sprintf("%s %s %s", ev.Type, ev.ErrCode, ev.Message)
			if ev.Type == runner.EventExit {
				k.deadErr = fmt.Sprintf("exit status %d", ev.ExitCode)
			}
			if d := bytes.TrimSpace(k.diag.Bytes()); len(d) > 0 {
				k.deadErr += ": " + string(d)
			}
			waiters := k.waiters
			k.waiters = map[uint64]func(Frame){}
			k.mu.Unlock()
			close(k.dead)
			for _, w := range waiters {
				w(Frame{Ev: "dead"})
			}
		}
	}
}

// split reads data, the next bytes of the kernel's stdout, and returns the
// frames of the lines it completes. Each byte is scanned once and copied at
// most once (a partial line is appended to, never re-copied), and no more
// than maxFrame bytes of a line are held. Called with k.mu held.
func (k *Kernel) split(data []byte) []Frame {
	var frames []Frame
	for len(data) > 0 {
		piece, complete := data, false
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			piece, complete = data[:i+1], true
		}
		data = data[len(piece):]
		switch {
		case k.mode == lineDrop:
		case k.mode == linePass:
			frames = append(frames, Frame{ID: k.current, Ev: "stdout", Data: string(piece)})
		case len(k.partial)+len(piece) > maxFrame:
			frames = append(frames, k.overflow(piece)...)
		case !complete:
			k.appendPartial(piece)
		case len(k.partial) == 0:
			frames = append(frames, k.parse(piece))
		default:
			k.appendPartial(piece)
			frames = append(frames, k.parse(k.partial))
			k.dropPartial()
		}
		if complete {
			k.mode = lineRead
		}
	}
	return frames
}

// parse reads one line (with its newline). A frame is a JSON object,
// prefixed with \x1e by kernels whose children may write to the same
// stdout; any other line is output of the current request.
func (k *Kernel) parse(line []byte) Frame {
	var f Frame
	body := bytes.TrimPrefix(line, []byte{0x1e})
	if (len(body) < len(line) || bytes.HasPrefix(line, []byte("{"))) && json.Unmarshal(body, &f) == nil && f.Ev != "" {
		return f
	}
	return Frame{ID: k.current, Ev: "stdout", Data: string(line)}
}

// overflow handles a line that has grown past maxFrame, piece being its
// latest bytes: a frame is dropped (up to its newline) with a note for the
// current request; plain output is passed on as it comes.
func (k *Kernel) overflow(piece []byte) []Frame {
	head := k.partial
	if len(head) == 0 {
		head = piece
	}
	var frames []Frame
	if head[0] == 0x1e || (head[0] == '{' && k.Language != "javascript") { // Node's frames all carry \x1e
		k.mode = lineDrop
		size := fmt.Sprintf("%d bytes", maxFrame)
		if maxFrame%(1<<20) == 0 {
			size = fmt.Sprintf("%d MiB", maxFrame>>20)
		}
		frames = append(frames, Frame{ID: k.current, Ev: evOversize,
			Data: fmt.Sprintf("the kernel sent a %q message larger than %s; the server dropped it", frameEv(head), size)})
	} else {
		k.mode = linePass
		if len(k.partial) > 0 {
			frames = append(frames, Frame{ID: k.current, Ev: "stdout", Data: string(k.partial)})
		}
		frames = append(frames, Frame{ID: k.current, Ev: "stdout", Data: string(piece)})
	}
	k.dropPartial()
	return frames
}

// appendPartial adds piece to the partial line, doubling its buffer when
// it must grow (append grows large slices by a quarter: five times the
// line's size in copies) up to maxFrame.
func (k *Kernel) appendPartial(piece []byte) {
	if n := len(k.partial) + len(piece); n > cap(k.partial) {
		grown := make([]byte, len(k.partial), min(max(n, 2*cap(k.partial), 4<<10), max(n, maxFrame)))
		copy(grown, k.partial)
		k.partial = grown
	}
	k.partial = append(k.partial, piece...)
}

// dropPartial empties the partial line, returning a large buffer to the
// heap.
func (k *Kernel) dropPartial() {
	if cap(k.partial) > 1<<20 {
		k.partial = nil
	} else {
		k.partial = k.partial[:0]
	}
}

// frameEv finds the "ev" of a frame from its first bytes ("" if it cannot).
func frameEv(head []byte) string {
	head = head[:min(len(head), 256)]
	i := bytes.Index(head, []byte(`"ev"`))
	if i < 0 {
		return ""
	}
	rest := bytes.TrimLeft(head[i+4:], " :")
	if len(rest) == 0 || rest[0] != '"' {
		return ""
	}
	rest = rest[1:]
	if j := bytes.IndexByte(rest, '"'); j >= 0 {
		return string(rest[:j])
	}
	return ""
}

func (k *Kernel) dispatch(f Frame) {
	if f.Ev == "ready" && f.ID == 0 {
		select {
		case k.ready <- f:
		default:
		}
		return
	}
	k.mu.Lock()
	w := k.waiters[f.ID]
	if f.Ev == "done" {
		delete(k.waiters, f.ID)
	}
	k.mu.Unlock()
	if w != nil {
		w(f)
	}
}

// Alive reports whether the kernel process runs.
func (k *Kernel) Alive() bool {
	select {
	case <-k.dead:
		return false
	default:
		return true
	}
}

// Dead is closed when the kernel process ends.
func (k *Kernel) Dead() <-chan struct{} { return k.dead }

// DeadReason says why the kernel ended.
func (k *Kernel) DeadReason() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.deadErr
}

// Request sends one request and calls onFrame with each of its frames
// until (and including) "done", or a frame {Ev: "dead"} if the kernel
// died. It returns once the request is sent; the caller waits on its own.
func (k *Kernel) Request(op string, fields map[string]any, onFrame func(Frame)) (uint64, error) {
	if !k.Alive() {
		return 0, ErrDead
	}
	k.mu.Lock()
	k.nextID++
	id := k.nextID
	k.current = id
	k.waiters[id] = onFrame
	k.mu.Unlock()
	msg := map[string]any{"op": op, "id": id}
	for key, v := range fields {
		msg[key] = v
	}
	b, _ := json.Marshal(msg)
	if _, err := k.h.Write(append(b, '\n')); err != nil {
		k.mu.Lock()
		delete(k.waiters, id)
		k.mu.Unlock()
		return 0, fmt.Errorf("%w: %v", ErrDead, err)
	}
	return id, nil
}

// Unlock releases the kernel taken by TryLock or lockCtx (one request at
// a time).
func (k *Kernel) Unlock() { k.busy.Unlock() }

// lockCtx is Lock, giving up when ctx ends (a cell may run for minutes).
func (k *Kernel) lockCtx(ctx context.Context) error {
	for !k.TryLock() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("the kernel is running a cell: %w", ctx.Err())
		case <-k.dead:
			return ErrDead
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// TryLock is Lock without waiting.
func (k *Kernel) TryLock() bool { return k.busy.TryLock() }

// Interrupt sends SIGINT to the kernel (KeyboardInterrupt in its cell).
func (k *Kernel) Interrupt() error { return k.h.Signal(syscall.SIGINT) }

// Info asks the kernel for its variables, modules, execution count and
// memory (real introspection of its namespace).
func (k *Kernel) Info(ctx context.Context) (Frame, error) {
	if err := k.lockCtx(ctx); err != nil {
		return Frame{}, err
	}
	defer k.Unlock()
	got := make(chan Frame, 4)
	if _, err := k.Request("info", nil, func(f Frame) { got <- f }); err != nil {
		return Frame{}, err
	}
	var info Frame
	for {
		select {
		case f := <-got:
			switch f.Ev {
			case "info":
				info = f
			case "done":
				return info, nil
			case "dead":
				return Frame{}, ErrDead
			}
		case <-ctx.Done():
			return Frame{}, ctx.Err()
		}
	}
}

// Preload imports modules into the kernel's module cache without binding
// them in the user's namespace (a warm pool's head start).
func (k *Kernel) Preload(ctx context.Context, modules []string) error {
	if err := k.lockCtx(ctx); err != nil {
		return err
	}
	defer k.Unlock()
	got := make(chan Frame, 16)
	if _, err := k.Request("preload", map[string]any{"modules": modules}, func(f Frame) { got <- f }); err != nil {
		return err
	}
	for {
		select {
		case f := <-got:
			switch f.Ev {
			case "done":
				return nil
			case "dead":
				return ErrDead
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close ends the kernel (and its sandbox).
func (k *Kernel) Close() {
	if k.h != nil {
		k.h.Cancel(true)
	}
}
