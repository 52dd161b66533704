package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/srt-mcp/srt-mcp/backend"
	"github.com/srt-mcp/srt-mcp/executions"
	"github.com/srt-mcp/srt-mcp/kernel"
	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/printable"
	"github.com/srt-mcp/srt-mcp/profiles"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// Request is one run a door asks for.
type Request struct {
	// Op names the run in the audit log (execute_code, run_python,
	// sandbox.run_code, librechat.exec, playground.run, install_package).
	Op string
	// Kind labels it in the metrics (command, cell, script, stateless,
	// run_python, install_package, librechat, playground, run_code).
	Kind string
	// Caller asks for the run: its audit line names the principal, and the
	// run counts against the principal's share of the server.
	Caller Caller
	// Workspace is the data session the run works in; nil: a sessionless
	// run (a command without session_id, a stateless cell).
	Workspace *Workspace
	// ByID: the caller reaches the run by its execution_id afterwards
	// (seed 002's tools: poll, stdin, cancel, list). Otherwise the run
	// belongs to its workspace and no tool reaches it by id.
	ByID bool
	// Label is the execution's label in listings ("": the first line of
	// the code).
	Label string

	// What runs: Command (a shell command, within the operator's ceiling),
	// or Argv (in the data sandbox), or Pip (a package spec for pip), or
	// Code in Language: in the session's kernel when Cell is set (the
	// language must be stateful), else a fresh sandbox.
	Command  *CommandArgs
	Argv     []string
	Pip      string
	Language string
	Code     string
	Cell     bool

	// Timeout bounds the run (0: SANDBOX_EXEC_TIMEOUT_S).
	Timeout time.Duration
	// MaxOutput caps each stream (0: SANDBOX_MAX_OUTPUT_BYTES).
	MaxOutput int64
	// Audit adds fields to the run's audit line.
	Audit map[string]any
	// ReleaseBox frees the session's sandbox after the run (a stored
	// LibreChat session holds no container between calls).
	ReleaseBox bool
}

// Run is a started run.
type Run struct {
	Exec      *Execution
	Workspace *Workspace        // nil: sessionless
	Runtime   *profiles.Runtime // nil: a command or an argv
	Note      string            // why the session's interpreter restarted, when it did
	cell      *kernel.Cell      // a kernel cell
	before    sessions.Listing  // the workspace when the run started
	done      chan struct{}     // closed once the run ended, was audited and the session released
	quota     *runWatch         // the workspace's watch: file events, the quota (nil: none)
	svc       *Service
}

// ID is the run's execution id.
func (r *Run) ID() string { return r.Exec.ID() }

// Done is closed once the run has ended and its session is free again.
func (r *Run) Done() <-chan struct{} { return r.done }

