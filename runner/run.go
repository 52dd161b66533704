package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/policy"
)

// ErrExited is returned by stdin writes after the command has exited.
var ErrExited = errors.New("the execution has exited; its stdin is closed")

// ErrNoStdin is returned by stdin writes when the execution was started
// without a stdin pipe or PTY.
var ErrNoStdin = errors.New("the execution has no stdin (it was started with stdin \"null\"); start it with stdin \"pipe\" or interactive")

// Options are the in-process extras of Start that do not cross the wire.
type Options struct {
	// Stdin, when set and the spec's stdin mode is "pipe", is handed to the
	// sandbox as its stdin directly (srt-mcp exec passes its own stdin).
	Stdin *os.File
	// Self is the srt-mcp binary mounted into the sandbox; default: this
	// process's executable.
	Self string
	// prestarted is a sandbox a pooled runner started ahead of this run
	// (runnerMain); the run claims it when it fits.
	prestarted *prestarted
	// Egress serves the sandbox's only way out: the HTTP and SOCKS5 proxy
	// listeners the sandbox opened on its own loopback. Nil means no
	// network at all.
	Egress EgressFunc
}

// EgressFunc starts one execution's egress filter on the two listeners the
// sandbox opened (HTTP proxy and SOCKS5, inside its network namespace, so
// only that sandbox reaches them). Every allow and deny goes to report.
// The returned Closer stops it. The netproxy package provides it; the
// runner does not depend on it.
type EgressFunc func(cfg EgressConfig, http, socks net.Listener, report func(Violation)) (io.Closer, error)

// In-sandbox proxy ports; the environment points clients at them.
const (
	ProxyHTTPPort  = 3128
	ProxySOCKSPort = 1080
)

// Run is one sandboxed execution in progress, seen from the runner.
type Run struct {
	spec  Spec
	sink  func(Event)
	start time.Time

	mu           sync.Mutex
	seq          uint64
	stdin        io.WriteCloser // pipe write end or PTY master; nil when none
	ptmx         *os.File
	exited       bool
	reason       string // "", EventTimeout or EventCancelled
	killTimer    *time.Timer
	timeoutTimer *time.Timer
	truncated    []string

	proc       sandboxProc
	prestart   *PrestartOutcome // how a pre-started sandbox served (or did not serve) the run
	egress     io.Closer
	egressPrep *egressPrep
	plan       *Plan
	cache      string // srt-mcp's private cache directory, "" if none
	done       chan struct{}
	term       Event
}

// sandboxProc is the platform's handle on a started sandbox.
type sandboxProc interface {
	// wait blocks until every process of the sandbox is gone.
	wait() procResult
	// signal sends sig to every process in the sandbox.
	signal(sig syscall.Signal) error
	// kill ends the sandbox at once (SIGKILL to all of it).
	kill()
	// terminal is the PTY master the sandbox opened, if any.
	terminal() *os.File
	// proxyListeners are the HTTP and SOCKS5 listeners the sandbox opened
	// on its own loopback, if asked for; the caller owns them.
	proxyListeners() []*os.File
}

type procResult struct {
	code   int
	sig    int
	err    *Error // the sandbox itself failed (not the command)
	cpuMS  int64  // user + system CPU of the whole sandbox (every process reaped in it)
	maxRSS int64  // the largest resident set of any of its processes, bytes
	report string // the command's line on its report fd (Spec.Report)
}

// readReport reads the first line a command writes on its report fd (at
// most MaxReportBytes of it) and discards the rest until every writer is
// gone, then delivers the line.
func readReport(r *os.File) <-chan string {
	ch := make(chan string, 1)
	go func() {
		defer r.Close()
		b, _ := io.ReadAll(io.LimitReader(r, MaxReportBytes))
		_, _ = io.Copy(io.Discard, r)
		line, _, _ := strings.Cut(string(b), "\n")
		ch <- strings.ToValidUTF8(strings.TrimSpace(line), "")
	}()
	return ch
}

