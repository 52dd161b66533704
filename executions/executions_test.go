package executions

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/runner"
)

// script is a runner.Handle that plays back events the test feeds it; the
// real runner is exercised by the runner package and the integration suite.
type script struct {
	mu     sync.Mutex
	sink   func(runner.Event)
	seq    uint64
	done   chan struct{}
	cancel chan bool
}

func (s *script) emit(typ string, data string) {
	s.mu.Lock()
	s.seq++
	e := runner.Event{Seq: s.seq, Type: typ, TS: float64(time.Now().UnixNano()) / 1e9, Data: []byte(data)}
	s.mu.Unlock()
	s.sink(e)
	if e.Terminal() {
		close(s.done)
	}
}
func (s *script) Write(p []byte) (int, error) { return len(p), nil }
func (s *script) CloseStdin() error           { return nil }
func (s *script) Resize(uint16, uint16) error { return nil }
func (s *script) Signal(syscall.Signal) error { return nil }
func (s *script) Cancel(force bool)           { s.cancel <- force }
func (s *script) Wait() runner.Event          { <-s.done; return runner.Event{} }
func (s *script) Done() <-chan struct{}       { return s.done }

func TestLimitsStatesAndCursors(t *testing.T) {
	var started []*script
	var mu sync.Mutex
	m := NewManager(Config{MaxConcurrent: 3, MaxPerOwner: 2, Retention: time.Minute, Start: func(spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
		s := &script{sink: sink, done: make(chan struct{}), cancel: make(chan bool, 1)}
		mu.Lock()
		started = append(started, s)
		mu.Unlock()
		s.emit(runner.EventReady, "")
		return handle{s}, nil
	}})
	a1, _ := m.Start(Owner{Key: "a"}, "one", runner.Spec{})
	_, _ = m.Start(Owner{Key: "a"}, "two", runner.Spec{})
	if _, err := m.Start(Owner{Key: "a"}, "three", runner.Spec{}); !isLimit(err, "session") {
		t.Fatalf("per-owner limit: %v", err)
	}
	_, _ = m.Start(Owner{Key: "b"}, "x", runner.Spec{})
	if _, err := m.Start(Owner{Key: "c"}, "y", runner.Spec{}); !isLimit(err, "global") {
		t.Fatalf("global limit: %v", err)
	}
	if _, err := m.Get("b", a1.ID); !errors.Is(err, ErrNotFound) {
		t.Fatal("another owner found a's execution")
	}
	s := started[0]
	s.emit(runner.EventStdout, "hello ")
	sn := a1.Snapshot(0)
	if sn.State != StateRunning || len(sn.Events) != 2 || sn.NextSeq != 2 {
		t.Fatalf("%+v", sn)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		s.emit(runner.EventStdout, "world")
		s.emit(runner.EventExit, "")
	}()
	sn = a1.Wait(context.Background(), 2, true)
	if sn.State != StateExited || len(sn.Events) != 2 || sn.Events[0].Seq != 3 {
		t.Fatalf("cursor/wait: %+v", sn)
	}
	// The slot is free again.
	if _, err := m.Start(Owner{Key: "a"}, "four", runner.Spec{}); err != nil {
		t.Fatal(err)
	}
	if err := a1.Cancel(false); !errors.Is(err, ErrFinished) {
		t.Fatal("cancelling a finished execution should say so")
	}
	if n := m.Sweep(time.Now().Add(2 * time.Minute)); n != 1 {
		t.Fatalf("sweep freed %d", n)
	}
	if _, err := m.Get("a", a1.ID); !errors.Is(err, ErrExpired) {
		t.Fatalf("a freed execution: %v, want ErrExpired", err)
	}
}

func isLimit(err error, scope string) bool {
	want := "SANDBOX_MAX_PER_SESSION"
	if scope == "global" {
		want = "SANDBOX_MAX_CONCURRENT"
	}
	return errs.Has(err, errs.TooManyExecutions) && strings.Contains(err.Error(), want)
}

// handle adapts script to runner.Handle (Signal takes a syscall.Signal).
type handle struct{ *script }

