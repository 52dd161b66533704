package executions

import (
	"strings"
	"testing"
	"time"

	"github.com/srt-mcp/srt-mcp/runner"
)

// Every request a run's proxy sees is a violation event (issue 27), and
// its method is what the sandbox sent: a token of any length the proxy's
// request head allows (256 KiB). The retained-output budget counts a
// violation's host, path and rule but not its method, so one execution
// holds 20000 such events (MaxEvents), about 5 GiB of the server's
// memory, against a budget that saw a few MiB.
func TestBudgetCountsARequestsMethod(t *testing.T) {
	var s *script
	const budget = 4 << 20
	m := NewManager(Config{MaxConcurrent: 2, Retention: time.Minute, MaxRetainedBytes: budget,
		Start: func(spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
			s = &script{sink: sink, done: make(chan struct{}), cancel: make(chan bool, 1)}
			s.emit(runner.EventReady, "")
			return handle{s}, nil
		}})
	e, err := m.Start(Owner{Key: "a"}, "flood", runner.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	method := strings.Repeat("M", 200_000)
	for i := 0; i < 100; i++ {
		s.sink(runner.Event{Type: runner.EventViolation, Violation: &runner.Violation{Kind: "request", Decision: "deny", Method: method, Path: "/a/../b"}})
	}
	held := 0
	for _, ev := range e.Snapshot(0).Events {
		if v := ev.Violation; v != nil {
			held += len(v.Method) + len(v.Path) + len(v.Host) + len(v.Rule)
		}
	}
	if held > budget {
		t.Errorf("an execution holds %d bytes of request records against a retained-output budget of %d: a request's method is not counted", held, budget)
	}
}
