package service

// Executions as the doors see them: found by id only for the caller they
// belong to, listed per caller, fed stdin, cancelled. The types a door
// reads (events, snapshots, states) are the executions and runner
// packages' own, named here so that a door imports the service alone.

import (
	"context"
	"strings"
	"time"

	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/executions"
	"github.com/srt-mcp/srt-mcp/runner"
)

// Event is one event of an execution's stream (ready, stdout, stderr,
// violation, file, then one of exit, timeout, cancelled, error).
type Event = runner.Event

// FileChange is a file event's body.
type FileChange = runner.FileChange

// Violation is a sandbox decision an event reports (a denied host, a
// proxied transfer).
type Violation = runner.Violation

// Event types.
const (
	EventReady     = runner.EventReady
	EventStdout    = runner.EventStdout
	EventStderr    = runner.EventStderr
	EventViolation = runner.EventViolation
	EventFile      = runner.EventFile
	EventExit      = runner.EventExit
	EventTimeout   = runner.EventTimeout
	EventCancelled = runner.EventCancelled
	EventError     = runner.EventError
)

// Error codes of error events a door words itself.
const (
	ErrCodeNotFound      = runner.ErrCodeNotFound
	ErrCodeNotExecutable = runner.ErrCodeNotExecutable
)

// CancelGrace is how long a cancelled run gets between SIGTERM and SIGKILL.
const CancelGrace = runner.DefaultGrace

// Snapshot is a consistent view of an execution: its events after a
// cursor and its state.
type Snapshot = executions.Snapshot

// State is an execution's lifecycle state.
type State = executions.State

// States a door tells apart.
const (
	StateFailed = executions.StateFailed
)

// Errors of an execution's operations.
var (
	ErrFinished = executions.ErrFinished
	ErrExpired  = executions.ErrExpired
)

// Execution is one run, reached through its caller's lookup.
type Execution struct{ e *executions.Execution }

func wrapExec(e *executions.Execution) *Execution {
	if e == nil {
		return nil
	}
	return &Execution{e: e}
}

// ID is the execution's id.
func (x *Execution) ID() string { return x.e.ID }

// Label is what it runs, for listings.
func (x *Execution) Label() string { return x.e.Label }

// Created is when it started.
func (x *Execution) Created() time.Time { return x.e.Created }

// Snapshot returns the events after seq (0: all) and the state.
func (x *Execution) Snapshot(after uint64) Snapshot { return x.e.Snapshot(after) }

// Wait blocks until an event after seq exists (untilDone: until the end),
// or ctx ends.
func (x *Execution) Wait(ctx context.Context, after uint64, untilDone bool) Snapshot {
	return x.e.Wait(ctx, after, untilDone)
}

// State is the current state.
func (x *Execution) State() State { return x.e.State() }

// Done is closed when the execution has its terminal event.
func (x *Execution) Done() <-chan struct{} { return x.e.Done() }

// SendStdin writes data to the command's stdin (execution_finished once
// it ended).
func (x *Execution) SendStdin(data []byte) error { return x.e.SendStdin(data) }

// CloseStdin ends the command's input.
func (x *Execution) CloseStdin() error { return x.e.CloseStdin() }

// Cancel ends the execution: SIGTERM, grace, SIGKILL; or SIGKILL at once.
func (x *Execution) Cancel(force bool) error { return x.e.Cancel(force) }

// Execution finds the execution id for c: not_found for one that never
// existed or is not c's, expired for one of c's that was freed.
func (s *Service) Execution(c Caller, id string) (*Execution, error) {
	if id == "" {
		return nil, errs.OnField(errs.InvalidArguments, "execution_id", "", "is required")
	}
	e, err := s.mgr.Lookup(id, c.may)
	if err != nil {
		e := errs.Of(err)
		return nil, errs.New(e.Code, "execution %q: %s", id, e.Message)
	}
	return wrapExec(e), nil
}

// Executions lists c's executions, oldest first: with workspace, those it
// ran there (another principal's workspace is session_not_found); without,
// every one of its MCP session's or, sessionless, of its principal's (an
// anonymous sessionless caller has nothing that is its own but its
// handles: none).
func (s *Service) Executions(c Caller, workspace string) ([]*Execution, error) {
	may := c.may
	if workspace != "" {
		if ss, err := s.reg.Get(workspace); err == nil && ss.Principal != c.Principal {
			return nil, errs.New(errs.SessionNotFound, "No active session with id %s (session ids look like sess_0123456789ab)", workspace)
		}
		own := c.owner(workspace)
		may = func(owner string) bool { return owner == own }
	} else if c.Session == "" && c.Anonymous() {
		return nil, nil
	}
	var out []*Execution
	for _, e := range s.mgr.ListWhere(may) {
		out = append(out, wrapExec(e))
	}
	return out, nil
}

// firstLine labels a run by its code's first line.
func firstLine(code string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(code), "\n")
	if len(line) > 80 {
		line = line[:80] + "..."
	}
	return line
}
