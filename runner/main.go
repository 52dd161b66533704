package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Dispatch runs the hidden mode named by os.Args[1] ("__runner",
// "__srt-init", "__srt-exec") and exits; it returns only when the process is
// a normal srt-mcp invocation. Call it first thing in main, before any flag
// parsing (runc's init.go does the same).
func Dispatch(opts Options) {
	if len(os.Args) < 2 {
		return
	}
	if os.Args[1] == ModeRunner {
		CloexecFrom(6) // fd 6, the stage binary if any, is reopened by path
		os.Exit(runnerMain(opts))
	}
	DispatchStage()
}

// DispatchStage runs the stages that execute inside a sandbox ("__srt-init",
// "__srt-exec", "__docker-exec") and exits; it returns for any other argv.
// cmd/srt-mcp-stage is a binary of these alone.
func DispatchStage() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case ModeInit:
		os.Exit(initMain())
	case ModeExec:
		os.Exit(execMain())
	case ModeDockerExec:
		os.Exit(dockerExecMain())
	}
}

// Handle is what both an in-process Run and a re-executed runner Process
// offer to their owner.
type Handle interface {
	Write(p []byte) (int, error)
	CloseStdin() error
	Resize(rows, cols uint16) error
	Signal(sig syscall.Signal) error
	Cancel(force bool)
	Wait() Event
	Done() <-chan struct{}
}

var (
	_ Handle = (*Run)(nil)
	_ Handle = (*Process)(nil)
)

// prewarm does, while a pooled runner waits for its spec, the first-use
// work that every run needs and no spec decides: encoding/json's caches for
// each message type the runner reads and writes (the spec with its policy,
// the events, the sandbox's configuration and messages), and finding bwrap.
func prewarm() {
	if b, err := json.Marshal(Spec{}); err == nil {
		var s Spec
		_ = json.Unmarshal(b, &s)
	}
	if b, err := json.Marshal(initConfig{Mounted: []mountedObject{{}}}); err == nil {
		var c initConfig
		_ = json.Unmarshal(b, &c)
	}
	var m initMsg
	_ = json.Unmarshal([]byte(`{"t":"verified"}`), &m)
	_, _ = json.Marshal(Event{Type: EventReady, Violation: &Violation{}})
	_, _ = FindBwrap()
}

// cgroupRemovals counts the cgroup removals retried in the background
// (the kernel still counted a sandbox's last processes in).
var cgroupRemovals atomic.Int64

