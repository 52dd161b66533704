package service

// Each data session may have one long-lived kernel per stateful language
// (seed 001): cells run in it, so variables and imports persist between
// calls.

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/srt-mcp/srt-mcp/kernel"
	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/printable"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// workspaces are the kernel sets of the data sessions that have any.
type workspaces struct {
	mu sync.Mutex
	k  map[string]*sessionKernels
}

func newWorkspaces() *workspaces { return &workspaces{k: map[string]*sessionKernels{}} }

// sessionKernels are one session's kernels.
type sessionKernels struct {
	start     sync.Mutex // one kernel start at a time
	mu        sync.Mutex
	byLang    map[string]*kernel.Kernel
	restarted map[string]string // language -> why its kernel restarted
	// policies are the sandbox policies the kernels started under: one
	// the ceiling would now make differently is restarted.
	policies map[string]policy.Policy
	memory   int64      // the memory limit of its kernels (0: the operator's)
	idle     *idleWatch // the quota's watch between runs (see idle.go)
	// resumeNoted: a cell already said that the session's persistent
	// workspace was resumed with fresh interpreters.
	resumeNoted bool
}

func (sk *sessionKernels) setMemory(m int64) {
	sk.mu.Lock()
	sk.memory = m
	sk.mu.Unlock()
}

// kernels returns the session's kernel set, creating it.
func (s *Service) kernels(sid string) *sessionKernels {
	s.ws.mu.Lock()
	defer s.ws.mu.Unlock()
	sk := s.ws.k[sid]
	if sk == nil {
		sk = &sessionKernels{byLang: map[string]*kernel.Kernel{}, restarted: map[string]string{}, policies: map[string]policy.Policy{}}
		s.ws.k[sid] = sk
	}
	return sk
}

// closeKernels ends a session's kernels (the session ended, or its
// kernels must start again).
func (s *Service) closeKernels(sid string) {
	s.ws.mu.Lock()
	sk := s.ws.k[sid]
	delete(s.ws.k, sid)
	s.ws.mu.Unlock()
	if sk == nil {
		return
	}
	sk.mu.Lock()
	ks := sk.byLang
	sk.byLang = map[string]*kernel.Kernel{}
	iw := sk.idle
	sk.idle = nil
	sk.mu.Unlock()
	if iw != nil && iw.w != nil {
		iw.w.halt()
	}
	for _, k := range ks {
		k.Close()
	}
}

// kernelSpec is the sandbox of a session's kernel: the session's sandbox
// without a timeout (cells have their own) or an output cap (cells cap
// their own). In a directory workspace under a watched quota, no file it
// writes may be larger than the quota (RLIMIT_FSIZE, like a fresh run's
// "what the quota leaves", but for the kernel's whole life: a server that
// is not root may lower a running process's hard limit, never raise it
// again, so a limit refreshed before each cell would only ever shrink,
// and what the kernel already started would keep its own).
func (s *Service) kernelSpec(ss *sessions.Session, argv []string, memory int64) runner.Spec {
	spec := s.dataSpec(argv, 0, 0)
	if memory > 0 && (spec.Policy.Limits.MaxMemoryBytes == 0 || memory < spec.Policy.Limits.MaxMemoryBytes) {
		spec.Policy.Limits.MaxMemoryBytes = memory
	}
	if s.watched(ss) {
		if q := max(s.cfg.WorkspaceQuota, quotaSlack); spec.Policy.Limits.MaxFileSizeBytes == 0 || q < spec.Policy.Limits.MaxFileSizeBytes {
			spec.Policy.Limits.MaxFileSizeBytes = q
		}
	}
	spec.Policy.Limits.Timeout = 0
	spec.Policy.Limits.MaxOutputBytes = 0
	spec.Stdin = runner.StdinPipe
	return spec
}

// interpreter is the program that runs language's kernel.
func (s *Service) interpreter(language string) string {
	if language == "javascript" {
		return s.cfg.Node
	}
	return s.cfg.Python
}