// Start validates spec, builds the sandbox and starts the command. Events go
// to sink (called from several goroutines, one event at a time, seq in
// order): ready, then output, then exactly one terminal event. Start returns
// an error only if nothing could be started; the same error is also
// delivered to sink as the terminal error event.
func Start(ctx context.Context, spec Spec, sink func(Event), opts Options) (*Run, error) {
	r := &Run{spec: spec, sink: sink, start: time.Now(), done: make(chan struct{})}
	if err := r.startLocked(ctx, opts); err != nil {
		var e *Error
		switch {
		case !errors.As(err, &e):
			e = &Error{Code: ErrCodeInternal, Message: err.Error()}
		case e.Field != "":
			// A policy entry's error (the plan's): the runner's wire code,
			// with the entry named in the message.
			e = &Error{Code: ErrCodeInvalidPolicy, Message: e.Detail()}
		}
		r.finish(Event{Type: EventError, ErrCode: e.Code, Message: e.Message})
		return r, e
	}
	return r, nil
}

// resolve checks r's spec and resolves its policy into the mount plan
// (r.plan), with what its egress needs (r.egressPrep); it finds the
// binary the sandbox side runs when opts has none.
func (r *Run) resolve(opts *Options) error {
	s := &r.spec
	if s.Version != SpecVersion {
		return errorf(ErrCodeInvalidSpec, "spec version %d is not supported (want %d)", s.Version, SpecVersion)
	}
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return errorf(ErrCodeInvalidSpec, "argv is empty: give a command to run")
	}
	for i, a := range s.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return errorf(ErrCodeInvalidSpec, "argv[%d] contains a NUL byte", i)
		}
	}
	for i, a := range s.Direct {
		if strings.IndexByte(a, 0) >= 0 || i == 0 && a == "" {
			return errorf(ErrCodeInvalidSpec, "direct[%d] is empty or contains a NUL byte", i)
		}
	}
	if !filepath.IsAbs(s.Cwd) {
		return errorf(ErrCodeInvalidCwd, "working directory %q must be an absolute path", s.Cwd)
	}
	switch s.Stdin {
	case "", StdinPipe, StdinNull, StdinPTY:
	default:
		return errorf(ErrCodeInvalidSpec, "stdin %q: use \"pipe\", \"null\" or \"pty\"", s.Stdin)
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return errorf(ErrCodeInvalidSpec, "environment variable name %q is invalid", k)
		}
		if strings.ContainsRune(s.Env[k], 0) {
			return errorf(ErrCodeInvalidSpec, "environment variable %s contains a NUL byte", k)
		}
	}
	if err := s.Policy.Validate(); err != nil {
		// The runner's wire code: a policy the server let through is the
		// spec's fault, whatever the entry (the message names it).
		return &Error{Code: ErrCodeInvalidPolicy, Message: errs.Of(err).Detail()}
	}
	if opts.Self == "" {
		self, err := selfExe()
		if err != nil {
			return errorf(ErrCodeUnavailable, "cannot find the srt-mcp binary to run inside the sandbox: %v", err)
		}
		opts.Self = self
	}
	tr("validated")
	home := s.Home
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	var reserved []string
	cache, _ := CacheRoot(s.CacheDir) // none usable: /etc is bound entry by entry
	r.cache = cache
	if cache != "" {
		reserved = []string{cache}
	}
	hide := append(append([]string(nil), s.Hide...), PrivateDirs()...)
	ed := etcDir(cache)
	tr("etcdir")
	eg, err := prepareEgress(s, cache, home, opts.Egress != nil)
	if err != nil {
		return err
	}
	r.egressPrep = eg
	fsPolicy := s.Policy.Filesystem
	if len(eg.deny) > 0 {
		fsPolicy.DenyRead = append(append([]string(nil), fsPolicy.DenyRead...), eg.deny...)
	}
	plan, err := BuildPlan(PlanInput{FS: fsPolicy, Cwd: s.Cwd, Home: home, Extra: s.Mounts, TmpBytes: s.Policy.Limits.TmpBytes,
		EtcDir: ed, Ceiling: s.Ceiling, PrivateCwd: s.PrivateCwd, Hide: hide, Reserved: reserved, Overlay: eg.overlay})
	tr("planned")
	if err != nil {
		return err
	}
	if err := eg.checkPlan(plan); err != nil {
		return err
	}
	r.plan = plan
	return nil
}

