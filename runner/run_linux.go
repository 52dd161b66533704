package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// startupTimeout bounds how long bwrap and PID 1 may take to come up.
const startupTimeout = 30 * time.Second

// Fds as bwrap and PID 1 see them (bwrap passes inherited fds through).
const (
	fdInit       = 3 // socketpair to PID 1
	fdJSONStatus = 4 // bwrap's --json-status-fd
	fdStdin      = 5 // the command's stdio; bwrap's own stdio is diagnostics
	fdStdout     = 6
	fdStderr     = 7
)

// FindBwrap locates bubblewrap. It does not use the caller's PATH first, so
// a writable directory early in PATH cannot substitute it.
func FindBwrap() (string, error) {
	for _, p := range []string{"/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return exec.LookPath("bwrap")
}

type bwrapProc struct {
	cmd      *exec.Cmd
	conn     *os.File
	childPid int
	diag     *limitedBuffer

	connMu   sync.Mutex
	exitMsg  *initMsg
	waitDone chan struct{}
	res      procResult
	killed   bool
}

func launch(ctx context.Context, r *Run, plan *Plan, cfg *initConfig, child [3]*os.File, opts Options) (sandboxProc, error) {
	bwrap, err := FindBwrap()
	if err != nil {
		return nil, errorf(ErrCodeUnavailable, "bubblewrap (bwrap) is not installed; install it with: apt-get install -y bubblewrap")
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, errorf(ErrCodeInternal, "socketpair: %v", err)
	}
	_ = unix.SetNonblock(fds[0], true)
	conn := os.NewFile(uintptr(fds[0]), "srt-init")
	theirs := os.NewFile(uintptr(fds[1]), "srt-init-child")
	statusR, statusW, err := os.Pipe()
	if err != nil {
		conn.Close()
		theirs.Close()
		return nil, errorf(ErrCodeInternal, "pipe: %v", err)
	}
	diagR, diagW, err := os.Pipe()
	if err != nil {
		return nil, errorf(ErrCodeInternal, "pipe: %v", err)
	}
	args := BwrapArgs(plan, BwrapOptions{JSONStatusFD: fdJSONStatus, Command: []string{SandboxSelf, ModeInit}})
	cmd := exec.Command(bwrap, args...)
	cmd.Env = []string{} // bwrap, and so PID 1's /proc/1/environ, get nothing of ours
	cmd.Stdout, cmd.Stderr = diagW, diagW
	cmd.ExtraFiles = []*os.File{theirs, statusW, child[0], child[1], child[2]}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if child[0] == nil {
		null, _ := os.Open(os.DevNull)
		defer null.Close()
		cmd.ExtraFiles[2] = null
	}
	startErr := cmd.Start()
	theirs.Close()
	statusW.Close()
	diagW.Close()
	if startErr != nil {
		conn.Close()
		statusR.Close()
		diagR.Close()
		return nil, errorf(ErrCodeUnavailable, "cannot start bwrap: %v", startErr)
	}
	p := &bwrapProc{cmd: cmd, conn: conn, diag: &limitedBuffer{max: 16 << 10}, waitDone: make(chan struct{})}
	diagDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(p.diag, diagR)
		diagR.Close()
		close(diagDone)
	}()
	pidCh := make(chan int, 1)
	go func() {
		defer statusR.Close()
		dec := json.NewDecoder(statusR)
		sent := false
		for {
			var st struct {
				ChildPid int `json:"child-pid"`
			}
			if err := dec.Decode(&st); err != nil {
				if !sent {
					pidCh <- 0
				}
				return
			}
			if st.ChildPid > 0 && !sent {
				pidCh <- st.ChildPid
				sent = true
			}
		}
	}()

	abort := func(e *Error) (sandboxProc, error) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		conn.Close()
		<-diagDone
		if d := strings.TrimSpace(p.diag.String()); d != "" && e.Code != ErrCodeVerification {
			e.Message += ": " + explainBwrap(d)
		}
		return nil, e
	}
	deadline := time.Now().Add(startupTimeout)
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()

	in := bufio.NewReader(conn)
	if err := p.send(initMsg{T: initMsgConfig, Config: cfg}); err != nil {
		return abort(errorf(ErrCodeSandboxFailed, "bubblewrap could not start the sandbox"))
	}
	var m initMsg
	if err := readInitMsg(in, &m); err != nil {
		return abort(errorf(ErrCodeSandboxFailed, "bubblewrap could not start the sandbox"))
	}
	if m.T == initMsgError {
		return abort(&Error{Code: m.Code, Message: m.Message})
	}
	if m.T != initMsgVerified {
		return abort(errorf(ErrCodeSandboxFailed, "unexpected message %q from the sandbox", m.T))
	}
	select {
	case p.childPid = <-pidCh:
	case <-time.After(time.Until(deadline)):
	}
	if p.childPid <= 0 {
		return abort(errorf(ErrCodeVerification, "bwrap did not report the sandbox's pid"))
	}
	if err := checkNamespaces(p.childPid); err != nil {
		return abort(errorf(ErrCodeVerification, "%v; refusing to run unsandboxed", err))
	}
	if err := p.send(initMsg{T: initMsgGo}); err != nil {
		return abort(errorf(ErrCodeSandboxFailed, "the sandbox went away during start-up"))
	}
	if err := readInitMsg(in, &m); err != nil {
		return abort(errorf(ErrCodeSandboxFailed, "the sandbox went away during start-up"))
	}
	if m.T == initMsgError {
		return abort(&Error{Code: m.Code, Message: m.Message})
	}
	if m.T != initMsgStarted {
		return abort(errorf(ErrCodeSandboxFailed, "unexpected message %q from the sandbox", m.T))
	}
	_ = conn.SetDeadline(time.Time{})

	go func() {
		for {
			var m initMsg
			if err := readInitMsg(in, &m); err != nil {
				break
			}
			if m.T == initMsgExit {
				p.connMu.Lock()
				p.exitMsg = &m
				p.connMu.Unlock()
			}
		}
		werr := cmd.Wait()
		<-diagDone
		conn.Close()
		p.connMu.Lock()
		defer p.connMu.Unlock()
		switch {
		case p.exitMsg != nil:
			p.res = procResult{code: p.exitMsg.Exit, sig: p.exitMsg.Sig}
		case p.killed:
			p.res = procResult{code: 128 + int(syscall.SIGKILL), sig: int(syscall.SIGKILL)}
		default:
			msg := "the sandbox's init process died"
			if werr != nil {
				msg += " (" + werr.Error() + ")"
			}
			if d := strings.TrimSpace(p.diag.String()); d != "" {
				msg += ": " + d
			}
			p.res = procResult{err: errorf(ErrCodeSandboxFailed, "%s", msg)}
		}
		close(p.waitDone)
	}()
	return p, nil
}

