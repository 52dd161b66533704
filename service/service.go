// Package service is srt-mcp's run service: the one path by which every
// front door (the MCP tools, seed 003's tools, the LibreChat Code API and
// the playground) runs code and stores files in a data session.
//
// A door resolves its caller's session and calls Start or Run with a
// Request. The service holds the session for the run (a second run is
// session_busy), builds the sandbox spec from the runtime registry under
// the operator's ceiling, starts it on the backend (or in the session's
// kernel), cancels it when the session closes, watches the workspace
// quota, streams file events, records metrics, writes the audit line, and
// collects the files the run created or changed. Doors only translate
// their wire format to a Request and a Result back.
package service

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/srt-mcp/srt-mcp/backend"
	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/executions"
	"github.com/srt-mcp/srt-mcp/nofollow"
	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/profiles"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// Config is the operator's configuration of runs (env names in the README).
type Config struct {
	// Ceiling is the most any run may get: domains, paths, limits.
	Ceiling policy.Policy
	// DefaultTimeout applies to a command without a timeout (60 s).
	DefaultTimeout time.Duration
	// Home expands "~" in policies (the server's home).
	Home string
	// EgressCADir keeps the TLS interception CA the server makes when the
	// operator gives none (network.tlsTerminate): key 0600, in the state
	// directory no sandbox sees.
	EgressCADir string
	// Shell runs commands: Shell + ["-c", command] (/bin/bash).
	Shell string
	// Hide are host paths no sandbox may see (the state directory).
	Hide   []string
	Logger *slog.Logger
	// Runtimes is the language registry; nil: discovered at start-up.
	Runtimes *profiles.Runtimes

	Sessions        *sessions.Registry // required
	Backend         backend.Backend    // required: what every run starts on
	Python          string             // the data profile's interpreter (/usr/bin/python3)
	Node            string             // the JavaScript interpreter (/usr/bin/node)
	ExecTimeout     time.Duration      // SANDBOX_EXEC_TIMEOUT_S (60 s)
	MaxOutputBytes  int64              // SANDBOX_MAX_OUTPUT_BYTES (100 KB) per stream
	MaxCodeBytes    int                // SANDBOX_MAX_CODE_BYTES (100 KB)
	MaxUploadBytes  int64              // SANDBOX_MAX_UPLOAD_BYTES (50 MB)
	MaxArtifactRead int64              // SANDBOX_MAX_ARTIFACT_READ_BYTES (10 MB)
	// WorkspaceQuota bounds what one session's workspace holds
	// (SANDBOX_WORKSPACE_QUOTA, 1 GiB); negative: no quota.
	WorkspaceQuota int64
	// SnapshotTTL is how long a workspace snapshot is kept (24 h);
	// SnapshotBudget bounds the bytes one principal's snapshots hold
	// together (4 × WorkspaceQuota).
	SnapshotTTL    time.Duration
	SnapshotBudget int64
	// MaxSessionsPerCaller bounds the sessions one caller (an MCP session,
	// a principal) holds open at once (SANDBOX_MAX_SESSIONS_PER_CALLER, 10).
	MaxSessionsPerCaller int
	PipIndex             string  // install_package's index (SANDBOX_PIP_INDEX_URL)
	WarmPool             int     // sessions kept ready with a warmed Python kernel (SANDBOX_WARM_POOL)
	Files                *Signer // signs download URLs; nil: none
	// PrincipalShare is the part of each server-wide cap (executions
	// running, sessions open, event streams, MCP sessions) one principal
	// may take: 0 or 1, all of it (one tenant, or tenants who trust each
	// other); 0.5: half, so that no API key starves the others.
	PrincipalShare float64
	// Holds bound the other things a caller can make the server hold
	// (HoldMCPSession, HoldEventStream).
	Holds map[string]HoldLimit
	// Observe is told of every execution a door starts (metrics).
	Observe func(kind, language string, e *Execution)
}

// DefaultPipIndex is PyPI's simple index.
const DefaultPipIndex = "https://pypi.org/simple"

// DefaultWorkspaceQuota is SANDBOX_WORKSPACE_QUOTA's default.
const DefaultWorkspaceQuota = 1 << 30

// Service runs code for every door.
type Service struct {
	cfg      Config
	mgr      *executions.Manager
	reg      *sessions.Registry
	backend  backend.Backend
	ws       *workspaces
	pool     *pool
	callers  *callers
	implicit implicit
	convoMu  sync.Mutex // one conversation's workspace made at a time
	holds    holds

	ceiling atomic.Pointer[policy.Policy] // the operator's, replaced by SetCeiling

	watchMu         sync.Mutex
	ceilingWatchers []func(policy.Policy)

	rtOnce sync.Once
	rts    *profiles.Runtimes
	closed chan struct{}
	once   sync.Once
	bg     sync.WaitGroup // background work Shutdown waits for
}