// The output all executions hold is bounded: past the budget, finished
// executions are freed, those that ended first first, and their ids then
// answer ErrExpired (not ErrNotFound); running ones are kept.
func TestRetainedOutputBudget(t *testing.T) {
	var scripts []*script
	m := NewManager(Config{MaxConcurrent: 100, MaxPerOwner: 100, MaxRetainedBytes: 10 << 20, Start: func(spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
		s := &script{sink: sink, done: make(chan struct{}), cancel: make(chan bool, 1)}
		scripts = append(scripts, s)
		s.emit(runner.EventReady, "")
		return handle{s}, nil
	}})
	chunk := string(make([]byte, 1<<20))
	var ids []string
	for i := 0; i < 12; i++ {
		e, _ := m.Start(Owner{Key: "a"}, "big", runner.Spec{})
		s := scripts[len(scripts)-1]
		s.emit(runner.EventStdout, chunk)
		s.emit(runner.EventExit, "")
		ids = append(ids, e.ID)
		time.Sleep(time.Millisecond)
	}
	running, _ := m.Start(Owner{Key: "a"}, "still running", runner.Spec{})
	for i := 0; i < 12; i++ {
		scripts[len(scripts)-1].emit(runner.EventStdout, chunk)
	}
	if b := m.RetainedBytes(); b > 10<<20+(13<<20) {
		t.Errorf("%d bytes retained", b)
	}
	if _, err := m.Get("a", ids[0]); !errors.Is(err, ErrExpired) {
		t.Errorf("the oldest finished execution: %v, want ErrExpired", err)
	}
	if _, err := m.Get("b", ids[0]); !errors.Is(err, ErrNotFound) {
		t.Errorf("another owner must not learn it existed: %v", err)
	}
	if _, err := m.Get("a", running.ID); err != nil {
		t.Errorf("a running execution was freed: %v", err)
	}
	if _, err := m.Get("a", "no-such-id"); !errors.Is(err, ErrNotFound) {
		t.Errorf("an unknown id: %v", err)
	}
}