func (r *Run) startLocked(ctx context.Context, opts Options) error {
	s := &r.spec
	if err := r.resolve(&opts); err != nil {
		return err
	}
	plan, eg := r.plan, r.egressPrep

	// stdio for the sandbox: child ends are closed here once it started.
	var child [3]*os.File
	var readers []struct {
		f    *os.File
		name string
	}
	var closeAfter []*os.File
	defer func() {
		for _, f := range closeAfter {
			f.Close()
		}
	}()
	if s.Stdin == StdinPTY && ptyInsideSandbox {
		// The sandbox opens the terminal in its own /dev/pts (so ttyname
		// works inside) and hands the runner the master at start-up.
	} else if s.Stdin == StdinPTY {
		ptmx, tty, err := pty.Open()
		if err != nil {
			return errorf(ErrCodeInternal, "open pty: %v", err)
		}
		rows, cols := s.Rows, s.Cols
		if rows == 0 || cols == 0 {
			rows, cols = 24, 80
		}
		_ = pty.Setsize(ptmx, &pty.Winsize{Rows: rows, Cols: cols})
		child = [3]*os.File{tty, tty, tty}
		closeAfter = append(closeAfter, tty)
		r.ptmx, r.stdin = ptmx, ptmx
		readers = append(readers, struct {
			f    *os.File
			name string
		}{ptmx, EventStdout})
	} else {
		outR, outW, err := os.Pipe()
		if err != nil {
			return err
		}
		errR, errW, err := os.Pipe()
		if err != nil {
			return err
		}
		r.giveToSandbox(outW, errW)
		closeAfter = append(closeAfter, outW, errW)
		child[1], child[2] = outW, errW
		readers = append(readers, struct {
			f    *os.File
			name string
		}{outR, EventStdout}, struct {
			f    *os.File
			name string
		}{errR, EventStderr})
		switch {
		case s.Stdin == StdinNull:
			null, err := os.Open(os.DevNull)
			if err != nil {
				return err
			}
			closeAfter = append(closeAfter, null)
			child[0] = null
		case opts.Stdin != nil:
			child[0] = opts.Stdin
		default:
			inR, inW, err := os.Pipe()
			if err != nil {
				return err
			}
			r.giveToSandbox(inR)
			closeAfter = append(closeAfter, inR)
			child[0] = inR
			r.stdin = inW
		}
	}

	token := ""
	if opts.Egress != nil {
		token = newToken()
	}
	envSpec := *s
	if len(eg.env)+len(eg.drop) > 0 {
		envSpec.Env = map[string]string{}
		for k, v := range s.Env {
			envSpec.Env[k] = v
		}
		for _, k := range eg.drop {
			delete(envSpec.Env, k)
		}
		for k, v := range eg.env {
			envSpec.Env[k] = v
		}
	}
	cfg := &initConfig{
		runConfig: runConfig{
			Argv:        s.Argv,
			Direct:      s.Direct,
			Env:         sandboxEnv(&envSpec, token),
			Cwd:         plan.Cwd,
			Limits:      limitsFor(s.Policy.Limits),
			Report:      s.Report,
			NoFallocate: s.NoFallocate,
		},
		Proxy: opts.Egress != nil,
		PTY:   s.Stdin == StdinPTY,
		Rows:  s.Rows,
		Cols:  s.Cols,
	}
	if cfg.Rows == 0 || cfg.Cols == 0 {
		cfg.Rows, cfg.Cols = 24, 80
	}
	// A sandbox started ahead of this run, when one fits; else one now.
	proc, err := claim(ctx, r, plan, cfg, child, opts)
	if proc == nil && err == nil {
		proc, err = launch(ctx, r, plan, cfg, child, opts)
	}
	if err != nil {
		for _, rd := range readers {
			rd.f.Close()
		}
		if r.stdin != nil {
			r.stdin.Close()
		}
		return err
	}
	r.proc = proc
	if t := proc.terminal(); t != nil {
		r.mu.Lock()
		r.ptmx, r.stdin = t, t
		r.mu.Unlock()
		readers = append(readers, struct {
			f    *os.File
			name string
		}{t, EventStdout})
	}
	if ls := proc.proxyListeners(); opts.Egress != nil && len(ls) == 2 {
		hl, err1 := net.FileListener(ls[0])
		sl, err2 := net.FileListener(ls[1])
		ls[0].Close()
		ls[1].Close()
		if err1 != nil || err2 != nil {
			proc.kill()
			proc.wait()
			return errorf(ErrCodeSandboxFailed, "network proxy listeners: %v %v", err1, err2)
		}
		ecfg := EgressConfig{Network: s.Policy.Network, Token: token, Secrets: eg.secrets}
		if s.Policy.Credentials != nil {
			ecfg.AllowPlaintextInject = s.Policy.Credentials.AllowPlaintextInject
		}
		if s.Policy.Network.TLSTerminate != nil && s.Egress != nil {
			ecfg.CACert, ecfg.CAKey = s.Egress.CACert, s.Egress.CAKey
		}
		egress, err := opts.Egress(ecfg, hl, sl, func(v Violation) {
			r.emit(Event{Type: EventViolation, Violation: &v})
		})
		if err != nil {
			hl.Close()
			sl.Close()
			proc.kill()
			proc.wait()
			return errorf(ErrCodeInvalidPolicy, "network: %v", err)
		}
		r.egress = egress
	}
	r.emit(Event{Type: EventReady, Prestart: r.prestart})
	if t := s.Policy.Limits.Timeout.Std(); t > 0 {
		timer := time.AfterFunc(t-time.Since(r.start), func() { r.stop(EventTimeout, false) })
		r.mu.Lock()
		r.timeoutTimer = timer // stopped when the run ends: a pooled runner lives on
		r.mu.Unlock()
	}

	var wg sync.WaitGroup
	for _, rd := range readers {
		wg.Add(1)
		go func(f *os.File, name string) {
			defer wg.Done()
			r.pump(f, name)
		}(rd.f, rd.name)
	}
	go func() {
		res := proc.wait()
		wg.Wait()
		r.finish(r.terminalEvent(res))
	}()
	return nil
}

