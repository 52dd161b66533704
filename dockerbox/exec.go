package dockerbox

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/srt-mcp/srt-mcp/backend"
	"github.com/srt-mcp/srt-mcp/credentials"
	"github.com/srt-mcp/srt-mcp/nofollow"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/sessions"
	"github.com/srt-mcp/srt-mcp/tlsca"
)

// A run, from the server's side:
//
//	server                                   container
//	  | docker exec /.srt-mcp/exec __docker-exec CONFIG
//	  | ---------------------------------------> | exec stage: waits to see
//	  | ExecInspect: the stage's host pid          |   "srt-run-<id>" in
//	  | mkdir the run's cgroup, move the pid ----> |   /proc/self/cgroup
//	  |                                            | rlimits, seccomp, execve
//	  | <------------- stdout/stderr (attach) ----- | the command and all it
//	  |                                            | starts: in the cgroup
//	  | timeout/cancel: SIGTERM, grace, then freeze+SIGKILL the cgroup
//	  | the exec ends: SIGKILL what is left in the cgroup, remove it, empty
//	  | /tmp (when no other run is in the container), report the end
//
// No step after the start needs a new process in the container: a run that
// exhausts the pids limit, leaves a new session or rewrites files cannot
// outlive its end. A server that is not root cannot write cgroups: its runs
// are killed by their process tree (what re-parents to the container's init
// escapes; run the server as root for the whole guarantee).

// Start implements backend.Backend: a docker exec in the session's
// container, streamed as runner events. A container found dead before the
// run starts (its PID 1 was killed, it was removed) is removed for good
// and the run goes to a new one. A run without a session goes to a native
// sandbox of its own.
func (b *Backend) Start(bx *backend.Box, spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
	if bx == nil {
		if b.cfg.Native == nil {
			return nil, &runner.Error{Code: runner.ErrCodeSandboxFailed, Message: "this Docker backend has no native sandbox for runs without a session"}
		}
		return b.cfg.Native.Start(nil, spec, sink)
	}
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	h, err := b.start(*bx, spec, sink)
	var re *runner.Error
	if (errors.As(err, &re) && re.Code == ErrCodeContainerDied) || errors.Is(err, errStageGone) {
		h, err = b.start(*bx, spec, sink)
	}
	if errors.Is(err, errStageGone) {
		err = &runner.Error{Code: runner.ErrCodeSandboxFailed, Message: "setting up the run: " + err.Error()}
	}
	return h, err
}

// errStageGone: the exec stage vanished before the server adopted it.
// Nothing of the command ran (the stage waits for its cgroup), so the run
// is tried once more.
var errStageGone = errors.New("the exec stage was gone before the run was set up")