// New starts the service: the runtime registry is discovered, the warm
// pool fills and the cache template is built, all in the background.
func New(cfg Config, mgr *executions.Manager) *Service {
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = 60 * time.Second
	}
	if cfg.Shell == "" {
		cfg.Shell = "/bin/bash"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Python == "" {
		cfg.Python = "/usr/bin/python3"
	}
	if cfg.Node == "" {
		cfg.Node = "/usr/bin/node"
	}
	if cfg.ExecTimeout <= 0 {
		cfg.ExecTimeout = 60 * time.Second
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = 100 << 10
	}
	if cfg.MaxCodeBytes <= 0 {
		cfg.MaxCodeBytes = 100 << 10
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = 50 << 20
	}
	if cfg.MaxArtifactRead <= 0 {
		cfg.MaxArtifactRead = 10 << 20
	}
	if cfg.WorkspaceQuota == 0 {
		cfg.WorkspaceQuota = DefaultWorkspaceQuota
	}
	if cfg.MaxSessionsPerCaller <= 0 {
		cfg.MaxSessionsPerCaller = 10
	}
	if cfg.SnapshotTTL <= 0 {
		cfg.SnapshotTTL = 24 * time.Hour
	}
	if cfg.SnapshotBudget <= 0 && cfg.WorkspaceQuota > 0 {
		cfg.SnapshotBudget = 4 * cfg.WorkspaceQuota
	}
	if cfg.PipIndex == "" {
		cfg.PipIndex = DefaultPipIndex
	}
	if cfg.Backend == nil {
		cfg.Backend = &backend.Native{}
	}
	s := &Service{cfg: cfg, mgr: mgr, reg: cfg.Sessions, backend: cfg.Backend, ws: newWorkspaces(),
		callers: newCallers(), closed: make(chan struct{}),
		implicit: implicit{byMCP: map[string]string{}, byConvo: map[string]string{}}}
	s.holds.counts = map[string]*holdCount{}
	s.SetCeiling(cfg.Ceiling)
	s.reg.OnEnd(func(ss *sessions.Session) {
		s.mgr.CancelOwner(dataOwner(ss.ID), true)
		s.closeKernels(ss.ID)
		s.callers.forget(ss.ID)
		s.forgetImplicit(ss.ID)
		if err := s.backend.Destroy(sessions.BoxOf(ss)); err != nil {
			s.cfg.Logger.Warn("removing a session's sandbox", "session_id", ss.ID, "error", err)
		}
	})
	go s.Runtimes() // discovered at start-up, off the first call's path
	s.startPool(cfg.WarmPool)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		s.buildCacheTemplate()
	}()
	return s
}

// serverOwner owns the executions the server starts for itself;
// probeOwner the readiness probe's (an owner of its own: a probe never
// waits for the server's per-owner slots).
const (
	serverOwner = "server"
	probeOwner  = "readyz"
)

// CallersRunning is how many executions callers started are not done
// (the server's own work and its readiness probes aside).
func (s *Service) CallersRunning() int {
	return s.mgr.RunningExcept(serverOwner, probeOwner)
}

// StopBackground cancels the work the server does for itself (the cache
// template's build): a drain waits for callers' executions, not for an
// optimisation nobody will use after it.
func (s *Service) StopBackground() {
	s.once.Do(func() { close(s.closed) })
}

// Shutdown stops the warm pool and closes the sessions waiting in it,
// and stops the cache template's build; the registry's Shutdown closes the
// rest.
func (s *Service) Shutdown() {
	s.StopBackground()
	s.pool.close()
	done := make(chan struct{})
	go func() {
		s.bg.Wait() // the cache template's build removes its sandbox
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		s.cfg.Logger.Warn("shutdown: the cache template's build did not stop in 15 s")
	}
}

// Ceiling is the operator's policy now: the most any call may ask for.
func (s *Service) Ceiling() policy.Policy { return *s.ceiling.Load() }

// SetCeiling replaces the operator's policy (the settings file was
// reloaded): every execution that starts from now on is narrowed from it;
// running ones keep the policy they started with.
//
// What was started ahead of need under the old ceiling follows: the warm
// pool's interpreters are closed and the pool refills under the new one,
// and a workspace's running interpreter whose sandbox the new ceiling
// would make differently is restarted at its next cell (the reply says
// so).
func (s *Service) SetCeiling(p policy.Policy) {
	s.ceiling.Store(&p)
	s.pool.drain()
	s.reconcileKernels()
	s.watchMu.Lock()
	fs := append([]func(policy.Policy){}, s.ceilingWatchers...)
	s.watchMu.Unlock()
	for _, f := range fs {
		f(p)
	}
}

