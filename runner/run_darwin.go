package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// sandboxExec is macOS's seatbelt front end.
const sandboxExec = "/usr/bin/sandbox-exec"

type seatbeltProc struct {
	cmd       *exec.Cmd
	tmp       string
	listeners []*os.File // [HTTP, SOCKS5] proxy listeners; nil: no network
	mu        sync.Mutex
	killed    bool
	waitDone  chan struct{}
	res       procResult
}

// launch runs the command under sandbox-exec with a profile built from the
// plan. macOS has no mount or pid namespaces: the profile decides every
// file and network access, the private /tmp is a fresh host directory, and
// the process group carries signals. Limits are set by ulimit in a /bin/sh
// wrapper inside the sandbox, so they bind the command, not the runner.
// With a network allow-list the runner opens the proxy's listeners on the
// host's loopback and the profile lets the command connect to those two
// ports and nothing else, as srt does.
func launch(ctx context.Context, r *Run, plan *Plan, cfg *initConfig, child [3]*os.File, opts Options) (sandboxProc, error) {
	if _, err := os.Stat(sandboxExec); err != nil {
		return nil, errorf(ErrCodeUnavailable, "%s is missing; srt-mcp needs macOS's built-in sandbox", sandboxExec)
	}
	if e := seatbeltRefusal(cfg); e != nil {
		return nil, e
	}
	var listeners []*os.File
	var ports []int
	if opts.Egress != nil && len(r.spec.Policy.Network.AllowedDomains) > 0 {
		var err error
		if listeners, ports, err = loopbackListeners(); err != nil {
			return nil, errorf(ErrCodeSandboxFailed, "network proxy listeners: %v", err)
		}
		cfg.Env = seatbeltProxyEnv(cfg.Env, ports[0], ports[1])
	}
	made, err := os.MkdirTemp("", "srt-mcp-")
	if err != nil {
		closeFiles(listeners)
		return nil, errorf(ErrCodeInternal, "private tmp: %v", err)
	}
	// What the run made goes when it does not start.
	cleanup := func() {
		closeFiles(listeners)
		os.RemoveAll(made)
	}
	tmp, err := filepath.EvalSymlinks(made) // /tmp is /private/tmp
	if err != nil {
		cleanup()
		return nil, errorf(ErrCodeInternal, "private tmp: %v", err)
	}
	_ = os.MkdirAll(tmp+"/home", 0o700)
	profile := SeatbeltProfile(plan, SeatbeltOptions{TmpDir: tmp, ProxyPorts: ports})
	script := "ulimit -c 0"
	if cfg.Limits.NProc > 0 {
		script += "; ulimit -u " + strconv.FormatUint(cfg.Limits.NProc, 10)
	}
	if cfg.Limits.FSize > 0 {
		script += "; ulimit -f " + strconv.FormatUint(cfg.Limits.FSize/512, 10)
	}
	if cfg.Limits.NoFile > 0 {
		script += "; ulimit -n " + strconv.FormatUint(cfg.Limits.NoFile, 10)
	}
	script += `; exec "$0" "$@"`
	args := append([]string{"-p", profile, "/bin/sh", "-c", script}, cfg.Argv...)
	cmd := exec.Command(sandboxExec, args...)
	env := make([]string, 0, len(cfg.Env))
	for _, kv := range cfg.Env {
		switch {
		case len(kv) > 5 && kv[:5] == "HOME=":
			kv = "HOME=" + tmp + "/home"
		case len(kv) > 7 && kv[:7] == "TMPDIR=":
			kv = "TMPDIR=" + tmp
		}
		env = append(env, kv)
	}
	cmd.Env = env
	cmd.Dir = plan.Cwd
	cmd.Stdin, cmd.Stdout, cmd.Stderr = child[0], child[1], child[2]
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: cfg.PTY, Ctty: 0}
	if u, ok := r.sandboxIdentity(); ok {
		// As root, the command runs as the unprivileged sandbox user.
		if err := u.Check(); err != nil {
			cleanup()
			return nil, errorf(ErrCodeInvalidSpec, "%v", err)
		}
		_ = os.Chown(tmp, u.UID, u.GID)
		_ = os.Chown(tmp+"/home", u.UID, u.GID)
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: []uint32{}}
	}
	var reportCh <-chan string
	var reportW *os.File
	if r.spec.Report { // fd 3 of the command (sandbox-exec and sh pass it on)
		rr, rw, err := os.Pipe()
		if err != nil {
			cleanup()
			return nil, errorf(ErrCodeInternal, "pipe: %v", err)
		}
		reportW, reportCh = rw, readReport(rr)
		cmd.ExtraFiles = []*os.File{rw}
	}
	err = cmd.Start()
	if reportW != nil {
		reportW.Close()
	}
	if err != nil {
		cleanup()
		return nil, errorf(ErrCodeSandboxFailed, "sandbox-exec: %v", err)
	}
	p := &seatbeltProc{cmd: cmd, tmp: tmp, listeners: listeners, waitDone: make(chan struct{})}
	go func() {
		<-ctx.Done()
		p.kill()
	}()
	go func() {
		err := cmd.Wait()
		// The whole process group goes with the command, as on Linux.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		os.RemoveAll(tmp)
		if ee, ok := err.(*exec.ExitError); ok {
			ws := ee.Sys().(syscall.WaitStatus)
			if ws.Signaled() {
				p.res = procResult{code: 128 + int(ws.Signal()), sig: int(ws.Signal())}
			} else {
				p.res = procResult{code: ws.ExitStatus()}
			}
		} else if err != nil {
			p.res = procResult{err: errorf(ErrCodeSandboxFailed, "%v", err)}
		}
		if reportCh != nil && p.res.err == nil {
			// A process that left the group could hold fd 3 open: the
			// line is there already or not at all.
			select {
			case p.res.report = <-reportCh:
			case <-time.After(time.Second):
			}
		}
		close(p.waitDone)
	}()
	return p, nil
}

func (p *seatbeltProc) terminal() *os.File { return nil }

// proxyListeners are the runner's own loopback listeners (loopbackListeners),
// nil without an allow-list; the caller owns them.
func (p *seatbeltProc) proxyListeners() []*os.File { return p.listeners }

// ptyInsideSandbox: macOS has no devpts of its own per sandbox; the runner
// opens the terminal.
// fileOverlays: the sandbox's view can put a file of the runner's at any
// path (the trust bundle over the system bundle, a stand-in over a masked
// credential file); seatbelt has no mounts: a path shows the host file.
const fileOverlays = false

const ptyInsideSandbox = false

func (p *seatbeltProc) wait() procResult { <-p.waitDone; return p.res }

func (p *seatbeltProc) signal(sig syscall.Signal) error {
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

func (p *seatbeltProc) kill() {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// FindBwrap exists on every platform for srt-mcp doctor.
func FindBwrap() (string, error) { return "", fmt.Errorf("bubblewrap is Linux-only") }

// etcDir: macOS reads /private/etc through the seatbelt profile.
func etcDir(string) string { return "" }

// sandboxUserSwitch: a root runner runs sandbox-exec as the sandbox user.
const sandboxUserSwitch = true