func (b *Backend) start(bx backend.Box, spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
	ctx := context.Background()
	c, err := b.Container(ctx, bx)
	if err != nil {
		return nil, err
	}
	// A failure before the run starts: if the container is gone, it is
	// removed for good (and the caller may try a new one).
	failed := func(err error) error {
		if b.dead(c.id) {
			b.forget(bx.Workspace, c)
			return &runner.Error{Code: ErrCodeContainerDied, Message: "the session's container is gone (killed or removed); the next call starts a new one"}
		}
		return err
	}
	nb := make([]byte, 8)
	_, _ = rand.Read(nb)
	name := "srt-run-" + hex.EncodeToString(nb)
	notFound, badCwd := "/tmp/."+name+".notfound", "/tmp/."+name+".badcwd"
	stage := runner.DockerExec{Argv: spec.Argv, NotFound: notFound, FileSize: uint64(b.cfg.FileSize), NoFallocate: spec.NoFallocate, BadCwd: badCwd}
	if l := spec.Policy.Limits; l.MaxFileSizeBytes > 0 && l.MaxFileSizeBytes < b.cfg.FileSize {
		stage.FileSize = uint64(l.MaxFileSizeBytes)
	}
	if l := spec.Policy.Limits; l.MaxOpenFiles > 0 {
		stage.OpenFiles = uint64(l.MaxOpenFiles)
	}
	if b.cgroups {
		stage.Cgroup, stage.CgroupHierarchies = name, runCgroupHierarchies()
	}
	// The stage enters the working directory, in a run started for it as
	// in one started ahead (whose exec's own is fixed before the run).
	stage.Cwd = spec.Cwd
	if stage.Cwd == "" {
		stage.Cwd = sessions.WorkspaceMount
	}
	argv := []string{ExecStageMount, runner.ModeDockerExec, stage.Arg()}
	env := []string{}
	for k, v := range backend.Env() {
		if _, set := spec.Env[k]; !set {
			env = append(env, k+"="+v)
		}
	}
	egCfg, egEnv, drop, err := b.egressFor(spec)
	if err != nil {
		return nil, err
	}
	for k, v := range spec.Env {
		if _, over := egEnv[k]; !over && !contains(drop, k) {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range egEnv {
		env = append(env, k+"="+v)
	}
	env = append(env, stagePATH)
	tty := spec.Stdin == runner.StdinPTY
	withStdin := spec.Stdin != runner.StdinNull
	size := client.ConsoleSize{Height: uint(spec.Rows), Width: uint(spec.Cols)}
	if tty && size.Height == 0 {
		size = client.ConsoleSize{Height: 24, Width: 80}
	}
	// A network allow-list: the proxy listens inside the container's
	// namespace (see proxyListeners) and the environment points at it.
	var egress io.Closer
	var violations []runner.Violation
	var vmu sync.Mutex
	var report func(runner.Violation)
	if n := spec.Policy.Network; len(n.AllowedDomains) > 0 {
		if b.cfg.Egress == nil {
			return nil, &runner.Error{Code: runner.ErrCodeInvalidPolicy, Message: "this server has no network proxy for the Docker backend; remove network.allowed_domains"}
		}
		httpL, socksL, err := b.proxyListeners(c.id)
		if err != nil {
			return nil, &runner.Error{Code: runner.ErrCodeSandboxFailed, Message: "network proxy: " + err.Error()}
		}
		token := uuid.NewString()
		report = func(v runner.Violation) {
			vmu.Lock()
			violations = append(violations, v)
			vmu.Unlock()
		}
		egCfg.Token = token
		egress, err = b.cfg.Egress(egCfg, httpL, socksL, func(v runner.Violation) {
			vmu.Lock()
			r := report
			vmu.Unlock()
			r(v)
		})
		if err != nil {
			httpL.Close()
			socksL.Close()
			return nil, &runner.Error{Code: runner.ErrCodeInvalidPolicy, Message: "network proxy: " + err.Error()}
		}
		for k, v := range runner.ProxyEnv(token) {
			env = append(env, k+"="+v)
		}
	}
	closeEgress := func() {
		if egress != nil {
			egress.Close()
		}
	}
	oomBefore := b.oomKills(c.id)
	b.mu.Lock()
	c.running++
	b.mu.Unlock()
	released := false
	release := func() {
		if !released {
			released = true
			b.mu.Lock()
			c.running--
			b.mu.Unlock()
		}
	}
	// The stage started ahead for this session's next run, else one now.
	// A run on a terminal does not claim it, and ends it: no code of the
	// session runs beside a waiting stage (see prestart.go).
	var waiting *waitingExec
	if !tty {
		waiting = b.takeWaiting(c, b.userOf(bx))
	} else {
		b.dropNext(c)
	}
	var execID string
	var att client.ExecAttachResult
	if waiting != nil {
		execID, att = waiting.execID, waiting.att
	} else {
		ex, err := b.cli.ExecCreate(ctx, c.id, client.ExecCreateOptions{
			User: b.userOf(bx), TTY: tty, ConsoleSize: size, AttachStdin: withStdin, AttachStdout: true, AttachStderr: true,
			Env: env, WorkingDir: sessions.WorkspaceMount, Cmd: argv,
		})
		if err != nil {
			closeEgress()
			release()
			return nil, failed(b.engineErr("docker exec", err))
		}
		att, err = b.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{TTY: tty, ConsoleSize: size})
		if err != nil {
			closeEgress()
			release()
			return nil, failed(b.engineErr("docker exec attach", err))
		}
		execID = ex.ID
	}
	e := &execRun{b: b, box: c, key: bx.Workspace, argv0: spec.Argv[0], execID: execID, notFound: notFound, badCwd: badCwd, cwd: stage.Cwd, att: att, sink: sink,
		start: time.Now(), done: make(chan struct{}), oomBefore: oomBefore, release: release,
		max: spec.Policy.Limits.MaxOutputBytes, grace: spec.Grace.Std(), egress: egress}
	// The exec stage waits for its cgroup (a waiting one for its run
	// first): find its host pid and put it there. Until then nothing of
	// the command runs.
	if waiting != nil {
		stage.Env, stage.NullStdin = env, !withStdin
		err = e.claim(waiting.pid, name, stage)
	} else {
		err = e.adopt(ctx, name)
	}
	if err != nil {
		att.Close()
		closeEgress()
		release()
		if errors.Is(err, errStageGone) {
			return nil, err
		}
		if errors.Is(err, syscall.ESRCH) && !b.dead(c.id) {
			if r, ierr := b.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{}); ierr == nil {
				err = fmt.Errorf("%w (exit status %d): %v", errStageGone, r.ExitCode, err)
			} else {
				err = fmt.Errorf("%w: %v", errStageGone, err)
			}
			return nil, err
		}
		return nil, failed(&runner.Error{Code: runner.ErrCodeSandboxFailed, Message: "setting up the run: " + err.Error()})
	}
	if report != nil {
		// Decisions stream as violation events from now on; any made
		// before (none: the command has not started) are flushed.
		vmu.Lock()
		report = func(v runner.Violation) { e.emit(runner.Event{Type: runner.EventViolation, Violation: &v}) }
		early := violations
		vmu.Unlock()
		defer func() {
			for _, v := range early {
				e.emit(runner.Event{Type: runner.EventViolation, Violation: &v})
			}
		}()
	}
	if e.grace <= 0 {
		e.grace = 2 * time.Second
	}
	if !withStdin {
		_ = att.CloseWrite()
	}
	b.count(waiting != nil)
	e.emit(runner.Event{Type: runner.EventReady})
	if t := spec.Policy.Limits.Timeout.Std(); t > 0 {
		e.timer = time.AfterFunc(t, func() { e.stop(runner.EventTimeout, t) })
	}
	go e.pump(tty)
	return e, nil
}