// giveToSandbox hands pipes the runner made for the command's stdio to
// the sandbox user (when the runner is root and the sandbox is not), so
// that reopening them (/dev/stdout, /proc/self/fd/1) works as it does for
// an unprivileged caller.
func (r *Run) giveToSandbox(pipes ...*os.File) {
	u, ok := r.sandboxIdentity()
	if !ok {
		return
	}
	for _, p := range pipes {
		_ = p.Chown(u.UID, u.GID)
	}
}

// sandboxIdentity is the host user a root runner's sandbox runs as; false
// when the runner is not root (the sandbox is then the runner's own uid).
func (r *Run) sandboxIdentity() (SandboxUser, bool) {
	if !sandboxUserSwitch || os.Geteuid() != 0 {
		return SandboxUser{}, false
	}
	if r.spec.User != nil {
		return *r.spec.User, true
	}
	return DefaultSandboxUser, true
}

// pump copies one output stream into events, enforcing the output cap.
func (r *Run) pump(f *os.File, name string) {
	// A PTY master stays open until the sandbox is gone (finish closes
	// it): EIO arrives as soon as the command closes its last terminal fd,
	// which can be just before it exits, and closing the master then would
	// hang up the terminal and kill the command with SIGHUP.
	if f != r.ptmx {
		defer f.Close()
	}
	limit := r.spec.Policy.Limits.MaxOutputBytes
	var n int64
	buf := make([]byte, 32<<10)
	for {
		k, err := f.Read(buf)
		if k > 0 {
			chunk := buf[:k]
			if limit > 0 && n+int64(k) > limit {
				chunk = chunk[:max(0, limit-n)]
				r.markTruncated(name)
			}
			n += int64(k)
			if len(chunk) > 0 {
				r.emit(Event{Type: name, Data: append([]byte(nil), chunk...)})
			}
		}
		if err != nil {
			return // EOF, or EIO from a PTY whose last slave fd closed
		}
	}
}

func (r *Run) markTruncated(stream string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.truncated {
		if s == stream {
			return
		}
	}
	r.truncated = append(r.truncated, stream)
}

