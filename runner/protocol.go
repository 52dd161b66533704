// Package runner owns both sides of the process boundary of one sandboxed
// execution: the wire protocol (Spec in, Events out), the parent-side helper
// that re-executes the srt-mcp binary in runner mode (Command), the runner
// itself (Start), the pure builders of the bubblewrap argv and the macOS
// seatbelt profile, and the code that runs inside the sandbox before the
// user's command (the sandbox's PID 1 and the exec stage that applies rlimits
// and seccomp).
//
// There is never an unsandboxed fallback: if the platform's sandbox is not
// available, or comes up different from what was asked, the execution fails
// with an error event.
package runner

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/policy"
)

// The runner protocol. A parent (the ExecutionManager) starts
// "srt-mcp __runner" with three extra fds and a nearly empty environment:
//
//	parent                                         runner (srt-mcp __runner)
//	  |  fd 3: one Spec, JSON, <= MaxSpecBytes, EOF  |
//	  | -------------------------------------------> | validate, plan mounts, start bwrap
//	  |                                              |   bwrap -> PID 1 (__srt-init) -> __srt-exec -> execve(cmd)
//	  |  fd 4: Events, NDJSON, seq 1, 2, ...         |
//	  | <------------------------------------------- | ready        (sandbox verified, command exec'd)
//	  | <------------------------------------------- | stdout/stderr chunks, violation ...
//	  |  fd 5: Control, NDJSON                       |
//	  | -------------------------------------------> | stdin / stdin_close / resize / signal / cancel
//	  | <------------------------------------------- | exactly one of exit | timeout | cancelled | error
//	  |                                  EOF on fd 4 | runner exits, or, pooled,
//	  |                                              | waits for its next execution
//	  |                                              | (handoff.go)
//
// An optional fd 6 (argv[2] "stage-fd=6") is the in-sandbox stage binary (cmd/srt-mcp-stage, a
// sealed memory file the server made once): the runner gives it to bwrap
// instead of its own, larger binary.
//
// EOF on fd 4 before a terminal event means the runner died; the parent
// reports error{code: runner_crashed}. EOF on fd 5 means the parent died; the
// runner kills the sandbox at once. Nothing secret travels in argv or the
// environment; the spec fd is read once and closed.
// fdRunnerStage is the runner's optional fd 6: the stage binary, present
// when the runner's argv[2] is argStageFD.
const (
	fdRunnerStage = 6
	argStageFD    = "stage-fd=6"
)

const (
	// SpecVersion is the version of Spec and Event; a runner refuses others.
	SpecVersion = 1
	// MaxSpecBytes bounds the spec the runner will read.
	MaxSpecBytes = 4 << 20
	// MaxReportBytes bounds the line a command reports on its report fd.
	MaxReportBytes = 256
)