// kernelFor returns the session's running kernel for language, starting
// one if there is none (or it died); note says why an earlier one is gone.
func (s *Service) kernelFor(ctx context.Context, ss *sessions.Session, language string) (*kernel.Kernel, string, error) {
	sk := s.kernels(ss.ID)
	sk.start.Lock()
	defer sk.start.Unlock()
	sk.mu.Lock()
	k, note, memory, started := sk.byLang[language], sk.restarted[language], sk.memory, sk.policies[language]
	sk.mu.Unlock()
	argv, err := kernel.Argv(language, s.interpreter(language))
	if err != nil {
		return nil, "", err
	}
	spec := s.kernelSpec(ss, argv, memory)
	if k != nil && k.Alive() {
		if reflect.DeepEqual(started, spec.Policy) {
			return k, "", nil
		}
		// The operator's settings changed since it started: it may hold
		// what they no longer allow.
		k.Close()
		note = settingsNote(language)
	}
	if k != nil && note == "" {
		note = "the " + language + " kernel had exited (" + k.DeadReason() + "); a new one started without the old variables"
	}
	if k == nil && note == "" && ss.Resumed() {
		sk.mu.Lock()
		if !sk.resumeNoted {
			sk.resumeNoted = true
			note = "this persistent workspace was resumed from storage (its server restarted, or it was suspended after idling): a new " + language + " interpreter started; its files are kept, variables and imports are not"
		}
		sk.mu.Unlock()
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	k, err = kernel.Start(sctx, language, spec, kernel.Starter(s.starter(ss, nil)))
	if err != nil {
		return nil, "", err
	}
	s.ws.mu.Lock()
	current := s.ws.k[ss.ID] == sk
	s.ws.mu.Unlock()
	if !current { // the session ended (or was reset) while the kernel started
		k.Close()
		return nil, "", errorf("session_not_found", "session %s was closed", ss.ID)
	}
	sk.mu.Lock()
	sk.byLang[language] = k
	sk.policies[language] = spec.Policy
	delete(sk.restarted, language)
	sk.mu.Unlock()
	return k, note, nil
}

// settingsNote says why a kernel restarted after a settings reload.
func settingsNote(language string) string {
	return "the operator's settings changed (a settings reload): the " + language + " interpreter restarted under the new ones; its variables and imports are gone"
}

// reconcileKernels brings every workspace's interpreters under the
// ceiling now in force: one whose sandbox the ceiling would now make
// differently is closed at once if its workspace is idle (a thread a cell
// left running would otherwise go on under the old ceiling), else when
// its cell ends; its next cell starts a new one and says why.
func (s *Service) reconcileKernels() {
	s.ws.mu.Lock()
	sets := make(map[string]*sessionKernels, len(s.ws.k))
	for sid, sk := range s.ws.k {
		sets[sid] = sk
	}
	s.ws.mu.Unlock()
	for sid, sk := range sets {
		ss, err := s.reg.Get(sid)
		if err != nil || ss.Acquire() != nil {
			continue // closed, pooled (the pool drains itself), or running a cell (its end reconciles)
		}
		s.reconcile(ss, sk)
		ss.Release()
	}
}

// reconcile closes ss's kernels that the ceiling now in force would start
// differently (ss held by the caller).
func (s *Service) reconcile(ss *sessions.Session, sk *sessionKernels) {
	var stale []*kernel.Kernel
	sk.mu.Lock()
	for lang, k := range sk.byLang {
		argv, err := kernel.Argv(lang, s.interpreter(lang))
		if err != nil || reflect.DeepEqual(sk.policies[lang], s.kernelSpec(ss, argv, sk.memory).Policy) {
			continue
		}
		delete(sk.byLang, lang)
		sk.restarted[lang] = settingsNote(lang)
		stale = append(stale, k)
	}
	sk.mu.Unlock()
	for _, k := range stale {
		k.Close()
	}
}

// markRestarted records that a cell ended by killing its kernel.
func (s *Service) markRestarted(sid, language, why string) {
	sk := s.kernels(sid)
	sk.mu.Lock()
	sk.restarted[language] = why
	sk.mu.Unlock()
}

// ResetKernel gives the session a fresh interpreter for language (seed
// 001's reset_workspace): every kernel of the session ends, its files stay.
func (s *Service) ResetKernel(ctx context.Context, c Caller, w *Workspace, language string) error {
	ss := w.ss
	if !s.Stateful(language) {
		return errorf("unsupported_language", "language %q has no persistent interpreter here (python, javascript)", language)
	}
	if err := ss.Acquire(); err != nil {
		return err
	}
	defer ss.Release()
	s.pauseIdle(ss)
	defer s.startIdle(ss, nil)
	sk := s.kernels(ss.ID)
	sk.mu.Lock()
	old := sk.byLang
	sk.byLang = map[string]*kernel.Kernel{}
	sk.restarted = map[string]string{}
	sk.mu.Unlock()
	for _, k := range old {
		k.Close()
	}
	if _, _, err := s.kernelFor(ctx, ss, language); err != nil {
		return errorf("kernel_unavailable", "%v", err)
	}
	s.audit(c, ss, map[string]any{"op": "reset_workspace", "language": language})
	return nil
}

// KernelInfo is what a session's running interpreter reports about itself.
type KernelInfo struct {
	Running   bool
	Version   string
	Variables []string
	Modules   []string
	ExecCount int
	Memory    int64
}

// KernelInfo asks the session's interpreter for language about its
// variables, modules, execution count and memory (kernel_busy while a
// cell runs past a short wait).
func (s *Service) KernelInfo(ctx context.Context, w *Workspace, language string) (KernelInfo, error) {
	sk := s.kernels(w.ss.ID)
	sk.mu.Lock()
	k := sk.byLang[language]
	sk.mu.Unlock()
	if k == nil || !k.Alive() {
		return KernelInfo{}, nil
	}
	ictx, cancel := context.WithTimeout(ctx, 3*time.Second)
	info, err := k.Info(ictx)
	cancel()
	if err != nil {
		return KernelInfo{}, errorf("kernel_busy", "the interpreter is running a cell; ask again when it is done (%v)", err)
	}
	// Names the code chose (a variable, a module it made up) are shown made
	// safe, like file names.
	safeAll := func(names []string) []string {
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = printable.String(n)
		}
		return out
	}
	return KernelInfo{Running: true, Version: printable.String(k.Version), Variables: safeAll(info.Variables), Modules: safeAll(info.Modules),
		ExecCount: info.ExecCount, Memory: info.Memory}, nil
}