// Start starts req's run and returns at once. The session (if any) is
// held until the run ends: a second run in it is session_busy.
func (s *Service) Start(ctx context.Context, req Request) (*Run, error) {
	var ss *sessions.Session
	if req.Workspace != nil {
		ss = req.Workspace.ss
	}
	r := &Run{Workspace: req.Workspace, done: make(chan struct{}), svc: s}
	if req.Code != "" || req.Language != "" {
		rt, err := s.Runtime(req.Language)
		if err != nil {
			return nil, err
		}
		if err := s.CheckCode(req.Code); err != nil {
			return nil, err
		}
		r.Runtime = rt
		if req.Cell && !rt.Stateful {
			req.Cell = false // a language without a kernel runs fresh, with the session's files
		}
		if req.Cell && ss == nil {
			return nil, errorf("invalid_arguments", "a cell needs a session")
		}
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = s.cfg.ExecTimeout
	}
	maxOut := req.MaxOutput
	if maxOut <= 0 {
		maxOut = s.cfg.MaxOutputBytes
	}
	var spec runner.Spec
	switch {
	case req.Cell:
	case req.Command != nil:
		a := *req.Command
		a.InSession = ss != nil
		var err error
		if spec, err = s.CommandSpec(a); err != nil {
			return nil, err
		}
	case req.Pip != "":
		var err error
		if spec, err = s.pipSpec(req.Pip); err != nil {
			return nil, err
		}
	case req.Argv != nil:
		spec = s.dataSpec(req.Argv, timeout, maxOut)
	case r.Runtime != nil && ss == nil:
		spec = s.statelessSpec(r.Runtime, req.Code, timeout, maxOut)
	case r.Runtime != nil:
		spec = s.dataSpec(r.Runtime.Argv(req.Code), timeout, maxOut)
	default:
		return nil, errorf("invalid_arguments", "nothing to run")
	}
	if r.Runtime != nil && !req.Cell && req.Command == nil && req.Argv == nil && req.Pip == "" {
		spec.Report = r.Runtime.Reports() // the compile step's own channel
	}
	if !req.Caller.Anonymous() {
		// A sandbox started ahead of a run serves only its tenant's runs.
		spec.Tenant = req.Caller.Principal
	}
	label := req.Label
	if label == "" {
		label = firstLine(req.Code)
	}
	var owner string
	switch {
	case req.ByID && ss != nil:
		owner = req.Caller.owner(ss.ID)
	case req.ByID || ss == nil:
		owner = req.Caller.owner("")
	default:
		owner = dataOwner(ss.ID)
	}
	language := "bash"
	if r.Runtime != nil {
		language = r.Runtime.Language
	}
	if ss == nil {
		e, err := s.mgr.StartWith(executions.Owner{Key: owner, Principal: req.Caller.Principal}, label, spec, s.sandbox)
		if err != nil {
			return nil, err
		}
		r.Exec = wrapExec(e)
		s.observe(req.Kind, language, r.Exec)
		close(r.done)
		return r, nil
	}

	if err := ss.Acquire(); err != nil {
		return nil, err
	}
	released := false
	defer func() {
		if !released {
			s.startIdle(ss, r.quota)
			ss.Release()
		}
	}()
	// The idle watch's last look, when the session's kernels were
	// watched since the last run (and stayed within the quota), is where
	// this run starts from.
	base, ok := s.pauseIdle(ss)
	if !ok {
		base = ss.Survey(s.watched(ss))
	}
	r.before = base.Files
	w := s.watch(ss, base)
	r.quota = w
	// Closing the session cancels the run.
	var emu sync.Mutex
	var exec *executions.Execution
	unhook := ss.OnClose(func() {
		emu.Lock()
		e := exec
		emu.Unlock()
		if e != nil {
			_ = e.Cancel(true)
		}
	})
	// The run's end is settled before its terminal event reaches the
	// execution: a caller who sees the run end (its reply, a poll) finds
	// the session free, audited and within its quota.
	w.onEnd = func(end runner.Event, network []string) {
		unhook()
		s.ended(r, req, language, end, network)
	}
	w.afterEnd = func() { close(r.done) }
	var start executions.Starter
	if req.Cell {
		k, note, err := s.kernelFor(ctx, ss, r.Runtime.Language)
		if err != nil {
			unhook()
			w.stop()
			var re *runner.Error
			if errors.As(err, &re) || errors.As(err, new(*Error)) {
				return nil, err
			}
			return nil, errorf("kernel_unavailable", "%v", err)
		}
		r.Note = note
		start = func(_ runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
			c, err := kernel.RunCell(k, req.Code, kernel.CellOptions{Timeout: timeout, MaxOutput: maxOut}, w.wrap(sink))
			r.cell = c
			if err == nil {
				w.attach(c, true)
			}
			return c, err
		}
	} else {
		if q := w.fileSize(); q > 0 && (spec.Policy.Limits.MaxFileSizeBytes == 0 || q < spec.Policy.Limits.MaxFileSizeBytes) {
			spec.Policy.Limits.MaxFileSizeBytes = q
		}
		start = s.starter(ss, w)
	}
	var startErr error
	wrapped := func(spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
		h, err := start(spec, sink)
		startErr = err
		return h, err
	}
	var e *executions.Execution
	var err error
	if req.Cell {
		e, err = s.mgr.StartCell(executions.Owner{Key: owner, Principal: req.Caller.Principal}, label, wrapped)
	} else {
		e, err = s.mgr.StartWith(executions.Owner{Key: owner, Principal: req.Caller.Principal}, label, spec, wrapped)
	}
	if err == nil && (errors.Is(startErr, kernel.ErrBusy) || errors.Is(startErr, kernel.ErrDead)) {
		err = startErr
	}
	if err != nil {
		unhook()
		w.stop()
		return nil, err
	}
	emu.Lock()
	exec = e
	emu.Unlock()
	r.Exec = wrapExec(e)
	s.observe(req.Kind, language, r.Exec)
	released = true
	if startErr != nil {
		// The run never started: its end (an error event the manager
		// recorded) did not pass the watch.
		w.endWithout(e.Snapshot(0).End)
	}
	return r, nil
}