// Spec is everything the runner needs for one execution. It is the single
// wire struct between parent and runner: add fields here, nowhere else.
type Spec struct {
	Version int `json:"v"`
	// ID names the execution in events and logs.
	ID string `json:"id"`
	// Argv is the command and its arguments; Argv[0] is looked up in the
	// sandbox's PATH when it has no slash.
	Argv []string `json:"argv"`
	// Direct, when set, is Argv's shell command ([bash, "-c", command]) as
	// the words SimpleCommand split it into: a command bash would run by
	// exec'ing one program in place of itself. On Linux the exec stage
	// then runs that program itself, in the environment bash would give it
	// (PWD, SHLVL, _), and runs Argv instead when the program is not found
	// or cannot be executed, or the environment would change what bash
	// does (BASH_ENV, exported functions, ...): the shell then runs, or
	// reports the error, as it always does. Elsewhere Argv runs.
	Direct []string `json:"direct,omitempty"`
	// Cwd is the absolute host path the command starts in. It is visible in
	// the sandbox at the same path (read-only unless allow_write covers it).
	Cwd string `json:"cwd"`
	// PrivateCwd makes a Cwd under /tmp a fresh directory of the sandbox's
	// own /tmp instead of the host's path (the MCP server sets it: a call
	// must never name another user's host /tmp directory).
	PrivateCwd bool `json:"private_cwd,omitempty"`
	// Home is the caller's home directory, used to expand "~" in the policy.
	// It is not the sandbox's HOME, which is private.
	Home string `json:"home,omitempty"`
	// Env is added to the sandbox's minimal environment.
	Env map[string]string `json:"env,omitempty"`
	// Policy is the filesystem, network and limit policy.
	Policy policy.Policy `json:"policy"`
	// Stdin is "pipe" (default), "null", or "pty".
	Stdin string `json:"stdin,omitempty"`
	// Rows and Cols set the initial PTY size.
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
	// Grace is how long SIGTERM has before SIGKILL on timeout or cancel.
	Grace policy.Duration `json:"grace,omitempty"`
	// Mounts are extra bind mounts decided by the parent (a session's
	// workspace, for example): host Src appears at Dst in the sandbox.
	Mounts []ExtraMount `json:"mounts,omitempty"`
	// Hide are host paths no rule may expose (the server's state directory
	// with every session's workspace): hidden even under an exposed parent.
	Hide []string `json:"hide,omitempty"`
	// Ceiling, when set, bounds which host paths allow_read and allow_write
	// may resolve to (after symlinks): the operator's ceiling, enforced
	// again where the path really is.
	Ceiling *Ceiling `json:"ceiling,omitempty"`
	// Init selects the sandbox's PID 1 on Linux: "" picks bwrap's reaper
	// with Landlock scoping where the kernel has Landlock, else srt-mcp's
	// own non-dumpable init; "srt" forces srt-mcp's init.
	Init string `json:"init,omitempty"`
	// User is the host identity the sandbox runs as when the runner runs as
	// root (nil: DefaultSandboxUser). It is never uid or gid 0. A runner
	// that is not root runs the sandbox as its own uid and ignores it.
	User *SandboxUser `json:"user,omitempty"`
	// Report gives the command fd 3, a pipe to the runner: the first line
	// written there (at most MaxReportBytes) comes back on the exit event
	// as Report. A run script says with it that a step before the program
	// failed (a compiled language's compile step) on a channel the
	// program's own exit status or output cannot imitate: the script
	// closes fd 3 before the program runs.
	Report bool `json:"report,omitempty"`
	// CacheDir is a private directory of the caller's where the runner may
	// keep caches (the sandbox's /etc view); it is owner-checked before use.
	// "" picks $XDG_RUNTIME_DIR/srt-mcp or ~/.cache/srt-mcp, or /run/srt-mcp
	// as root.
	CacheDir string `json:"cache_dir,omitempty"`
	// NoFallocate makes fallocate(2) (and XFS's space-reservation
	// ioctls) fail with EOPNOTSUPP in the sandbox. A server sets it for a
	// data session whose workspace is a directory under a watched quota:
	// blocks reserved without a write land in one call, faster than any
	// watch, and with FALLOC_FL_KEEP_SIZE outside RLIMIT_FSIZE. Refused,
	// glibc's posix_fallocate writes the blocks instead (which
	// RLIMIT_FSIZE bounds and the watch sees); ld.gold, go build and cp
	// --sparse go on without it. Linux only (seatbelt has no such rule).
	NoFallocate bool `json:"no_fallocate,omitempty"`
	// Egress carries the interception CA and the masked credentials'
	// values for the run's proxy (see EgressMaterial): never the
	// sandbox's to see.
	Egress *EgressMaterial `json:"egress,omitempty"`
	// Prestart asks a pooled runner to start, once this run ended, a
	// sandbox for a next run of the same shape (same policy, mounts, user
	// and limits), which it keeps waiting for that run (prestart.go). The
	// runner Pool sets it.
	Prestart bool `json:"prestart,omitempty"`
	// Tenant is who the run is for (the server's principal; "" when the
	// server tells no callers apart). A sandbox started after one tenant's
	// run serves only that tenant's next run: its start time (which the
	// code inside can read) says when the run before it ended.
	Tenant string `json:"tenant,omitempty"`
}

// Ceiling lists the host paths a call may read or write at most.
type Ceiling struct {
	Read  []string `json:"read,omitempty"`
	Write []string `json:"write,omitempty"`
}

// InitSRT is the Spec.Init value that forces srt-mcp's own PID 1.
const InitSRT = "srt"

// ExtraMount is a bind mount the parent adds to the policy's view.
type ExtraMount struct {
	Src      string `json:"src"`
	Dst      string `json:"dst"`
	Writable bool   `json:"writable,omitempty"`
}

// Stdin modes.
const (
	StdinPipe = "pipe"
	StdinNull = "null"
	StdinPTY  = "pty"
)

// DefaultGrace is the SIGTERM-to-SIGKILL grace period when Spec.Grace is 0.
const DefaultGrace = 2 * time.Second