// awaitNone waits until what n counts is done, for at most limit.
func awaitNone(n *atomic.Int64, limit time.Duration) {
	for deadline := time.Now().Add(limit); n.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// runnerMain is "srt-mcp __runner": one execution, driven over fds 3-5 (see
// the protocol diagram in protocol.go), and with a hand-off socket in argv
// the next ones too (handoff.go).
func runnerMain(opts Options) int {
	specF, evF, ctlF := os.NewFile(3, "spec"), os.NewFile(4, "events"), os.NewFile(5, "control")
	for _, f := range []*os.File{specF, evF, ctlF} {
		if f == nil {
			fmt.Fprintln(os.Stderr, "srt-mcp: __runner is internal; it needs fds 3, 4 and 5 from its parent")
			return 2
		}
		if _, err := f.Stat(); err != nil {
			fmt.Fprintln(os.Stderr, "srt-mcp: __runner is internal; it needs fds 3, 4 and 5 from its parent")
			return 2
		}
	}
	// The stage binary, when the parent gave one (fd 6, and argv says so:
	// an fd that is merely open may be the Go runtime's own): bwrap runs it
	// instead of this binary. Kept referenced so that the fd stays this
	// file for the runner's life.
	stageErr := ""
	if slices.Contains(os.Args[2:], argStageFD) {
		stage := os.NewFile(fdRunnerStage, "srt-mcp-stage")
		if fi, err := stage.Stat(); err != nil || !fi.Mode().IsRegular() {
			stageErr = "the runner's stage binary (fd 6) is not a file"
		} else {
			opts.Self = fmt.Sprintf("/proc/self/fd/%d", fdRunnerStage)
			defer runtime.KeepAlive(stage)
		}
	}
	// The runs' cgroups the kernel had not let go of yet are removed
	// before the runner goes (a pool ends a runner it lets go by closing
	// its hand-off socket, and kills it only if it does not exit).
	defer awaitNone(&cgroupRemovals, 5*time.Second)
	hand := handoffFD(os.Args[2:])
	prewarm()
	// next is the sandbox started for the next run, once the last run
	// asked for one (Spec.Prestart): it starts while the runner waits.
	var next chan *prestarted
	for served := 1; ; served++ {
		if next != nil {
			opts.prestarted = <-next
			opts.prestarted.begin()
			next = nil
		}
		spec := serveOne(specF, evF, ctlF, opts, stageErr)
		opts.prestarted = nil
		if hand < 0 || served >= maxRunsPerRunner {
			return 0
		}
		// Nothing of the last execution may reach the next one's bwrap.
		CloexecFrom(3)
		// The pool hands the next run of this shape to a runner whose
		// sandbox is ready, and any other to one that holds none, never to
		// one still starting a sandbox (see Pool.Start): it is told which.
		say := func(c byte, served int) { _, _ = unix.Write(hand, []byte(fmt.Sprintf("%c%d\n", c, served))) }
		if spec.Prestart {
			next = make(chan *prestarted, 1)
			go func(spec Spec, served int) {
				t := startPrestartedQuietly(spec, opts)
				// The pool hands the next run of this shape to a runner
				// whose sandbox is ready (see Pool.Start).
				if t.ready() {
					say(prestartReady, served)
				} else {
					say(prestartNone, served)
				}
				next <- t
			}(spec, served)
		} else {
			say(prestartNone, served)
		}
		var err error
		if specF, evF, ctlF, err = receiveRun(hand); err != nil {
			if next != nil {
				(<-next).discard()
			}
			return 0
		}
	}
}

// serveOne runs the execution whose spec arrives on specF, with its events
// on evF and its control messages on ctlF; it returns the spec once the
// terminal event was written, and closes all three. A pre-started sandbox
// in opts that the run does not claim is discarded.
func serveOne(specF, evF, ctlF *os.File, opts Options, stageErr string) Spec {
	defer opts.prestarted.discard()
	defer ctlF.Close()
	var wmu sync.Mutex
	enc := json.NewEncoder(evF)
	sink := func(e Event) {
		wmu.Lock()
		if enc != nil {
			_ = enc.Encode(e)
		}
		wmu.Unlock()
	}
	defer func() {
		// EOF on the events pipe: the parent may hand this runner on.
		wmu.Lock()
		enc = nil
		evF.Close()
		wmu.Unlock()
	}()
	data, err := io.ReadAll(io.LimitReader(specF, MaxSpecBytes+1))
	specF.Close()
	var spec Spec
	switch {
	case err != nil:
		err = fmt.Errorf("reading the spec: %v", err)
	case len(data) > MaxSpecBytes:
		err = fmt.Errorf("the spec is larger than %d bytes", MaxSpecBytes)
	default:
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if derr := dec.Decode(&spec); derr != nil {
			err = fmt.Errorf("malformed spec: %v", derr)
		}
	}
	if err != nil {
		sink(Event{Seq: 1, Type: EventError, TS: nowTS(), ErrCode: ErrCodeInvalidSpec, Message: err.Error()})
		return Spec{}
	}
	if stageErr != "" {
		sink(Event{Seq: 1, Type: EventError, TS: nowTS(), ErrCode: ErrCodeInternal, Message: stageErr})
		return Spec{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run, _ := Start(ctx, spec, sink, opts)
	var noPrestart atomic.Bool
	go func() {
		sc := bufio.NewScanner(ctlF)
		sc.Buffer(make([]byte, 64<<10), 8<<20)
		for sc.Scan() {
			var c Control
			if json.Unmarshal(sc.Bytes(), &c) != nil {
				continue
			}
			switch c.Type {
			case CtlStdin:
				_, _ = run.Write(c.Data)
			case CtlStdinClose:
				_ = run.CloseStdin()
			case CtlResize:
				_ = run.Resize(c.Rows, c.Cols)
			case CtlSignal:
				if sig, err := ParseSignal(c.Signal); err == nil {
					_ = run.Signal(sig)
				}
			case CtlCancel:
				run.Cancel(c.Force)
			case CtlNoPrestart:
				noPrestart.Store(true)
			}
		}
		// The parent is gone (or closed control): nobody is left to
		// collect the output, so end the sandbox now.
		cancel()
		run.Cancel(true)
	}()
	if e := run.Wait(); e.Type == EventError {
		return Spec{} // a run that could not start: no sandbox of its shape
	}
	if noPrestart.Load() {
		spec.Prestart = false
	}
	return spec
}