// ended settles a session run's end: a cell that killed its kernel is
// noted, the audit line written, the sandbox released if asked, and the
// session freed.
func (s *Service) ended(r *Run, req Request, language string, end runner.Event, network []string) {
	ss := r.Workspace.ss
	if r.cell != nil && r.cell.Restarted {
		s.markRestarted(ss.ID, language, "the previous cell ended by restarting the kernel: variables and imports are gone")
	}
	if r.cell != nil {
		// A reload while the cell ran: its interpreter goes now, not at
		// the next cell (what the cell left running must not go on under
		// the old ceiling).
		s.reconcile(ss, s.kernels(ss.ID))
	}
	fields := map[string]any{"op": req.Op, "network": network, "end": end.Type, "duration_ms": end.DurationMS}
	if req.Caller.Principal != "" {
		fields["principal"] = req.Caller.Principal
	}
	if r.Exec != nil {
		fields["execution_id"] = r.Exec.ID()
	}
	if r.Runtime != nil {
		fields["language"] = language
	}
	code := req.Code
	switch {
	case req.Command != nil:
		code = req.Command.Command
	case req.Argv != nil && req.Pip == "" && len(req.Argv) > 0:
		code = req.Argv[len(req.Argv)-1] // python -c CODE
	}
	if code != "" {
		fields["code_bytes"], fields["code_sha256"] = len(code), SHA256([]byte(code))
	}
	if c := ExitCode(&end); c != nil {
		fields["exit_code"] = *c
	}
	if end.Type == runner.EventError {
		fields["error"] = end.ErrCode
	}
	if r.quota.exceeded() != "" {
		fields["error"] = "quota_exceeded"
	}
	for k, v := range req.Audit {
		fields[k] = v
	}
	s.Audit(ss, fields)
	if req.ReleaseBox {
		s.backend.Release(sessions.BoxOf(ss))
	}
	s.startIdle(ss, r.quota)
	ss.Release()
}

// Run starts req's run and waits for its result (see Run.Wait).
func (s *Service) Run(ctx context.Context, req Request) (Result, error) {
	r, err := s.Start(ctx, req)
	if err != nil {
		return Result{}, err
	}
	return r.Wait(ctx), nil
}

// Wait waits for the run to end and returns its result. If ctx ends
// first (the caller went away), the run is stopped the gentle way first:
// a cell is interrupted (SIGINT: its kernel and variables survive), any
// other run gets SIGTERM, and only what outlives the grace period is
// killed.
func (r *Run) Wait(ctx context.Context) Result {
	sn := r.Exec.Wait(ctx, 0, true)
	if !sn.State.Done() {
		_ = r.Exec.Cancel(false)
		sn = r.Exec.Wait(context.Background(), 0, true)
	}
	<-r.done
	return r.result(sn)
}

// Result is a finished run.
type Result struct {
	ID        string
	SessionID string
	Snapshot  Snapshot
	End       *runner.Event
	Stdout    string // valid UTF-8
	Stderr    string // valid UTF-8, the end's explanation not included (see Explain)
	// CompileFailed: the language's compile step failed (the program
	// never ran).
	CompileFailed bool
	// QuotaExceeded explains why the run was stopped for the workspace
	// quota ("" when it was not).
	QuotaExceeded string
	// Changed are the files the run created or changed (whatever its end);
	// Artifacts are the same when it exited 0 (seed 000 reports files only
	// then), else none.
	Changed   []File
	Artifacts []File
	// MoreFiles is how many changed files the reply leaves out (it lists
	// at most 200).
	MoreFiles int
	Note      string
	Truncated []string // streams cut at the output cap
}

