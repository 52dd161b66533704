package dockerbox

import (
	"context"
	"fmt"
	"time"

	"github.com/moby/moby/client"

	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// A session's run is a docker exec in its container, and the engine's
// start of that process (runc joining the container's namespaces) is most
// of a short run's time: ~40 ms of `true`'s ~45. So after each run the
// backend starts the stage of the session's next run ahead (Config.Prestart
// says when): a docker exec of the exec stage in its waiting mode
// (runner.DockerExec.Wait), attached, blocked on its stdin. The next run
// that is not interactive (a terminal is the exec's own option) claims it
// and sends its configuration (runner.WriteDockerRun): command,
// environment, working directory, stdin, limits, cgroup; the stage then
// does what a stage started for that run does. A waiting stage belongs to
// one session's container and runs as its user, holds nothing of any run,
// and is never reused: a session has at most one, and it goes with the
// container.
//
// No code of the session runs beside a waiting stage: one is started only
// when nothing runs in the container, and a run that does not claim it (an
// interactive one, beside which a later run could start) ends it first.
// Non-dumpable keeps other processes of its user out of its stdin, memory
// and environment, but not out of what needs only the same user: they
// could stop it (the next run hung until its timeout) or lower its limits,
// nice, scheduling policy or CPUs (prlimit, setpriority,
// sched_setaffinity), and the next run would inherit that from a run that
// had ended. Code running beside a run can do as much to that run, cold
// or claimed; what a run did must not outlive it.

// waitingExec is an exec stage started ahead of its session's next run.
type waitingExec struct {
	execID string
	att    client.ExecAttachResult
	pid    int // its host pid
}

// stagePATH is the PATH the exec stage looks the command up in, unless
// the run sets its own.
const stagePATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// prestartDelay is how long after a run its session's next stage starts:
// a container that serves one call (the LibreChat API's) is released
// right after its run, and a stage started in it would be wasted work of
// the engine's. An agent's next call comes seconds later.
const prestartDelay = 30 * time.Millisecond

// prestart starts the stage of the next run of c (the container of the
// session whose workspace is key), unless one waits or is starting, the
// container is no longer the session's, something runs in it (an
// interpreter, an interactive run: see above), or Config.Prestart says no.
func (b *Backend) prestart(key string, c *box) {
	if b.cfg.Prestart == nil || !b.cfg.Prestart() {
		return
	}
	time.Sleep(prestartDelay)
	b.mu.Lock()
	if c.next != nil || c.starting || c.running > 0 || b.containers[key] != c {
		b.mu.Unlock()
		return
	}
	c.starting = true
	b.mu.Unlock()
	began := time.Now()
	w, err := b.startWaiting(c)
	b.mu.Lock()
	c.starting = false
	// A run that started meanwhile did not claim it, and runs beside it.
	keep := err == nil && c.next == nil && c.running == 0 && b.containers[key] == c
	if keep {
		c.next = w
		b.stats.Builds++
		b.stats.BuildSeconds += time.Since(began).Seconds()
	}
	b.mu.Unlock()
	if err == nil && !keep {
		w.att.Close() // the container went meanwhile: its stage with it
	}
}

// startWaiting starts a waiting exec stage in c and finds its host pid.
func (b *Backend) startWaiting(c *box) (*waitingExec, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ex, err := b.cli.ExecCreate(ctx, c.id, client.ExecCreateOptions{
		User: c.user, AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Env: []string{stagePATH}, WorkingDir: sessions.WorkspaceMount,
		Cmd: []string{ExecStageMount, runner.ModeDockerExec, runner.DockerExec{Wait: true}.Arg()},
	})
	if err != nil {
		return nil, err
	}
	// The attachment outlives this call: not under ctx.
	att, err := b.cli.ExecAttach(context.Background(), ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		r, err := b.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		switch {
		case err != nil:
			att.Close()
			return nil, err
		case r.PID > 0 && r.Running:
			return &waitingExec{execID: ex.ID, att: att, pid: r.PID}, nil
		case !r.Running && r.ExitCode != 0, time.Now().After(deadline):
			att.Close()
			return nil, fmt.Errorf("the waiting exec stage did not start (exit status %d)", r.ExitCode)
		}
	}
}

// takeWaiting hands the stage waiting in c to a run as user, if one is
// there (it runs as the container's user), and still waiting (the
// session's own code may have ended it).
func (b *Backend) takeWaiting(c *box, user string) *waitingExec {
	b.mu.Lock()
	w := c.next
	c.next = nil
	b.mu.Unlock()
	if w == nil {
		return nil
	}
	if c.user != user {
		w.att.Close()
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r, err := b.cli.ExecInspect(ctx, w.execID, client.ExecInspectOptions{}); err != nil || !r.Running || r.PID != w.pid {
		w.att.Close()
		return nil
	}
	return w
}

// PrestartStats counts the session runs that claimed a stage started
// ahead of them and those that started their own, and what starting them
// ahead took; Ready is the stages waiting now.
type PrestartStats struct {
	Claimed, Cold, Builds uint64
	BuildSeconds          float64
	Ready                 int
}

// Stats is the backend's PrestartStats.
func (b *Backend) Stats() PrestartStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.stats
	for _, c := range b.containers {
		if c.next != nil {
			st.Ready++
		}
	}
	return st
}

// count records how a session run got its stage.
func (b *Backend) count(claimed bool) {
	b.mu.Lock()
	if claimed {
		b.stats.Claimed++
	} else {
		b.stats.Cold++
	}
	b.mu.Unlock()
}

// dropNext lets go of the stage waiting in c (its container goes, or a run
// that does not claim it starts): its stdin ends, and so does it.
func (b *Backend) dropNext(c *box) {
	b.mu.Lock()
	w := c.next
	c.next = nil
	b.mu.Unlock()
	if w != nil {
		w.att.Close()
	}
}