// Policy is the operator's ceiling as a door sees it.
type Policy = policy.Policy

// WatchCeiling calls f with every new ceiling (a door whose tool
// descriptions name what the operator offers, say).
func (s *Service) WatchCeiling(f func(policy.Policy)) {
	s.watchMu.Lock()
	s.ceilingWatchers = append(s.ceilingWatchers, f)
	s.watchMu.Unlock()
}

// Offered describes the masked credentials a call may use, by name with
// the hosts each goes to ("" when there are none): never a value.
func Offered(p policy.Policy) string {
	c := p.Credentials
	if c == nil || len(p.Network.AllowedDomains) == 0 {
		return ""
	}
	var parts []string
	add := func(name string, hosts []string) {
		if hosts == nil {
			hosts = p.Network.AllowedDomains
		}
		parts = append(parts, name+" ("+strings.Join(hosts, ", ")+")")
	}
	for _, e := range c.EnvVars {
		if e.Mode == policy.CredentialMask {
			add(e.Name, e.InjectHosts)
		}
	}
	for _, f := range c.Files {
		if f.Mode == policy.CredentialMask {
			add(f.Path, f.InjectHosts)
		}
	}
	return strings.Join(parts, "; ")
}

// Config returns the service's configuration (defaults filled in).
func (s *Service) Config() Config { return s.cfg }

// Manager returns the executions manager.
func (s *Service) Manager() *executions.Manager { return s.mgr }

// Sessions returns the session registry.
func (s *Service) Sessions() *sessions.Registry { return s.reg }

// Backend returns the backend data sessions run on.
func (s *Service) Backend() backend.Backend { return s.backend }

// ErrDraining refuses new sessions while the server drains.
var ErrDraining = sessions.ErrDraining

// Draining tells whether the server is draining (it opens no session).
func (s *Service) Draining() bool { return s.reg.Draining() }

// RunsOn names what runs the code, for listings ("bubblewrap", or the
// Docker image).
func (s *Service) RunsOn() string { return s.backend.Runs() }

// Stats are the server's gauges.
type Stats struct {
	Running       int   // executions callers started, running (the server's own work, as its cache template's build, aside)
	Sessions      int   // data sessions open (pooled ones not included)
	WarmReady     int   // sessions waiting in the warm pool
	RetainedBytes int64 // output the executions hold
	Draining      bool
	// WorkspaceFS is "filesystem" when each workspace is a filesystem of
	// its own (the kernel bounds it), else "directory" (a watch does).
	WorkspaceFS string
}

// Stats reads the server's gauges.
func (s *Service) Stats() Stats {
	fs := "directory"
	if s.reg.Volumes() {
		fs = "filesystem"
	}
	return Stats{Running: s.CallersRunning(), Sessions: s.reg.Count(), WarmReady: s.WarmReady(), RetainedBytes: s.mgr.RetainedBytes(), Draining: s.reg.Draining(), WorkspaceFS: fs}
}

// WarmReady is how many sessions wait in the warm pool.
func (s *Service) WarmReady() int { return s.pool.Ready() }

// Error is a failure a door reports to its caller: a code of the tool
// contract and a message saying what to change.
type Error = errs.Error

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf is the error code and message of any error the service, the
// session registry, the runner or the executions manager returns. An
// error without a code is internal_error; a full disk is storage_full.
func CodeOf(err error) (code, msg string) {
	e := errs.Of(err)
	return e.Code, e.Detail()
}

// Runtimes is the language registry (discovered once).
func (s *Service) Runtimes() *profiles.Runtimes {
	s.rtOnce.Do(func() {
		if s.cfg.Runtimes != nil {
			s.rts = s.cfg.Runtimes
			return
		}
		// The probes' scratch is a leftover of this instance's: a server
		// killed while probing leaves it to the next one to remove.
		scratch, err := s.reg.MkdirTemp("probe-")
		var rts *profiles.Runtimes
		if err == nil {
			rts, err = profiles.DiscoverRuntimes(scratch)
			_ = nofollow.RemoveAll(scratch)
		}
		if err != nil {
			s.cfg.Logger.Error("runtimes", "error", err)
			rts = &profiles.Runtimes{}
		}
		s.rts = rts
	})
	return s.rts
}