func (r *Run) terminalEvent(res procResult) Event {
	r.mu.Lock()
	reason := r.reason
	trunc := append([]string(nil), r.truncated...)
	r.mu.Unlock()
	sort.Strings(trunc)
	dur := time.Since(r.start).Milliseconds()
	switch {
	case res.err != nil:
		return Event{Type: EventError, ErrCode: res.err.Code, Message: res.err.Message, Truncated: trunc}
	case reason == EventTimeout:
		return Event{Type: EventTimeout, TimeoutSeconds: r.spec.Policy.Limits.Timeout.Std().Seconds(), DurationMS: dur, Truncated: trunc}
	case reason == EventCancelled:
		// The signal that ended the command (SIGTERM, or SIGKILL after
		// the grace period), so a caller can report it as a shell would.
		e := Event{Type: EventCancelled, DurationMS: dur, Truncated: trunc}
		if sig := res.sig; sig > 0 {
			e.Signal = signalName(syscall.Signal(sig))
		} else if res.code > 128 && res.code < 128+65 {
			e.Signal = signalName(syscall.Signal(res.code - 128))
		}
		return e
	}
	e := Event{Type: EventExit, ExitCode: res.code, DurationMS: dur, Truncated: trunc, CPUMS: res.cpuMS, MaxRSSBytes: res.maxRSS, Report: res.report}
	if res.sig > 0 {
		e.Signal = signalName(syscall.Signal(res.sig))
	}
	return e
}

// emit stamps and delivers one event.
func (r *Run) emit(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	e.Seq = r.seq
	e.TS = nowTS()
	r.sink(e)
}

func (r *Run) finish(e Event) {
	r.mu.Lock()
	r.exited = true
	if r.killTimer != nil {
		r.killTimer.Stop()
	}
	if r.timeoutTimer != nil {
		r.timeoutTimer.Stop()
	}
	stdin := r.stdin
	r.stdin = nil
	r.mu.Unlock()
	if stdin != nil && stdin != r.ptmx {
		stdin.Close()
	}
	if r.ptmx != nil {
		r.ptmx.Close()
	}
	if r.egress != nil {
		r.egress.Close()
	}
	r.egressPrep.removeAll()
	if r.plan != nil {
		for _, v := range sweep(r.plan, r.start) {
			v := v
			r.emit(Event{Type: EventViolation, Violation: &v})
		}
	}
	r.emit(e)
	r.mu.Lock()
	r.term = e
	r.mu.Unlock()
	close(r.done)
}

// Wait blocks until the terminal event was delivered and returns it.
func (r *Run) Wait() Event {
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.term
}

// Done is closed after the terminal event was delivered.
func (r *Run) Done() <-chan struct{} { return r.done }

// Write sends bytes to the command's stdin.
func (r *Run) Write(p []byte) (int, error) {
	r.mu.Lock()
	w, exited := r.stdin, r.exited
	r.mu.Unlock()
	if exited {
		return 0, ErrExited
	}
	if w == nil {
		return 0, ErrNoStdin
	}
	n, err := w.Write(p)
	if err != nil && (errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed)) {
		return n, ErrExited
	}
	return n, err
}

// CloseStdin closes the command's stdin; with a PTY it sends end-of-file
// (^D) instead, since closing the master would hang up the terminal.
func (r *Run) CloseStdin() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.exited {
		return ErrExited
	}
	if r.stdin == nil {
		return ErrNoStdin
	}
	if r.stdin == r.ptmx {
		_, err := r.ptmx.Write([]byte{4})
		return err
	}
	err := r.stdin.Close()
	r.stdin = nil
	return err
}

// Resize sets the PTY's window size.
func (r *Run) Resize(rows, cols uint16) error {
	if r.ptmx == nil {
		return errors.New("the execution has no terminal; start it with interactive (pty) to resize")
	}
	return pty.Setsize(r.ptmx, &pty.Winsize{Rows: rows, Cols: cols})
}

// Signal sends sig to every process in the sandbox.
func (r *Run) Signal(sig syscall.Signal) error {
	r.mu.Lock()
	exited := r.exited
	r.mu.Unlock()
	if exited || r.proc == nil {
		return ErrExited
	}
	return r.proc.signal(sig)
}

// Cancel ends the execution: SIGTERM to every process, then SIGKILL after
// the grace period; with force, SIGKILL at once. The terminal event is
// "cancelled". Cancelling a finished execution does nothing.
func (r *Run) Cancel(force bool) {
	r.stop(EventCancelled, force)
}

func (r *Run) stop(reason string, force bool) {
	r.mu.Lock()
	if r.exited || r.proc == nil {
		r.mu.Unlock()
		return
	}
	if r.reason == "" {
		r.reason = reason
	}
	grace := r.spec.Grace.Std()
	if grace <= 0 {
		grace = DefaultGrace
	}
	if force {
		r.mu.Unlock()
		r.proc.kill()
		return
	}
	if r.killTimer == nil {
		r.killTimer = time.AfterFunc(grace, r.proc.kill)
	}
	r.mu.Unlock()
	_ = r.proc.signal(syscall.SIGTERM)
}