func (r *Run) result(sn executions.Snapshot) Result {
	res := Result{ID: r.Exec.ID(), Snapshot: sn, End: sn.End, Note: r.Note, Truncated: sn.Truncated}
	if r.Workspace != nil {
		res.SessionID = r.Workspace.ID()
	}
	out, errs := Outputs(sn)
	res.Stdout, res.Stderr = ValidUTF8(string(out)), ValidUTF8(string(errs))
	if r.Runtime != nil && sn.End != nil && sn.End.Type == runner.EventExit && r.Runtime.CompileFailed(sn.End.Report) {
		res.CompileFailed = true
	}
	res.QuotaExceeded = r.quota.exceeded()
	if r.Workspace != nil && res.QuotaExceeded == "" && sn.End != nil && sn.End.Type != runner.EventError {
		ss := r.Workspace.ss
		changed, ok := r.quota.changed()
		if !ok {
			changed = ss.Artifacts(r.before)
		}
		res.Changed, res.MoreFiles = r.svc.files(ss, changed, maxArtifacts)
		if res.OK() {
			res.Artifacts = res.Changed
		}
	}
	return res
}

// ExitCode is the exit status to report: the command's own; -1 for a
// timeout; a shell's 128+N for a run ended by signal N when cancelled
// (130: an interrupted cell, 143: SIGTERM); nil when the sandbox failed.
func (res Result) ExitCode() *int { return ExitCode(res.End) }

// ExitCode is Result.ExitCode for an end event.
func ExitCode(end *runner.Event) *int {
	if end == nil {
		return nil
	}
	var c int
	switch end.Type {
	case runner.EventExit:
		c = end.ExitCode
	case runner.EventTimeout:
		c = -1
	case runner.EventCancelled:
		c = 128 + 15
		if n := runner.SignalNumber(end.Signal); n > 0 {
			c = 128 + n
		}
	default:
		return nil
	}
	return &c
}

// OK reports whether the run exited 0.
func (res Result) OK() bool {
	return res.End != nil && res.End.Type == runner.EventExit && res.End.ExitCode == 0 && res.QuotaExceeded == ""
}

// Explain is one sentence on how the run ended when it did not simply
// exit ("" when it did): the timeout, the cancellation, the workspace
// quota, a failed compile step, a sandbox error.
func (res Result) Explain(language string) string {
	end := res.End
	switch {
	case res.QuotaExceeded != "":
		return "quota_exceeded: " + res.QuotaExceeded
	case end == nil:
		return ""
	case end.Type == runner.EventTimeout:
		msg := fmt.Sprintf("Execution timed out after %g seconds", end.TimeoutSeconds)
		if end.Message != "" {
			msg += "; " + end.Message
		}
		return msg
	case end.Type == runner.EventCancelled:
		msg := "Execution was cancelled"
		if end.Message != "" {
			msg += "; " + end.Message
		}
		return msg
	case end.Type == runner.EventError:
		return end.ErrCode + ": " + end.Message
	case res.CompileFailed:
		return language + ": compilation failed"
	}
	return ""
}

// StderrWithEnd is the run's stderr followed by Explain on its own line.
func (res Result) StderrWithEnd(language string) string {
	x := res.Explain(language)
	if x == "" {
		return res.Stderr
	}
	if res.Stderr != "" && !strings.HasSuffix(res.Stderr, "\n") {
		return res.Stderr + "\n" + x
	}
	return res.Stderr + x
}

// Duration is the run's wall time in milliseconds.
func (res Result) Duration() int64 {
	if res.End == nil {
		return 0
	}
	return res.End.DurationMS
}

// Outputs concatenates an execution's stdout and stderr events.
func Outputs(sn executions.Snapshot) (stdout, stderr []byte) {
	for _, e := range sn.Events {
		switch e.Type {
		case runner.EventStdout:
			stdout = append(stdout, e.Data...)
		case runner.EventStderr:
			stderr = append(stderr, e.Data...)
		}
	}
	return stdout, stderr
}

// NetworkDecisions lists the proxy's allow and deny decisions of a run.
func NetworkDecisions(sn executions.Snapshot) []string {
	var out []string
	for _, e := range sn.Events {
		if len(out) >= maxNetworkDecisions {
			break
		}
		if v := e.Violation; v != nil && v.Kind == "network" && v.Decision != "transfer" {
			out = append(out, fmt.Sprintf("%s %s:%d", v.Decision, v.Host, v.Port))
		}
	}
	return out
}

