package dockerbox

import (
	"bufio"
	"context"
	"fmt"
	"io"
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

	"github.com/srt-mcp/srt-mcp/executions"
	"github.com/srt-mcp/srt-mcp/runner"
)

// pidDir holds, inside the container, one file per run with the pid of the
// run's session leader: every process the run starts is in that session's
// process group, so timeout and cancel signal the whole tree (Docker has
// no call to kill an exec).
const pidDir = "/tmp/.srt-mcp-exec"

// Start implements executions.Backend: a docker exec in the session's
// container, streamed as runner events.
func (b *Backend) Start(box executions.Box, spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	ctx := context.Background()
	cid, err := b.Container(ctx, box)
	if err != nil {
		return nil, err
	}
	runID := spec.ID
	if runID == "" {
		runID = uuid.NewString()
	}
	pidFile := pidDir + "/" + runID
	// The command runs as the leader of its own session, whose pid it
	// writes first: its process group is the whole run. With a TTY, docker
	// exec already makes it a session leader owning the terminal; without
	// one, setsid does, forked by a shell so that it need not fork itself.
	// (That shell's own stderr is /dev/null and the run's is handed over on
	// fd 3: the shell would report a killed command as "Terminated".)
	start := `mkdir -p ` + pidDir + ` && echo $$ > ` + pidFile + ` && { command -v "$1" >/dev/null || { : > ` + pidFile + `.notfound; exit 127; }; } && exec "$@"`
	argv := append([]string{"/bin/sh", "-c", start, "sh"}, spec.Argv...)
	if spec.Stdin != runner.StdinPTY {
		argv = append([]string{"/bin/sh", "-c", `exec 3>&2 2>/dev/null; /usr/bin/setsid /bin/sh -c 'exec 2>&3 3>&-; ` + start + `' sh "$@"; exit $?`, "sh"}, spec.Argv...)
	}
	env := []string{}
	for k, v := range executions.SessionEnv() {
		if _, set := spec.Env[k]; !set {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range spec.Env {
		env = append(env, k+"="+v)
	}
	tty := spec.Stdin == runner.StdinPTY
	withStdin := spec.Stdin != runner.StdinNull
	cwd := spec.Cwd
	if cwd == "" {
		cwd = executions.WorkspaceMount
	}
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
		httpL, socksL, err := b.proxyListeners(cid)
		if err != nil {
			return nil, &runner.Error{Code: runner.ErrCodeSandboxFailed, Message: "network proxy: " + err.Error()}
		}
		token := uuid.NewString()
		report = func(v runner.Violation) {
			vmu.Lock()
			violations = append(violations, v)
			vmu.Unlock()
		}
		egress, err = b.cfg.Egress(n, token, httpL, socksL, func(v runner.Violation) {
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
	oomBefore := b.oomKills(cid)
	ex, err := b.cli.ExecCreate(ctx, cid, client.ExecCreateOptions{
		User: b.uid, TTY: tty, ConsoleSize: size, AttachStdin: withStdin, AttachStdout: true, AttachStderr: true,
		Env: env, WorkingDir: cwd, Cmd: argv,
	})
	if err != nil {
		if egress != nil {
			egress.Close()
		}
		if b.dead(cid) {
			b.forget(box.SessionID, cid)
			return nil, &runner.Error{Code: ErrCodeContainerDied, Message: "the session's container is gone (killed or removed); the next call starts a new one"}
		}
		return nil, b.engineErr("docker exec", err)
	}
	att, err := b.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{TTY: tty, ConsoleSize: size})
	if err != nil {
		if egress != nil {
			egress.Close()
		}
		return nil, b.engineErr("docker exec attach", err)
	}
	e := &execRun{b: b, cid: cid, argv0: spec.Argv[0], session: box.SessionID, execID: ex.ID, pidFile: pidFile, att: att, sink: sink,
		start: time.Now(), done: make(chan struct{}), oomBefore: oomBefore,
		max: spec.Policy.Limits.MaxOutputBytes, grace: spec.Grace.Std(), egress: egress}
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
	return nil
}

type execRun struct {
	b         *Backend
	cid       string
	session   string
	execID    string
	pidFile   string
	att       client.ExecAttachResult
	sink      func(runner.Event)
	start     time.Time
	timer     *time.Timer
	max       int64
	grace     time.Duration
	oomBefore int64
	argv0     string
	egress    io.Closer

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
	// Whatever the run left in the background goes with it, as in a
	// native sandbox (after the reply: it costs a second exec).
	defer func() { go e.signalGroup(syscall.SIGKILL) }()
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
	dead := e.b.dead(e.cid)
	// A run killed by SIGKILL that srt-mcp did not send: the container may
	// be on its way out (docker rm -f, docker kill) and still say running
	// for a moment.
	for i := 0; i < 10 && !dead && reason == "" && code == 137; i++ {
		time.Sleep(100 * time.Millisecond)
		dead = e.b.dead(e.cid)
	}
	switch {
	case reason == runner.EventTimeout:
		e.emit(runner.Event{Type: runner.EventTimeout, TimeoutSeconds: timeout.Seconds(), DurationMS: dur, Truncated: trunc})
	case reason == runner.EventCancelled:
		e.emit(runner.Event{Type: runner.EventCancelled, DurationMS: dur, Truncated: trunc})
	case dead:
		e.b.forget(e.session, e.cid)
		msg := "the session's container died during the run; the next call starts a new one (files in /mnt/data are kept)"
		if e.b.containerOOM(e.cid) {
			e.emit(runner.Event{Type: runner.EventError, ErrCode: ErrCodeOOM, DurationMS: dur, Truncated: trunc,
				Message: fmt.Sprintf("the run was killed for exceeding the container's memory limit (%s, SANDBOX_MEMORY_LIMIT); %s", human(e.b.cfg.Memory), msg)})
			return
		}
		e.emit(runner.Event{Type: runner.EventError, ErrCode: ErrCodeContainerDied, Message: msg, DurationMS: dur, Truncated: trunc})
	case code == 137 && e.b.oomKills(e.cid) > e.oomBefore:
		e.emit(runner.Event{Type: runner.EventError, ErrCode: ErrCodeOOM, DurationMS: dur, Truncated: trunc,
			Message: fmt.Sprintf("the run was killed for exceeding the container's memory limit (%s, SANDBOX_MEMORY_LIMIT)", human(e.b.cfg.Memory))})
	case code == 127 && e.b.execOK(e.cid, "test -e "+e.pidFile+".notfound && rm -f "+e.pidFile+".notfound"):
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

// stop ends the run for a reason: SIGTERM to its process group, SIGKILL
// after the grace period.
func (e *execRun) stop(reason string, timeout time.Duration) {
	e.mu.Lock()
	if e.reason != "" || e.end != nil {
		e.mu.Unlock()
		return
	}
	e.reason, e.timeout = reason, timeout
	e.mu.Unlock()
	e.signalGroup(syscall.SIGTERM)
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
		e.signalGroup(syscall.SIGKILL)
		// If the run's own process is out of reach (it never wrote its pid),
		// the attach is closed so the run still ends.
		go func() {
			select {
			case <-e.done:
			case <-time.After(3 * time.Second):
				e.att.Close()
			}
		}()
	})
}

// signalGroup sends sig to the run's process group from a second exec.
func (e *execRun) signalGroup(sig syscall.Signal) {
	script := fmt.Sprintf(`for i in 1 2 3 4 5 6 7 8 9 10; do [ -s %[1]s ] && break; sleep 0.05; done; p=$(cat %[1]s 2>/dev/null) && kill -%[2]d -$p 2>/dev/null; [ %[2]d = 9 ] && rm -f %[1]s; true`, e.pidFile, int(sig))
	e.b.execOK(e.cid, script)
}

// execOK runs a shell script in the container as the sandbox user and
// reports whether it exited 0.
func (b *Backend) execOK(cid, script string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ex, err := b.cli.ExecCreate(ctx, cid, client.ExecCreateOptions{User: b.uid, Cmd: []string{"/bin/sh", "-c", script}, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return false
	}
	att, err := b.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, att.Reader)
	att.Close()
	r, err := b.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	return err == nil && !r.Running && r.ExitCode == 0
}

// Write implements runner.Handle (stdin).
func (e *execRun) Write(p []byte) (int, error) { return e.att.Conn.Write(p) }

// CloseStdin implements runner.Handle.
func (e *execRun) CloseStdin() error { return e.att.CloseWrite() }

// Resize implements runner.Handle.
func (e *execRun) Resize(rows, cols uint16) error {
	_, err := e.b.cli.ExecResize(context.Background(), e.execID, client.ExecResizeOptions{Height: uint(rows), Width: uint(cols)})
	return err
}

// Signal implements runner.Handle.
func (e *execRun) Signal(sig syscall.Signal) error {
	e.signalGroup(sig)
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