// Event types. Exactly one terminal type ends every stream.
const (
	EventReady     = "ready"
	EventStdout    = "stdout"
	EventStderr    = "stderr"
	EventViolation = "violation"
	EventFile      = "file"      // added by the server: a workspace file changed while the run worked
	EventExit      = "exit"      // terminal
	EventTimeout   = "timeout"   // terminal
	EventCancelled = "cancelled" // terminal
	EventError     = "error"     // terminal
)

// Error codes carried by error events.
const (
	ErrCodeInvalidSpec     = "invalid_spec"
	ErrCodeInvalidPolicy   = "invalid_policy"
	ErrCodeInvalidCwd      = "invalid_cwd"
	ErrCodeUnavailable     = "sandbox_unavailable"
	ErrCodeSandboxFailed   = "sandbox_failed"
	ErrCodeVerification    = "sandbox_verification_failed"
	ErrCodeNotFound        = "command_not_found"
	ErrCodeNotExecutable   = "command_not_executable"
	ErrCodeExecFailed      = "exec_failed"
	ErrCodeRunnerCrashed   = "runner_crashed"
	ErrCodeInternal        = "internal_error"
	ErrCodeLimitUnenforced = "limit_unenforceable"
)

// Event is one message of the event stream.
type Event struct {
	Seq  uint64  `json:"seq"`
	Type string  `json:"type"`
	TS   float64 `json:"ts"` // seconds since the Unix epoch

	// stdout/stderr
	Data []byte `json:"-"` // JSON: "data" when valid UTF-8, else "data_b64"

	// exit
	ExitCode   int    `json:"-"` // JSON: "code" (exit); an error's code is ErrCode
	Signal     string `json:"signal,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`

	// timeout
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`

	// error
	ErrCode string `json:"-"` // JSON: "code" (error)
	Message string `json:"message,omitempty"`

	// terminal events: streams whose output was cut at max_output_bytes
	Truncated []string `json:"truncated,omitempty"`

	// exit: the command's line on its report fd (Spec.Report), if any
	Report string `json:"report,omitempty"`

	// exit: what the sandbox used (Linux: the rusage of bwrap, which
	// includes every process reaped inside it)
	CPUMS       int64 `json:"cpu_ms,omitempty"`
	MaxRSSBytes int64 `json:"max_rss_bytes,omitempty"`

	// violation
	Violation *Violation `json:"violation,omitempty"`

	// file
	File *FileChange `json:"file,omitempty"`

	// ready, from a pooled runner to its Pool only (which counts it and
	// takes it off the event): how a sandbox started ahead of the call
	// served the run.
	Prestart *PrestartOutcome `json:"prestart,omitempty"`
}

// PrestartOutcome results.
const (
	PrestartClaimed = "claimed"
	PrestartUnfit   = "unfit"
	PrestartChanged = "changed"
	PrestartFailed  = "failed"
)

// PrestartOutcome is what became of the run's chance at a pre-started
// sandbox (prestart.go).
type PrestartOutcome struct {
	// Result: "claimed" (the run went into it), "unfit" (the runner's
	// sandbox was of another shape: discarded, the run started its own),
	// "changed" (it changed while it waited: discarded, the run started
	// its own), "failed" (it could not be started: the run started its
	// own). No outcome: the runner had none.
	Result string `json:"result"`
	Reason string `json:"reason,omitempty"`
	// BuildMS is how long the pre-started sandbox took to start, WaitMS
	// how long it then waited for its run.
	BuildMS float64 `json:"build_ms,omitempty"`
	WaitMS  float64 `json:"wait_ms,omitempty"`
}

// FileChange is a workspace file a run created, changed or removed, as the
// server saw it while the run worked (so a client polling a long run sees
// its artifacts appear).
type FileChange struct {
	Path string `json:"path"`                 // e.g. /mnt/data/out.csv
	Op   string `json:"op"`                   // created, changed or removed
	Size int64  `json:"size_bytes,omitempty"` // created and changed
}

// Violation describes something the sandbox refused (or, for network
// decisions, allowed) so the caller can tell why a command failed.
type Violation struct {
	Kind     string `json:"kind"`               // "network" or "filesystem"
	Decision string `json:"decision"`           // "deny", "allow", or "transfer" (totals)
	Host     string `json:"host,omitempty"`     // network
	Port     int    `json:"port,omitempty"`     // network
	Path     string `json:"path,omitempty"`     // filesystem
	Rule     string `json:"rule,omitempty"`     // the rule that decided
	Action   string `json:"action,omitempty"`   // what srt-mcp did, e.g. "removed"
	Protocol string `json:"protocol,omitempty"` // "http", "connect", "socks5"; "https" for a terminated tunnel's request
	// Kind "request": one request the proxy saw into (cleartext or a
	// terminated tunnel). Path is its path without the query.
	Method      string   `json:"method,omitempty"`
	Status      int      `json:"status,omitempty"`
	Credentials []string `json:"credentials,omitempty"` // names of the secrets put in
	// Reason is the operator's deny reason (deniedDomainReasons).
	Reason string `json:"reason,omitempty"`
	// Decision "transfer", once at the end of a run that used the proxy:
	// the bytes it carried to and from upstream servers.
	BytesOut int64 `json:"bytes_out,omitempty"`
	BytesIn  int64 `json:"bytes_in,omitempty"`
}

// Terminal reports whether the event ends the stream.
func (e *Event) Terminal() bool {
	switch e.Type {
	case EventExit, EventTimeout, EventCancelled, EventError:
		return true
	}
	return false
}

// Time returns TS as a time.Time.
func (e *Event) Time() time.Time {
	return time.Unix(0, int64(e.TS*1e9))
}

type eventAlias Event

type eventJSON struct {
	*eventAlias
	Data    *string         `json:"data,omitempty"`
	DataB64 string          `json:"data_b64,omitempty"`
	Code    json.RawMessage `json:"code,omitempty"`
}

// MarshalJSON writes "code" as the exit status for exit events and as the
// error code for error events, and output data as text when it is UTF-8.
func (e Event) MarshalJSON() ([]byte, error) {
	j := eventJSON{eventAlias: (*eventAlias)(&e)}
	if e.Data != nil {
		if utf8.Valid(e.Data) {
			s := string(e.Data)
			j.Data = &s
		} else {
			j.DataB64 = base64.StdEncoding.EncodeToString(e.Data)
		}
	}
	switch e.Type {
	case EventExit:
		j.Code = json.RawMessage(fmt.Sprint(e.ExitCode))
	case EventError:
		j.Code, _ = json.Marshal(e.ErrCode)
	}
	// Output is read by programs and models, never put into HTML: "<" stays
	// "<" (json.Marshal would spell it \u003c, six characters for one).
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(j); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// UnmarshalJSON is the inverse of MarshalJSON.
func (e *Event) UnmarshalJSON(b []byte) error {
	j := eventJSON{eventAlias: (*eventAlias)(e)}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	switch {
	case j.Data != nil:
		e.Data = []byte(*j.Data)
	case j.DataB64 != "":
		d, err := base64.StdEncoding.DecodeString(j.DataB64)
		if err != nil {
			return fmt.Errorf("event data_b64: %w", err)
		}
		e.Data = d
	}
	if len(j.Code) > 0 {
		if bytes.HasPrefix(j.Code, []byte(`"`)) {
			return json.Unmarshal(j.Code, &e.ErrCode)
		}
		return json.Unmarshal(j.Code, &e.ExitCode)
	}
	return nil
}

// Control messages, parent to runner (fd 5).
const (
	CtlStdin      = "stdin"       // Data: bytes for the command's stdin
	CtlStdinClose = "stdin_close" // close stdin (a PTY gets ^D)
	CtlResize     = "resize"      // Rows, Cols
	CtlSignal     = "signal"      // Signal: e.g. "SIGINT", to every process in the sandbox
	CtlCancel     = "cancel"      // Force: SIGKILL now instead of SIGTERM + grace
	// CtlNoPrestart: start no sandbox ahead when this run ends, whatever
	// its spec said (the pool closed: its server is draining).
	CtlNoPrestart = "no_prestart"
)

// Control is one parent-to-runner message.
type Control struct {
	Type   string `json:"type"`
	Data   []byte `json:"data,omitempty"`
	Rows   uint16 `json:"rows,omitempty"`
	Cols   uint16 `json:"cols,omitempty"`
	Signal string `json:"signal,omitempty"`
	Force  bool   `json:"force,omitempty"`
}

// Error is an execution failure with a wire code (see ErrCode*).
type Error = errs.Error

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func nowTS() float64 {
	return float64(time.Now().UnixNano()) / 1e9
}