// ValidUTF8 replaces invalid UTF-8 with U+FFFD.
func ValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// SHA256 is the hex SHA-256 of b (audit lines name code by it).
func SHA256(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Audit appends one line to the session's audit log.
//
// The line names the session's incarnation (a caller may reopen a closed
// id: its lines go to the same file), and carries no character that
// changes how a terminal shows it (`srt-mcp audit` prints lines as they
// are).
func (s *Service) Audit(ss *sessions.Session, v map[string]any) {
	v["ts"] = time.Now().UTC().Format(time.RFC3339Nano)
	v["session_id"] = ss.ID
	v["incarnation"] = ss.Incarnation
	b, _ := json.Marshal(v)
	ss.Audit(printable.JSON(b))
}

func (s *Service) observe(kind, language string, e *Execution) {
	if s.cfg.Observe != nil && e != nil {
		s.cfg.Observe(kind, language, e)
	}
}

// starter launches runs of a session on its backend (q, when set, sees
// their events: the file watch and the quota).
func (s *Service) starter(ss *sessions.Session, q *runWatch) executions.Starter {
	box := sessions.BoxOf(ss)
	// A directory workspace under a watched quota: no preallocation,
	// which would put blocks on the host faster than the watch looks
	// (see runner.Spec.NoFallocate).
	noFallocate := s.watched(ss)
	return func(spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
		spec.NoFallocate = spec.NoFallocate || noFallocate
		spec, err := s.withEgress(spec)
		if err != nil {
			return nil, err
		}
		h, err := s.backend.Start(&box, spec, q.wrap(s.auditRequests(ss, spec.ID, sink)))
		if err == nil {
			q.attach(h, false)
		}
		return h, err
	}
}

// sandbox starts a run in a sandbox of its own on the backend (a command
// without a session, a stateless cell, the readiness probe).
func (s *Service) sandbox(spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
	spec, err := s.withEgress(spec)
	if err != nil {
		return nil, err
	}
	return s.backend.Start(nil, spec, s.auditRequests(nil, spec.ID, sink))
}

// auditRequests records every request a run's proxy saw into (cleartext,
// or a terminated tunnel's): in the session's audit log, or for a run
// without a session in the server's log. The record has no query, header
// value or body, and names the credentials put in by name only.
func (s *Service) auditRequests(ss *sessions.Session, execID string, sink func(runner.Event)) func(runner.Event) {
	return func(ev runner.Event) {
		if v := ev.Violation; v != nil && v.Kind == "request" {
			fields := map[string]any{"op": "egress", "execution_id": execID, "scheme": v.Protocol, "method": v.Method, "host": v.Host,
				"port": v.Port, "path": v.Path, "decision": v.Decision, "rule": v.Rule, "status": v.Status,
				"credentials": v.Credentials, "bytes_in": v.BytesIn, "bytes_out": v.BytesOut}
			if ss != nil {
				s.Audit(ss, fields)
			} else if s.cfg.Logger != nil {
				args := make([]any, 0, 2*len(fields))
				for _, k := range []string{"op", "execution_id", "scheme", "method", "host", "port", "path", "decision", "rule", "status", "credentials", "bytes_in", "bytes_out"} {
					args = append(args, k, fields[k])
				}
				s.cfg.Logger.Info("egress request", args...)
			}
		}
		sink(ev)
	}
}

// withEgress adds what the run's proxy needs beyond the policy: the
// interception CA (the operator's, or the server's in its state
// directory) and the values of the masked credentials the run may use,
// read from the server's environment now (a variable the operator
// rotates applies to the next run).
func (s *Service) withEgress(spec runner.Spec) (runner.Spec, error) {
	m, err := runner.NewEgressMaterial(spec.Policy, s.cfg.EgressCADir, os.LookupEnv, s.cfg.Home)
	if err != nil {
		return spec, err
	}
	spec.Egress = m
	return spec, nil
}

// dataPolicy is the policy of code runs: no network, no host paths beyond
// the system view (the operator's deny_read kept), the operator's limits
// with the data profile's timeout and output cap.
func (s *Service) dataPolicy(timeout time.Duration, maxOut int64) policy.Policy {
	p := s.Ceiling()
	p.Network = policy.Network{} // seed 000: no egress from a data session
	p.Filesystem = policy.Filesystem{DenyRead: p.Filesystem.DenyRead}
	p.Limits.Timeout = policy.Duration(timeout)
	p.Limits.MaxOutputBytes = maxOut
	return p
}

// dataSpec is the sandbox of a data session's run: the workspace at
// /mnt/data (mounted by the backend), no network, the data limits.
func (s *Service) dataSpec(argv []string, timeout time.Duration, maxOut int64) runner.Spec {
	return runner.Spec{
		Version: runner.SpecVersion,
		Argv:    argv,
		Cwd:     sessions.WorkspaceMount,
		Home:    s.cfg.Home,
		Policy:  s.dataPolicy(timeout, maxOut),
		Stdin:   runner.StdinNull,
		Hide:    s.cfg.Hide,
	}
}

// statelessSpec runs code once in a fresh sandbox without a session.
func (s *Service) statelessSpec(rt *profiles.Runtime, code string, timeout time.Duration, maxOut int64) runner.Spec {
	return runner.Spec{Version: runner.SpecVersion, Argv: rt.Argv(code), Cwd: runner.SandboxTmp, PrivateCwd: true,
		Home: s.cfg.Home, Policy: s.dataPolicy(timeout, maxOut), Stdin: runner.StdinNull, Hide: s.cfg.Hide,
		Env: map[string]string{"MPLBACKEND": "Agg"}}
}

// pipDomains are the hosts pip talks to for an index: the index's own
// host (with its port when not the scheme's), and PyPI's file host for PyPI.
func pipDomains(index string) ([]string, *url.URL, error) {
	u, err := url.Parse(index)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return nil, nil, fmt.Errorf("the package index %q is not an http(s) URL", index)
	}
	host := u.Hostname()
	if p := u.Port(); p != "" && !((u.Scheme == "http" && p == "80") || (u.Scheme == "https" && p == "443")) {
		host = net.JoinHostPort(u.Hostname(), p)
	}
	d := []string{host}
	if u.Hostname() == "pypi.org" {
		d = append(d, "files.pythonhosted.org")
	}
	return d, u, nil
}