// No principal takes every sandbox slot: with MaxPerPrincipal 2 of 4, a
// third run of one principal is refused (saying it is its share) while
// another principal still starts, and a finished run frees its slot.
func TestPrincipalShare(t *testing.T) {
	var scripts []*script
	m := NewManager(Config{MaxConcurrent: 4, MaxPerOwner: 10, MaxPerPrincipal: 2, Start: func(spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
		s := &script{sink: sink, done: make(chan struct{}), cancel: make(chan bool, 1)}
		scripts = append(scripts, s)
		s.emit(runner.EventReady, "")
		return handle{s}, nil
	}})
	alice := Owner{Key: "a1", Principal: "key:alice"}
	if _, err := m.Start(alice, "1", runner.Spec{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(Owner{Key: "a2", Principal: "key:alice"}, "2", runner.Spec{}); err != nil {
		t.Fatal(err)
	}
	_, err := m.Start(Owner{Key: "a3", Principal: "key:alice"}, "3", runner.Spec{})
	if !errs.Has(err, errs.TooManyExecutions) || !strings.Contains(err.Error(), "share") {
		t.Fatalf("alice's third run: %v", err)
	}
	if _, err := m.Start(Owner{Key: "b1", Principal: "key:bob"}, "b", runner.Spec{}); err != nil {
		t.Fatalf("bob while alice holds her share: %v", err)
	}
	if _, err := m.StartCell(Owner{Key: "a4", Principal: "key:alice"}, "cell", func(spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
		s := &script{sink: sink, done: make(chan struct{}), cancel: make(chan bool, 1)}
		return handle{s}, nil
	}); err != nil {
		t.Fatalf("a cell runs in a kernel already started: no sandbox slot: %v", err)
	}
	scripts[0].emit(runner.EventExit, "")
	if _, err := m.Start(Owner{Key: "a3", Principal: "key:alice"}, "3", runner.Spec{}); err != nil {
		t.Fatalf("alice after one of hers finished: %v", err)
	}
}

// Running executions stay within the retained-output budget too: past it,
// when no finished execution is left to free, their output is dropped and
// each says its events were cut; their ends are kept.
func TestRetainedOutputBudgetWhileRunning(t *testing.T) {
	var scripts []*script
	m := NewManager(Config{MaxConcurrent: 10, MaxPerOwner: 10, MaxRetainedBytes: 1 << 20, Start: func(spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
		s := &script{sink: sink, done: make(chan struct{}), cancel: make(chan bool, 1)}
		scripts = append(scripts, s)
		return handle{s}, nil
	}})
	var execs []*Execution
	for i := 0; i < 3; i++ {
		e, _ := m.Start(Owner{Key: "a"}, "big", runner.Spec{})
		execs = append(execs, e)
	}
	chunk := string(make([]byte, 64<<10))
	for round := 0; round < 10; round++ {
		for _, s := range scripts {
			s.emit(runner.EventStdout, chunk)
		}
	}
	if b := m.RetainedBytes(); b > 1<<20 {
		t.Fatalf("%d bytes held by running executions, past the 1 MiB budget", b)
	}
	cut := 0
	for i, s := range scripts {
		s.emit(runner.EventExit, "")
		sn := execs[i].Snapshot(0)
		if sn.Dropped {
			cut++
		}
		if sn.End == nil || sn.State != StateExited {
			t.Errorf("execution %d lost its end: %+v", i, sn.End)
		}
	}
	if cut == 0 {
		t.Error("no execution says its output was cut")
	}
}

// One principal's output never frees another's results: past its share of
// the budget its own finished executions go first, then its running ones'
// output is dropped; the other principal's finished execution stays.
func TestRetainedOutputShare(t *testing.T) {
	var scripts []*script
	m := NewManager(Config{MaxConcurrent: 10, MaxPerOwner: 10, MaxRetainedBytes: 1 << 20, MaxRetainedPerPrincipal: 512 << 10,
		Start: func(spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
			s := &script{sink: sink, done: make(chan struct{}), cancel: make(chan bool, 1)}
			scripts = append(scripts, s)
			return handle{s}, nil
		}})
	alice, _ := m.Start(Owner{Key: "a", Principal: "key:alice"}, "alice's", runner.Spec{})
	scripts[0].emit(runner.EventStdout, "alice's result")
	scripts[0].emit(runner.EventExit, "")
	chunk := string(make([]byte, 64<<10))
	for i := 0; i < 3; i++ {
		b, _ := m.Start(Owner{Key: "b", Principal: "key:bob"}, "bob's", runner.Spec{})
		s := scripts[len(scripts)-1]
		for j := 0; j < 16; j++ { // 1 MiB each
			s.emit(runner.EventStdout, chunk)
		}
		if i < 2 {
			s.emit(runner.EventExit, "")
		}
		if sn := b.Snapshot(0); !sn.Dropped {
			t.Errorf("bob's run %d holds 1 MiB past his 512 KiB share", i)
		}
	}
	if _, err := m.Get("a", alice.ID); err != nil {
		t.Fatalf("bob's output freed alice's finished execution: %v", err)
	}
	if b := m.RetainedBytes(); b > 1<<20 {
		t.Fatalf("%d bytes held", b)
	}
}

// RunningExcept leaves the named owners' runs out of the count.
func TestRunningExcept(t *testing.T) {
	var mu sync.Mutex
	var started []*script
	m := NewManager(Config{MaxConcurrent: 5, MaxPerOwner: 2, Retention: time.Minute, Start: func(spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
		s := &script{sink: sink, done: make(chan struct{}), cancel: make(chan bool, 1)}
		mu.Lock()
		started = append(started, s)
		mu.Unlock()
		return handle{s}, nil
	}})
	for _, o := range []string{"server", "readyz", "a", "a", "b"} {
		if _, err := m.Start(Owner{Key: o}, "x", runner.Spec{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.RunningExcept("server", "readyz"); n != 3 {
		t.Fatalf("RunningExcept = %d, want the callers' 3", n)
	}
	started[2].emit(runner.EventExit, "")
	if n, all := m.RunningExcept("server", "readyz"), m.Running(); n != 2 || all != 4 {
		t.Fatalf("after one of a's ended: %d of %d, want 2 of 4", n, all)
	}
}