func (p *bwrapProc) send(m initMsg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	p.connMu.Lock()
	defer p.connMu.Unlock()
	_, err = p.conn.Write(append(b, '\n'))
	return err
}

func (p *bwrapProc) wait() procResult {
	<-p.waitDone
	return p.res
}

func (p *bwrapProc) signal(sig syscall.Signal) error {
	select {
	case <-p.waitDone:
		return ErrExited
	default:
	}
	return p.send(initMsg{T: initMsgSignal, Sig: int(sig)})
}

func (p *bwrapProc) kill() {
	p.connMu.Lock()
	p.killed = true
	p.connMu.Unlock()
	select {
	case <-p.waitDone:
		return
	default:
	}
	// PID 1 dying takes the whole pid namespace with it; bwrap's own
	// monitor dying does too (--die-with-parent).
	if p.childPid > 0 {
		_ = unix.Kill(p.childPid, unix.SIGKILL)
	}
	_ = p.cmd.Process.Kill()
}

// checkNamespaces compares every namespace of the sandbox's PID 1 with the
// runner's own: each must be different.
func checkNamespaces(pid int) error {
	for _, ns := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		mine, err := os.Readlink("/proc/self/ns/" + ns)
		if err != nil {
			return fmt.Errorf("cannot read own %s namespace: %v", ns, err)
		}
		theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
		if err != nil {
			return fmt.Errorf("cannot read the sandbox's %s namespace: %v", ns, err)
		}
		if mine == theirs {
			return fmt.Errorf("the sandbox shares the host's %s namespace (%s)", ns, mine)
		}
	}
	return nil
}

// explainBwrap adds the fix to bwrap's best-known failures.
func explainBwrap(msg string) string {
	switch {
	case strings.Contains(msg, "setting up uid map") || strings.Contains(msg, "No permissions to create new namespace") || strings.Contains(msg, "Creating new namespace failed"):
		return msg + " (unprivileged user namespaces are disabled on this host: enable them with sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu 24.04+ allow bwrap in AppArmor; run srt-mcp doctor)"
	case strings.Contains(msg, "RTM_NEWADDR") || strings.Contains(msg, "loopback"):
		return msg + " (the host refuses a private network namespace; run srt-mcp doctor)"
	case strings.Contains(msg, "Unknown option --disable-userns") || strings.Contains(msg, "Unknown option"):
		return msg + " (bubblewrap 0.8.0 or newer is required; run srt-mcp doctor)"
	}
	return msg
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		if len(p) > room {
			b.buf.Write(p[:room])
		} else {
			b.buf.Write(p)
		}
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