// checkSpec refuses what a container cannot honour per call.
func checkSpec(spec runner.Spec) error {
	fs := spec.Policy.Filesystem
	if len(fs.AllowRead)+len(fs.AllowWrite) > 0 {
		return &runner.Error{Code: runner.ErrCodeInvalidPolicy, Message: "the Docker backend mounts only the session's /mnt/data; remove filesystem.allow_read/allow_write (or use --backend native)"}
	}
	if len(spec.Argv) == 0 {
		return &runner.Error{Code: runner.ErrCodeInvalidSpec, Message: "no command"}
	}
	if spec.Report {
		// Only a compile step speaks on a report fd, and the image has
		// no compiled language (see Supports).
		return &runner.Error{Code: runner.ErrCodeInvalidSpec, Message: "the Docker backend gives a command no report fd (it runs no compiled language); use --backend native"}
	}
	return nil
}

type execRun struct {
	b         *Backend
	box       *box
	key       string
	execID    string
	pid       int        // host pid of the exec stage (then the command)
	cg        *runCgroup // nil when the server cannot make cgroups
	notFound  string
	badCwd    string // the marker of a working directory the stage could not enter
	cwd       string
	att       client.ExecAttachResult
	sink      func(runner.Event)
	start     time.Time
	timer     *time.Timer
	max       int64
	grace     time.Duration
	oomBefore int64
	argv0     string
	egress    io.Closer
	release   func()

	mu       sync.Mutex
	seq      uint64
	reason   string // timeout or cancelled, once decided
	timeout  time.Duration
	trunc    map[string]bool
	sent     map[string]int64
	end      *runner.Event
	done     chan struct{}
	killOnce sync.Once
}