// Available says whether rt runs here (installed, and the backend runs
// it), and if not, why.
func (s *Service) Available(rt *profiles.Runtime) (bool, string) {
	if ok, why := s.backend.Supports(rt.Language); !ok {
		return false, why
	}
	return rt.Available, rt.Reason
}

// Languages lists the languages that run here.
func (s *Service) Languages() []string {
	var out []string
	for _, rt := range s.Runtimes().All() {
		if ok, _ := s.Available(rt); ok {
			out = append(out, rt.Language)
		}
	}
	return out
}

// Runtime finds language's runtime: unsupported_language when srt-mcp
// does not know it, runtime_unavailable when it is not installed here or
// the backend does not run it.
func (s *Service) Runtime(language string) (*profiles.Runtime, error) {
	if strings.TrimSpace(language) == "" {
		return nil, errorf("invalid_arguments", "language is empty; give one of: %s", strings.Join(s.Languages(), ", "))
	}
	rt, ok := s.Runtimes().Get(language)
	if !ok {
		return nil, errorf("unsupported_language", "language %q is not one srt-mcp knows; these run here: %s", language, strings.Join(s.Languages(), ", "))
	}
	if ok, why := s.Available(rt); !ok {
		return nil, errorf("runtime_unavailable", "%s is not available here: %s", rt.Language, why)
	}
	return rt, nil
}

// Stateful reports whether language has a persistent interpreter here.
func (s *Service) Stateful(language string) bool {
	rt, ok := s.Runtimes().Get(language)
	if !ok || !rt.Stateful {
		return false
	}
	ok, _ = s.Available(rt)
	return ok
}

// CheckCode applies the code size limit.
func (s *Service) CheckCode(code string) error {
	if len(code) > s.cfg.MaxCodeBytes {
		return errorf("code_too_large", "code is %d bytes, more than the %d-byte limit (SANDBOX_MAX_CODE_BYTES)", len(code), s.cfg.MaxCodeBytes)
	}
	if strings.ContainsRune(code, 0) {
		return errorf("invalid_arguments", "code contains a NUL byte")
	}
	return nil
}

// buildCacheTemplate runs the data profile's imports once, in a sandbox,
// with a fresh cache directory, and installs it as the template every new
// session's cache starts from: matplotlib's font list then costs its half
// second once per server instead of once per session. Its scratch
// directory names this server: if the server is killed meanwhile, the
// next one removes it.
func (s *Service) buildCacheTemplate() {
	tmp, err := s.reg.MkdirTemp("cache-build-")
	if err != nil {
		return
	}
	defer nofollow.RemoveAll(tmp) // a tree a sandbox wrote
	uid, free := s.reg.SessionUID()
	defer free()
	box := backend.Box{SessionID: "cache-template", Workspace: filepath.Join(tmp, "data"), Cache: filepath.Join(tmp, "cache"), UID: uid}
	for _, d := range []string{box.Workspace, box.Cache} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return
		}
		if uid != 0 {
			_ = os.Chown(d, uid, uid)
		} else if o := s.reg.Owner(); o != nil {
			_ = os.Chown(d, o.UID, o.GID)
		}
	}
	defer func() { _ = s.backend.Destroy(box) }()
	select {
	case <-s.closed:
		return
	default:
	}
	p := s.Ceiling()
	p.Network = policy.Network{}
	p.Filesystem = policy.Filesystem{}
	p.Limits.Timeout = policy.Duration(2 * time.Minute)
	spec := runner.Spec{
		Version: runner.SpecVersion,
		Argv:    []string{s.cfg.Python, "-c", "import matplotlib; matplotlib.use('Agg'); import matplotlib.font_manager"},
		Cwd:     runner.SandboxTmp,
		Policy:  p,
		Stdin:   runner.StdinNull,
		Hide:    s.cfg.Hide,
	}
	e, err := s.mgr.StartWith(executions.Owner{Key: serverOwner}, "cache-template", spec, func(spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
		return s.backend.Start(&box, spec, sink)
	})
	if err != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.closed:
			_ = e.Cancel(true)
		case <-ctx.Done():
		}
	}()
	sn := e.Wait(context.Background(), 0, true)
	if sn.End == nil || sn.End.Type != runner.EventExit || sn.End.ExitCode != 0 {
		s.cfg.Logger.Debug("no cache template for data sessions (matplotlib missing?)", "end", sn.End)
		return
	}
	if err := s.reg.SetCacheTemplate(box.Cache); err != nil {
		s.cfg.Logger.Warn("cache template", "error", err)
	}
}