// Plan returns the resolved mount plan (nil if planning failed).
func (r *Run) Plan() *Plan { return r.plan }

// sandboxEnv is the command's whole environment: a minimal base, never the
// runner's own, plus what the caller set.
func sandboxEnv(s *Spec, token string) []string {
	env := map[string]string{
		"PATH":   "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME":   SandboxHome,
		"TMPDIR": SandboxTmp,
		"LANG":   "C.UTF-8",
		"TERM":   "dumb",
		"USER":   "sandbox",
		// A headless plotting backend and a writable config dir, so that
		// matplotlib works without a display or a writable HOME of its own.
		"MPLBACKEND":       "Agg",
		"MPLCONFIGDIR":     SandboxTmp + "/.config/matplotlib",
		"PYTHONUNBUFFERED": "1",
		"SANDBOX":          "1",
	}
	if s.Stdin == StdinPTY {
		env["TERM"] = "xterm-256color"
	}
	if token != "" {
		for k, v := range ProxyEnv(token) {
			env[k] = v
		}
	}
	for k, v := range s.Env {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// ProxyEnv points every common client at the in-sandbox proxy: curl,
// wget, pip, npm, git, Go and Python's urllib and requests read these. The
// sandbox has no DNS of its own; names are resolved by the proxy.
func ProxyEnv(token string) map[string]string {
	httpURL := fmt.Sprintf("http://srt:%s@127.0.0.1:%d", token, ProxyHTTPPort)
	socksURL := fmt.Sprintf("socks5h://srt:%s@127.0.0.1:%d", token, ProxySOCKSPort)
	noProxy := "localhost,127.0.0.1,::1"
	return map[string]string{
		"HTTP_PROXY": httpURL, "http_proxy": httpURL,
		"HTTPS_PROXY": httpURL, "https_proxy": httpURL,
		"ALL_PROXY": socksURL, "all_proxy": socksURL,
		"NO_PROXY": noProxy, "no_proxy": noProxy,
		"npm_config_proxy": httpURL, "npm_config_https_proxy": httpURL,
		"PIP_PROXY":        httpURL,
		"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.proxyAuthMethod", "GIT_CONFIG_VALUE_0": "basic",
	}
}

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// processHeadroom covers PID 1's own threads, which share the sandbox's
// RLIMIT_NPROC count.
const processHeadroom = 16

func limitsFor(l policy.Limits) rlimits {
	r := rlimits{
		AS:     uint64(l.MaxMemoryBytes),
		FSize:  uint64(l.MaxFileSizeBytes),
		NoFile: uint64(l.MaxOpenFiles),
	}
	if l.MaxProcesses > 0 {
		r.NProc = uint64(l.MaxProcesses + processHeadroom)
	}
	return r
}

func selfExe() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(p)
}

// SignalNumber is the number of a signal named as in events ("SIGTERM",
// "SIG34"), or 0.
func SignalNumber(name string) int {
	for n := syscall.Signal(1); n < 65; n++ {
		if signalName(n) == name {
			return int(n)
		}
	}
	return 0
}

func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
		syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
		syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
		syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
		syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
		syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGSYS: "SIGSYS",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("SIG%d", int(s))
}

// ParseSignal maps "SIGINT", "INT" or "2" to a signal.
func ParseSignal(s string) (syscall.Signal, error) {
	u := strings.ToUpper(strings.TrimPrefix(strings.ToUpper(s), "SIG"))
	for i := 1; i < 32; i++ {
		if signalName(syscall.Signal(i)) == "SIG"+u {
			return syscall.Signal(i), nil
		}
	}
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), nil
	}
	return 0, fmt.Errorf("unknown signal %q (use a name such as SIGINT or SIGTERM)", s)
}

// Trace prints a start-up timing mark when SRT_MCP_TRACE is set.
func Trace(what string) { tr(what) }

var trStart = time.Now()

func tr(what string) {
	if os.Getenv("SRT_MCP_TRACE") != "" {
		fmt.Fprintf(os.Stderr, "%8.2fms %s\n", float64(time.Since(trStart).Microseconds())/1000, what)
	}
}