// pipSpec installs a package spec into the session's own site-packages
// (its cache directory, on PYTHONPATH in its sandboxes) with pip, through
// the proxy, only to the package index's domains and only when the
// operator's ceiling allows them.
func (s *Service) pipSpec(pkg string) (runner.Spec, error) {
	domains, index, err := pipDomains(s.cfg.PipIndex)
	if err != nil {
		return runner.Spec{}, errorf("invalid_configuration", "%v", err)
	}
	narrowed, err := policy.Narrow(s.Ceiling(), policy.Policy{Network: policy.Network{AllowedDomains: domains}}, "/", s.cfg.Home)
	if err != nil {
		var pe *policy.Error
		if errors.As(err, &pe) && pe.Code == policy.CodeExceedsCeiling {
			return runner.Spec{}, errorf("network_not_allowed", "install_package needs network access to %s (the package index %s), which the operator does not allow; the operator allows it with --allow-domain %s (SANDBOX_ALLOWED_DOMAINS)",
				strings.Join(domains, " and "), s.cfg.PipIndex, strings.Join(domains, " --allow-domain "))
		}
		return runner.Spec{}, errorf("invalid_configuration", "%v", err)
	}
	argv := []string{s.cfg.Python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-warn-script-location",
		"--upgrade", "--target", backend.SitePackages, "--index-url", s.cfg.PipIndex}
	if index.Scheme == "http" {
		argv = append(argv, "--trusted-host", index.Hostname())
	}
	argv = append(argv, pkg)
	spec := s.dataSpec(argv, 5*time.Minute, 1<<20)
	spec.Policy.Network = narrowed.Network
	return spec, nil
}

// CheckPip says whether install_package can reach the package index
// (network_not_allowed naming the flag when the ceiling forbids it).
func (s *Service) CheckPip() error {
	_, err := s.pipSpec("pip")
	return err
}

// Network is a call's network request (sandbox_config.network).
type Network = policy.Network

// Filesystem is a call's host-path request (sandbox_config.filesystem).
type Filesystem = policy.Filesystem

// Credentials is a call's pick of the operator's credentials
// (sandbox_config.credentials: a list of names).
type Credentials = policy.Credentials