// adopt finds the exec stage's host pid and, as root, moves it into the
// run's own cgroup (the stage waits for exactly that).
func (e *execRun) adopt(ctx context.Context, name string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := e.b.cli.ExecInspect(ctx, e.execID, client.ExecInspectOptions{})
		if err != nil {
			return err
		}
		if r.PID > 0 {
			e.pid = r.PID
			break
		}
		if !r.Running && r.ExitCode != 0 {
			return fmt.Errorf("the exec stage exited with %d", r.ExitCode)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the exec stage did not start")
		}
		time.Sleep(time.Millisecond)
	}
	if !e.b.cgroups {
		return nil
	}
	cg, err := newRunCgroup(e.pid, name)
	if err != nil {
		_ = syscall.Kill(e.pid, syscall.SIGKILL)
		return err
	}
	e.cg = cg
	return nil
}

// claim gives the stage started ahead of this run (host pid) its cgroup
// (as root), then its run; a stage that went away meanwhile is
// errStageGone (nothing of the run started: it is tried again).
func (e *execRun) claim(pid int, name string, run runner.DockerExec) error {
	e.pid = pid
	if e.b.cgroups {
		cg, err := newRunCgroup(pid, name)
		if err != nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return fmt.Errorf("%w: %v", errStageGone, err)
		}
		e.cg = cg
		run.Cgroup = name
	}
	// Bounded: a stage that does not read (it is gone, or stopped) makes
	// the run try again rather than wait with it.
	_ = e.att.Conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	err := runner.WriteDockerRun(e.att.Conn, run)
	_ = e.att.Conn.SetWriteDeadline(time.Time{})
	if err != nil {
		if e.cg != nil {
			e.cg.kill()
			e.cg.remove()
		}
		return fmt.Errorf("%w: %v", errStageGone, err)
	}
	return nil
}

func (e *execRun) emit(ev runner.Event) {
	e.mu.Lock()
	if e.end != nil {
		e.mu.Unlock()
		return
	}
	e.seq++
	ev.Seq = e.seq
	ev.TS = float64(time.Now().UnixNano()) / 1e9
	if ev.Terminal() {
		end := ev
		e.end = &end
	}
	e.mu.Unlock()
	e.sink(ev)
	if ev.Terminal() {
		close(e.done)
	}
}

// stream is an io.Writer that turns one stream into events, cut at max.
type stream struct {
	e    *execRun
	name string
}

func (s stream) Write(p []byte) (int, error) {
	e := s.e
	n := len(p)
	e.mu.Lock()
	if e.sent == nil {
		e.sent, e.trunc = map[string]int64{}, map[string]bool{}
	}
	if e.max > 0 {
		left := e.max - e.sent[s.name]
		if left <= 0 {
			e.trunc[s.name] = true
			e.mu.Unlock()
			return n, nil
		}
		if int64(len(p)) > left {
			p = p[:left]
			e.trunc[s.name] = true
		}
	}
	e.sent[s.name] += int64(len(p))
	e.mu.Unlock()
	e.emit(runner.Event{Type: s.name, Data: append([]byte(nil), p...)})
	return n, nil
}