// CommandArgs are a shell command's run (seed 002's execute_code).
type CommandArgs struct {
	Command     string
	Cwd         string // "": /tmp, or /mnt/data with a session
	Env         map[string]string
	Interactive bool
	Timeout     *float64 // seconds; nil: DefaultTimeout
	Network     *policy.Network
	Filesystem  *policy.Filesystem
	Credentials *policy.Credentials // nil: every credential the operator offers
	InSession   bool                // the run has a session (its /mnt/data is a valid cwd)
}

// CommandSpec turns a command's arguments into a sandbox spec within the
// operator's ceiling; asking for more is an error naming the entry.
func (s *Service) CommandSpec(a CommandArgs) (runner.Spec, error) {
	cwd := a.Cwd
	if cwd == "" {
		cwd = "/tmp"
		if a.InSession {
			cwd = sessions.WorkspaceMount
		}
	}
	if !strings.HasPrefix(cwd, "/") || strings.IndexByte(cwd, 0) >= 0 {
		return runner.Spec{}, &policy.Error{Code: "invalid_path", Field: "working_directory", Value: cwd, Message: "must be an absolute path (for example /tmp)"}
	}
	// Clean first, then check: "/tmp/../etc" is /etc.
	cwd = path.Clean(cwd)
	ceiling := s.Ceiling() // one reading: a reload meanwhile applies to the next call
	var call policy.Policy
	if a.Network != nil {
		call.Network = *a.Network
	}
	if a.Filesystem != nil {
		call.Filesystem = *a.Filesystem
	}
	call.Credentials = a.Credentials
	timeout := s.cfg.DefaultTimeout
	if a.Timeout != nil {
		if *a.Timeout <= 0 {
			return runner.Spec{}, &policy.Error{Code: "invalid_limit", Field: "timeout_seconds", Value: fmt.Sprint(*a.Timeout), Message: "must be a positive number of seconds"}
		}
		timeout = time.Duration(*a.Timeout * float64(time.Second))
	}
	if max := ceiling.Limits.Timeout.Std(); max > 0 && timeout > max {
		return runner.Spec{}, &policy.Error{Code: policy.CodeExceedsCeiling, Field: "timeout_seconds", Value: fmt.Sprint(timeout.Seconds()),
			Message: fmt.Sprintf("is above the operator's maximum of %g seconds", max.Seconds())}
	}
	call.Limits.Timeout = policy.Duration(timeout)
	p, err := policy.Narrow(ceiling, call, cwd, s.cfg.Home)
	if err != nil {
		return runner.Spec{}, err
	}
	if !policy.Within(cwd, "/tmp") && !(a.InSession && policy.Within(cwd, sessions.WorkspaceMount)) {
		roots := append(append([]string(nil), ceiling.Filesystem.AllowRead...), ceiling.Filesystem.AllowWrite...)
		ok := false
		for _, r := range roots {
			if policy.Within(cwd, policy.ExpandPath(r, "/", s.cfg.Home)) {
				ok = true
			}
		}
		if !ok {
			return runner.Spec{}, &policy.Error{Code: policy.CodeExceedsCeiling, Field: "working_directory", Value: cwd,
				Message: "is outside the paths the operator allows (" + listOrNone(roots) + "); use /tmp"}
		}
	}
	stdin := runner.StdinPipe
	if a.Interactive {
		stdin = runner.StdinPTY
	}
	ceil := &runner.Ceiling{}
	for _, r := range ceiling.Filesystem.AllowRead {
		ceil.Read = append(ceil.Read, policy.ExpandPath(r, cwd, s.cfg.Home))
	}
	for _, w := range ceiling.Filesystem.AllowWrite {
		ceil.Write = append(ceil.Write, policy.ExpandPath(w, cwd, s.cfg.Home))
	}
	var direct []string
	if path.Base(s.cfg.Shell) == "bash" {
		direct, _ = runner.SimpleCommand(a.Command)
	}
	return runner.Spec{
		Version:    runner.SpecVersion,
		Argv:       []string{s.cfg.Shell, "-c", a.Command},
		Direct:     direct,
		Cwd:        cwd,
		Home:       s.cfg.Home,
		Env:        a.Env,
		Policy:     p,
		Stdin:      stdin,
		Ceiling:    ceil,
		PrivateCwd: true,
		Hide:       s.cfg.Hide,
	}, nil
}

func listOrNone(ps []string) string {
	if len(ps) == 0 {
		return "none"
	}
	return strings.Join(ps, ", ")
}