func (e *execRun) pump(tty bool) {
	out, errw := stream{e, runner.EventStdout}, stream{e, runner.EventStderr}
	if tty {
		_, _ = io.Copy(out, e.att.Reader)
	} else {
		_, _ = stdcopy.StdCopy(out, errw, e.att.Reader)
	}
	e.att.Close()
	if e.timer != nil {
		e.timer.Stop()
	}
	if e.egress != nil {
		e.egress.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var code = -1
	if r, err := e.b.cli.ExecInspect(ctx, e.execID, client.ExecInspectOptions{}); err == nil {
		code = r.ExitCode
	}
	// Whatever the run left in the background goes with it, before its
	// end is reported, as in a native sandbox.
	e.killAll()
	notFound := code == 127 && e.b.takeMarker(e.box, e.notFound)
	badCwd := code == 126 && e.b.takeMarker(e.box, e.badCwd)
	e.release()
	e.b.emptyTmp(e.box)
	e.mu.Lock()
	reason, timeout := e.reason, e.timeout
	var trunc []string
	for _, s := range []string{runner.EventStdout, runner.EventStderr} {
		if e.trunc[s] {
			trunc = append(trunc, s)
		}
	}
	e.mu.Unlock()
	dur := time.Since(e.start).Milliseconds()
	dead := e.b.dead(e.box.id)
	if !dead {
		// The session's next run: its stage starts now, after this
		// run's end is reported.
		defer func() { go e.b.prestart(e.key, e.box) }()
	}
	// A run killed by SIGKILL that srt-mcp did not send: the container may
	// be on its way out (docker rm -f, docker kill) and still say running
	// for a moment.
	for i := 0; i < 10 && !dead && reason == "" && code == 137; i++ {
		time.Sleep(100 * time.Millisecond)
		dead = e.b.dead(e.box.id)
	}
	switch {
	case reason == runner.EventTimeout:
		e.emit(runner.Event{Type: runner.EventTimeout, TimeoutSeconds: timeout.Seconds(), DurationMS: dur, Truncated: trunc})
	case reason == runner.EventCancelled:
		e.emit(runner.Event{Type: runner.EventCancelled, DurationMS: dur, Truncated: trunc})
	case dead:
		oom := e.b.containerOOM(e.box.id)
		e.b.forget(e.key, e.box)
		msg := "the session's container died during the run; the next call starts a new one (files in /mnt/data are kept)"
		if oom {
			e.emit(runner.Event{Type: runner.EventError, ErrCode: ErrCodeOOM, DurationMS: dur, Truncated: trunc,
				Message: fmt.Sprintf("the run was killed for exceeding the container's memory limit (%s, SANDBOX_MEMORY_LIMIT); %s", human(e.b.cfg.Memory), msg)})
			return
		}
		e.emit(runner.Event{Type: runner.EventError, ErrCode: ErrCodeContainerDied, Message: msg, DurationMS: dur, Truncated: trunc})
	case code == 137 && e.b.oomKills(e.box.id) > e.oomBefore:
		e.emit(runner.Event{Type: runner.EventError, ErrCode: ErrCodeOOM, DurationMS: dur, Truncated: trunc,
			Message: fmt.Sprintf("the run was killed for exceeding the container's memory limit (%s, SANDBOX_MEMORY_LIMIT)", human(e.b.cfg.Memory))})
	case badCwd:
		e.emit(runner.Event{Type: runner.EventError, ErrCode: runner.ErrCodeInvalidCwd, DurationMS: dur,
			Message: fmt.Sprintf("cannot enter working directory %s: it is not a directory the session's user may enter in the container; give one under %s or /tmp", e.cwd, sessions.WorkspaceMount)})
	case notFound:
		e.emit(runner.Event{Type: runner.EventError, ErrCode: runner.ErrCodeNotFound, DurationMS: dur,
			Message: fmt.Sprintf("%s: command not found in the image %s", e.argv0, e.b.cfg.Image)})
	default:
		ev := runner.Event{Type: runner.EventExit, ExitCode: code, DurationMS: dur, Truncated: trunc}
		if code > 128 {
			ev.Signal = strings.TrimPrefix(syscall.Signal(code-128).String(), "signal ")
		}
		e.emit(ev)
	}
}

// signalAll sends sig to every process of the run, from the host.
func (e *execRun) signalAll(sig syscall.Signal) {
	if e.cg != nil {
		e.cg.signal(sig)
		return
	}
	for _, p := range processTree(e.pid) {
		_ = syscall.Kill(p, sig)
	}
}

// killAll ends every process of the run and removes its cgroup.
func (e *execRun) killAll() {
	if e.cg != nil {
		e.cg.kill()
		e.cg.remove()
		return
	}
	for i := 0; i < 10; i++ {
		ps := processTree(e.pid)
		if len(ps) == 0 {
			return
		}
		for _, p := range ps {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stop ends the run for a reason: SIGTERM to all of it, SIGKILL after the
// grace period.
func (e *execRun) stop(reason string, timeout time.Duration) {
	e.mu.Lock()
	if e.reason != "" || e.end != nil {
		e.mu.Unlock()
		return
	}
	e.reason, e.timeout = reason, timeout
	e.mu.Unlock()
	e.signalAll(syscall.SIGTERM)
	go func() {
		select {
		case <-e.done:
		case <-time.After(e.grace):
			e.kill()
		}
	}()
}

func (e *execRun) kill() {
	e.killOnce.Do(func() {
		e.killAll()
		// The attach ends with the run's last process; should anything
		// hold it open, it is closed so the run still ends.
		go func() {
			select {
			case <-e.done:
			case <-time.After(3 * time.Second):
				e.att.Close()
			}
		}()
	})
}

// Write implements runner.Handle (stdin).
func (e *execRun) Write(p []byte) (int, error) { return e.att.Conn.Write(p) }

// CloseStdin implements runner.Handle. A command that ended without
// waiting for the end of its input (it read what it needed) took its
// attachment with it: its stdin is closed already.
func (e *execRun) CloseStdin() error {
	if err := e.att.CloseWrite(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// Resize implements runner.Handle.
func (e *execRun) Resize(rows, cols uint16) error {
	_, err := e.b.cli.ExecResize(context.Background(), e.execID, client.ExecResizeOptions{Height: uint(rows), Width: uint(cols)})
	return err
}

// Signal implements runner.Handle.
func (e *execRun) Signal(sig syscall.Signal) error {
	e.signalAll(sig)
	return nil
}

// Cancel implements runner.Handle: graceful (SIGTERM, then SIGKILL after
// the grace period) or forced (SIGKILL now).
func (e *execRun) Cancel(force bool) {
	e.stop(runner.EventCancelled, 0)
	if force {
		e.kill()
	}
}

// Wait implements runner.Handle.
func (e *execRun) Wait() runner.Event {
	<-e.done
	e.mu.Lock()
	defer e.mu.Unlock()
	return *e.end
}

// Done implements runner.Handle.
func (e *execRun) Done() <-chan struct{} { return e.done }

// containerTmp opens the container's /tmp from the host, through its PID 1's
// root, without following any link the container made.
func (b *Backend) containerTmp(c *box) (*nofollow.Dir, error) {
	root, err := nofollow.OpenTrusted("/proc/" + strconv.Itoa(c.pid1) + "/root")
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.Sub("tmp")
}

// takeMarker reports whether the exec stage left the marker of a missing
// command, and removes it.
func (b *Backend) takeMarker(c *box, marker string) bool {
	tmp, err := b.containerTmp(c)
	if err != nil {
		return false
	}
	defer tmp.Close()
	name := filepath.Base(marker)
	if st, err := tmp.Lstat(name); err != nil || !st.Mode.IsRegular() {
		return false
	}
	_ = tmp.Remove(name)
	return true
}

// emptyTmp empties the container's /tmp after a run when no other run (a
// workspace's interpreter, say) is in the container: each run starts with
// an empty /tmp, and nothing a run left there holds memory afterwards. The
// session's cache, mounted at ~/.cache (/tmp/home/.cache), is the
// session's and stays: emptying it lost the session's installed packages,
// and removing its mount point from the server's mount namespace detached
// the mount, so later runs wrote ~/.cache to the container's /tmp.
func (b *Backend) emptyTmp(c *box) {
	b.mu.Lock()
	busy := c.running > 0
	b.mu.Unlock()
	if busy {
		return
	}
	tmp, err := b.containerTmp(c)
	if err != nil {
		return
	}
	defer tmp.Close()
	home := strings.TrimPrefix(runner.SandboxHome, "/tmp/")
	cache := strings.TrimPrefix(CacheMount, runner.SandboxHome+"/")
	emptyBut(tmp, home, func(h *nofollow.Dir) { emptyBut(h, cache, nil) })
}

// emptyBut removes everything in d but the directory keep, which it
// passes to inside (when it is a directory, never a link).
func emptyBut(d *nofollow.Dir, keep string, inside func(*nofollow.Dir)) {
	var names []string
	_ = d.ReadDir(func(en nofollow.Entry) error {
		names = append(names, en.Name)
		return nil
	})
	for _, n := range names {
		if n == keep {
			if sub, err := d.Sub(n); err == nil {
				if inside != nil {
					inside(sub)
				}
				sub.Close()
				continue
			}
		}
		_ = d.RemoveAll(n)
	}
}

// processTree lists pid and its descendants (host pids), for a server that
// cannot make cgroups.
func processTree(pid int) []int {
	if pid <= 0 {
		return nil
	}
	out := []int{}
	queue := []int{pid}
	seen := map[int]bool{}
	for len(queue) > 0 && len(out) < 100000 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", p)); err != nil {
			continue
		}
		out = append(out, p)
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, t := range tasks {
			b, _ := os.ReadFile(t)
			for _, f := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(f); err == nil {
					queue = append(queue, n)
				}
			}
		}
	}
	return out
}

// dead reports whether the container is no longer running.
func (b *Backend) dead(cid string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := b.cli.ContainerInspect(ctx, cid, client.ContainerInspectOptions{})
	return err != nil || r.Container.State == nil || !r.Container.State.Running
}

func (b *Backend) containerOOM(cid string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := b.cli.ContainerInspect(ctx, cid, client.ContainerInspectOptions{})
	return err == nil && r.Container.State != nil && r.Container.State.OOMKilled
}

// oomKills reads the container's cgroup OOM-kill counter (cgroup v2
// memory.events or v1 memory.oom_control), or -1 when it cannot: a run
// killed by the kernel's OOM killer inside a live container shows up only
// there.
func (b *Backend) oomKills(cid string) int64 {
	for _, p := range []string{
		filepath.Join("/sys/fs/cgroup/system.slice", "docker-"+cid+".scope", "memory.events"),
		filepath.Join("/sys/fs/cgroup/docker", cid, "memory.events"),
		filepath.Join("/sys/fs/cgroup/memory/docker", cid, "memory.oom_control"),
		filepath.Join("/sys/fs/cgroup/memory/system.slice", "docker-"+cid+".scope", "memory.oom_control"),
	} {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == "oom_kill" {
				n, _ := strconv.ParseInt(v, 10, 64)
				f.Close()
				return n
			}
		}
		f.Close()
	}
	return -1
}

func human(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%dG", n>>30)
	}
	return fmt.Sprintf("%dM", n>>20)
}

// egressFor is a run's TLS termination and credentials on Docker: the
// proxy's configuration, and the variables the container's command gets
// (the trust bundle's path, masked credentials' stand-ins) and loses
// (denied credentials). Credential files are not in a container's view.
func (b *Backend) egressFor(spec runner.Spec) (runner.EgressConfig, map[string]string, []string, error) {
	n := spec.Policy.Network
	cfg := runner.EgressConfig{Network: n}
	env := map[string]string{}
	var m runner.EgressMaterial
	if spec.Egress != nil {
		m = *spec.Egress
	}
	if n.TLSTerminate != nil && len(n.AllowedDomains) > 0 && len(m.CACert) > 0 {
		cfg.CACert, cfg.CAKey = m.CACert, m.CAKey
		bundle := tlsca.TrustBundle(tlsca.CertificatesOnly(m.CACert), n.TLSTerminate.ExtraCACertPaths)
		path, err := tlsca.WriteBundle(b.trustDir, bundle)
		if err != nil {
			return cfg, nil, nil, &runner.Error{Code: runner.ErrCodeSandboxFailed, Message: "trust bundle: " + err.Error()}
		}
		for _, k := range runner.TrustEnv {
			env[k] = TrustMount + "/" + filepath.Base(path)
		}
	}
	var drop []string
	if c := spec.Policy.Credentials; c != nil {
		cfg.AllowPlaintextInject = c.AllowPlaintextInject
		cfg.Secrets = append([]credentials.Secret(nil), m.Secrets...)
		credentials.MintAll(cfg.Secrets)
		var set map[string]string
		set, drop = credentials.Env(c, cfg.Secrets)
		for k, v := range set {
			env[k] = v
		}
	}
	return cfg, env, drop, nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
