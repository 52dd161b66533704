package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/srt-mcp/srt-mcp/policy"
)

// startupTimeout bounds how long bwrap and the sandbox side may take to
// come up.
const startupTimeout = 30 * time.Second

// checkTimeout bounds how long a claim waits for a pre-started sandbox's
// answer to its check.
const checkTimeout = 2 * time.Second

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
	cmd       *exec.Cmd
	pid1      int    // host pid of the sandbox's PID 1
	pidNS     string // its pid namespace, "pid:[N]"
	diag      *limitedBuffer
	mu        sync.Mutex
	killed    bool
	exitCode  int
	exitSeen  bool
	waitDone  chan struct{}
	res       procResult
	ptmx      *os.File
	listeners []*os.File
	cgroup    *sandboxCgroup
	report    <-chan string // the command's report line (Spec.Report)
}

func (p *bwrapProc) terminal() *os.File { return p.ptmx }

func (p *bwrapProc) proxyListeners() []*os.File { return p.listeners }

// ptyInsideSandbox: on Linux the sandbox opens its terminal in its own
// devpts and passes the master out.
// fileOverlays: the sandbox's view can put a file of the runner's at any
// path (the trust bundle over the system bundle, a stand-in over a masked
// credential file); bwrap binds a file over any path.
const fileOverlays = true

const ptyInsideSandbox = true

// sandboxUserSwitch: a root runner runs its sandboxes as the sandbox user.
const sandboxUserSwitch = true

// launch starts the sandbox for r and runs the command in it at once: a
// sandbox started ahead of its call (prestart.go) goes through the same
// two steps, with time between them.
func launch(ctx context.Context, r *Run, plan *Plan, cfg *initConfig, child [3]*os.File, opts Options) (sandboxProc, error) {
	sb, err := startSandbox(ctx, r, plan, cfg, opts)
	if err != nil {
		return nil, err
	}
	return sb.run(ctx, r, child)
}

// startedSandbox is a sandbox built and verified from inside and outside
// whose exec stage waits for its command (the go message).
type startedSandbox struct {
	p          *bwrapProc
	conn       *msgConn
	execStatus *os.File
	cfg        *initConfig
	tasks      []*os.File // the cgroup v1 tasks files that go with go
	release    func()     // lets the thread that started bwrap go
	diagDone   chan struct{}
	statusDone chan struct{}
	mounted    []mountedObject // what each bind mount's source was when mounted
	uid        int             // the sandbox's host uid (-1: the runner's own)
	noAS       bool            // the cgroup bounds memory: no RLIMIT_AS
	gone       chan struct{}   // closed when bwrap exited before go
	stage      int             // the exec stage's host pid (a pre-started sandbox's; 0: unknown)
	checked    chan error      // the answer to the claim's check (beginCheck)
	niced      bool            // started at prestartNice, not yet back at 0
}

// startSandbox builds r's sandbox up to the point where it waits for the
// command: namespaces, mounts, the exec stage verified from inside, every
// namespace checked from outside, the cgroups made. Nothing of the run
// (argv, environment, working directory, stdio, rlimits) is in it yet.
func startSandbox(ctx context.Context, r *Run, plan *Plan, cfg *initConfig, opts Options) (*startedSandbox, error) {
	bwrap, err := FindBwrap()
	if err != nil {
		return nil, errorf(ErrCodeUnavailable, "bubblewrap (bwrap) is not installed; install it with: apt-get install -y bubblewrap")
	}
	// As root, the sandbox's cgroup is made (and the kernel's grace period
	// for moving into it started) while bwrap starts: see cgroupPrep. Every
	// return before the sandbox is handed over removes it here.
	prep := prepareCgroup(r.spec.ID, r.spec.Policy.Limits)
	launched := false
	defer func() {
		if !launched {
			prep.discard()
		}
	}()
	asPID1 := r.spec.Init == InitSRT || LandlockABI() == 0
	cfg.PID = 2
	noAS := false
	if prep != nil {
		cfg.CgroupTasks = selfMoves(r.spec.Policy.Limits)
		// The cgroup bounds the sandbox's memory (the run fails when it
		// cannot): RLIMIT_AS would only add a bound on address space,
		// which 64-bit WebAssembly runtimes (Node's fetch, V8, wasmtime)
		// reserve by the gigabyte without using.
		noAS = cgroupBoundsMemory(r.spec.Policy.Limits)
	}
	if !asPID1 {
		cfg.Landlock = LandlockABI()
	}
	seen := map[string]bool{}
	if cfg.Prestarted {
		// The sandbox's root, bwrap's tmpfs: read-only inside, but its
		// uid on the host can remount it from the user namespace it owns.
		cfg.Private = append(cfg.Private, "/")
	}
	for _, m := range plan.Mounts {
		if !seen[m.Dst] {
			seen[m.Dst] = true
			cfg.Dsts = append(cfg.Dsts, m.Dst)
			switch m.Kind {
			case MountRO, MountRW, MountTmpfs, MountHideFile, MountProc, MountDev:
				cfg.Points = append(cfg.Points, m.Dst)
			}
		}
		if cfg.Prestarted && (m.Kind == MountTmpfs || m.Kind == MountDev) {
			cfg.Private = append(cfg.Private, m.Dst)
		}
	}
	// The run's part of the configuration comes with go.
	wire := *cfg
	wire.runConfig = runConfig{}
	var closers []io.Closer
	closeAll := func() {
		for _, c := range closers {
			c.Close()
		}
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, errorf(ErrCodeInternal, "socketpair: %v", err)
	}
	ctlChild := os.NewFile(uintptr(fds[1]), "srt-init-child")
	conn, err := newMsgConn(os.NewFile(uintptr(fds[0]), "srt-init"))
	if err != nil {
		ctlChild.Close()
		return nil, errorf(ErrCodeInternal, "%v", err)
	}
	cfgR, cfgW, err1 := os.Pipe()
	statusR, statusW, err2 := os.Pipe()
	diagR, diagW, err3 := os.Pipe()
	if err1 != nil || err2 != nil || err3 != nil {
		conn.close()
		return nil, errorf(ErrCodeInternal, "pipe: %v %v %v", err1, err2, err3)
	}
	closers = append(closers, ctlChild, cfgR, statusW, diagW)
	fail := func(e *Error) (*startedSandbox, error) {
		closeAll()
		conn.close()
		cfgW.Close()
		statusR.Close()
		diagR.Close()
		return nil, e
	}
	// The binary the sandbox side runs, executed through its descriptor.
	self, err := os.Open(opts.Self)
	if err != nil {
		return fail(errorf(ErrCodeUnavailable, "cannot open the srt-mcp binary to run inside the sandbox: %v", err))
	}
	closers = append(closers, self)
	extra := []*os.File{ctlChild, cfgR, statusW, self}
	// Every bind source, opened now that the plan is checked: a path the
	// sandbox could change is opened without following any link, and bwrap
	// mounts the object opened, never the name.
	sources, sourceFDs, mounted, serr := openSources(plan, fdFirstMount)
	for _, f := range sources {
		closers = append(closers, f)
		extra = append(extra, f)
	}
	if serr != nil {
		return fail(serr)
	}
	wire.Mounted = mounted
	sb := &startedSandbox{cfg: cfg, uid: -1, gone: make(chan struct{}), noAS: noAS}
	if cfg.Prestarted {
		sb.mounted = mounted
	}
	// As root, the sandbox is an unprivileged host user: bwrap itself is
	// started as that user and maps it, unprivileged, into its namespace.
	var cred *syscall.Credential
	var mapped *idmapped
	if u, ok := r.sandboxIdentity(); ok {
		if err := u.Check(); err != nil {
			return fail(errorf(ErrCodeInvalidSpec, "%v", err))
		}
		// Writable roots the sandbox user may not write are mounted
		// through idmapped clones (idmap_linux.go).
		var e *Error
		if mapped, e = prepareIdmaps(u, plan, r.spec.Ceiling, r.spec.Mounts, sources, sourceFDs, r.cache); e != nil {
			return fail(e)
		}
		closers = append(closers, closerFunc(mapped.close))
		if mapped != nil {
			if cfg.Prestarted {
				return fail(errorf(ErrCodeInvalidSpec, "a sandbox with idmapped writable roots is not pre-started"))
			}
			tr("idmapped")
			wire.OwnerWrites, cfg.OwnerWrites = true, true
			for _, root := range mapped.roots {
				plan.OwnerWritten = append(plan.OwnerWritten, root.src)
			}
		}
		if e := checkAccessAs(u, plan, r.spec.Mounts, mapped); e != nil {
			return fail(e)
		}
		cred = &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: []uint32{}}
		sb.uid = u.UID
	}
	cfgBytes, err := json.Marshal(&wire)
	if err != nil {
		return fail(errorf(ErrCodeInternal, "%v", err))
	}
	cmdArgs := []string{sandboxSelf, ModeExec}
	if asPID1 {
		cmdArgs = []string{sandboxSelf, ModeInit}
	}
	args := BwrapArgs(plan, BwrapOptions{JSONStatusFD: fdJSONStatus, Command: cmdArgs, AsPID1: asPID1, SourceFDs: sourceFDs})
	cmd := exec.Command(bwrap, args...)
	cmd.Env = []string{} // bwrap, and so the sandbox's /proc/1/environ, get nothing of ours
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, diagW, diagW
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true, Credential: cred}
	tr("start")
	// release lets the thread that started bwrap go (see idmapped.start);
	// called once bwrap has been waited for.
	release := func() {}
	var startErr error
	if mapped != nil {
		var rel func()
		if rel, startErr = mapped.start(cmd); rel != nil {
			release = rel
		}
	} else {
		startErr = cmd.Start()
	}
	closeAll()
	if startErr != nil {
		conn.close()
		cfgW.Close()
		statusR.Close()
		diagR.Close()
		var e *Error
		if errors.As(startErr, &e) {
			return nil, e
		}
		return nil, errorf(ErrCodeUnavailable, "cannot start bwrap: %v", startErr)
	}
	go func() {
		_, _ = cfgW.Write(cfgBytes)
		cfgW.Close()
	}()
	p := &bwrapProc{cmd: cmd, diag: &limitedBuffer{max: 16 << 10}, waitDone: make(chan struct{})}
	sb.p, sb.conn, sb.release = p, conn, release
	diagDone := make(chan struct{})
	sb.diagDone = diagDone
	go func() {
		_, _ = io.Copy(p.diag, diagR)
		diagR.Close()
		close(diagDone)
	}()
	pidCh := make(chan int, 1)
	statusDone := make(chan struct{})
	sb.statusDone = statusDone
	go func() {
		defer close(statusDone)
		defer statusR.Close()
		dec := json.NewDecoder(statusR)
		sent := false
		for {
			var st struct {
				ChildPid int  `json:"child-pid"`
				ExitCode *int `json:"exit-code"`
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
			if st.ExitCode != nil {
				p.mu.Lock()
				p.exitCode, p.exitSeen = *st.ExitCode, true
				p.mu.Unlock()
			}
		}
	}()

	// As root, RLIMIT_NPROC does not apply: the sandbox goes into a cgroup
	// of its own (see cgroup_linux.go). On v1 the exec stage moves itself
	// in after go. On v2 PID 1 is moved as soon as bwrap names it, while
	// bwrap is still building the mounts, and the exec stage PID 1 forks
	// later inherits the cgroup.
	type cgResult struct {
		pid1 int
		cg   *sandboxCgroup
		err  error
	}
	cgCh := make(chan cgResult, 1)
	go func() {
		res := cgResult{pid1: <-pidCh}
		res.cg, res.err = prep.wait()
		if res.pid1 > 0 && res.cg != nil && res.err == nil && !res.cg.selfMove {
			res.err = res.cg.add(res.pid1)
		}
		cgCh <- res
	}()
	abort := func(e *Error) (*startedSandbox, error) {
		sb.abort(e)
		return nil, e
	}
	deadline := time.Now().Add(startupTimeout)
	conn.setDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.setDeadline(time.Now()) })
	defer stop()

	m, files, err := conn.recv()
	if err != nil {
		return abort(errorf(ErrCodeSandboxFailed, "bubblewrap could not start the sandbox"))
	}
	if m.T == initMsgError {
		return abort(&Error{Code: m.Code, Message: m.Message})
	}
	want := 1
	if cfg.PTY {
		want++
	}
	if cfg.Proxy {
		want += 2
	}
	if m.T != initMsgVerified || len(files) != want {
		for _, f := range files {
			f.Close()
		}
		return abort(errorf(ErrCodeSandboxFailed, "unexpected message %q with %d fds from the sandbox", m.T, len(files)))
	}
	tr("verified")
	sb.execStatus = files[0]
	rest := files[1:]
	if cfg.PTY {
		p.ptmx, rest = rest[0], rest[1:]
	}
	if cfg.Proxy {
		p.listeners = rest[:2]
	}
	var res cgResult
	select {
	case res = <-cgCh:
	case <-time.After(time.Until(deadline)):
	}
	p.pid1, p.cgroup = res.pid1, res.cg
	if p.pid1 <= 0 {
		return abort(errorf(ErrCodeVerification, "bwrap did not report the sandbox's pid"))
	}
	if res.err != nil {
		return abort(errorf(ErrCodeLimitUnenforced, "cgroup for the sandbox's limits: %v", res.err))
	}
	if p.pidNS, err = checkNamespaces(p.pid1); err != nil {
		return abort(errorf(ErrCodeVerification, "%v; refusing to run unsandboxed", err))
	}
	if p.cgroup != nil && p.cgroup.selfMove {
		sb.tasks = p.cgroup.takeTasks()
		if len(sb.tasks) != cfg.CgroupTasks {
			return abort(errorf(ErrCodeLimitUnenforced, "cgroup for the sandbox's limits: %d directories, %d announced", len(sb.tasks), cfg.CgroupTasks))
		}
	} else if p.cgroup != nil {
		// The exec stage, PID 1's one child, must be in the cgroup: it is
		// when it was forked after PID 1 moved; else move it now.
		kids := children(p.pid1)
		if len(kids) != 1 {
			return abort(errorf(ErrCodeVerification, "expected one process under the sandbox's PID 1, found %d", len(kids)))
		}
		if !p.cgroup.contains(kids[0]) {
			if err := p.cgroup.add(kids[0]); err != nil {
				return abort(errorf(ErrCodeLimitUnenforced, "%v", err))
			}
		}
	}
	tr("ns-checked")
	if cfg.Prestarted {
		if kids := children(p.pid1); len(kids) == 1 {
			sb.stage = kids[0]
		}
	}
	// No deadline while a pre-started sandbox waits; bwrap's end (killed,
	// or the stage gone) shows as sb.gone.
	conn.setDeadline(time.Time{})
	go func() {
		<-statusDone
		close(sb.gone)
	}()
	launched = true
	return sb, nil
}

// abort ends a started sandbox that will not run its command.
func (sb *startedSandbox) abort(e *Error) {
	_ = sb.p.cmd.Process.Kill()
	sb.end()
	if e != nil {
		if d := strings.TrimSpace(sb.p.diag.String()); d != "" {
			e.Message += ": " + explainBwrap(d)
		}
	}
}

// end waits for the sandbox's bwrap to exit and lets go of everything the
// sandbox held: its descriptors, the thread that started it, its cgroups.
func (sb *startedSandbox) end() {
	p := sb.p
	_ = p.cmd.Wait()
	sb.release()
	sb.conn.close()
	for _, f := range sb.tasks {
		f.Close()
	}
	if sb.execStatus != nil {
		sb.execStatus.Close()
	}
	if p.ptmx != nil {
		p.ptmx.Close()
	}
	for _, l := range p.listeners {
		l.Close()
	}
	<-sb.diagDone
	p.cgroup.remove()
}

// beginCheck asks a pre-started sandbox's exec stage whether the sandbox
// is still the one it verified (see sandboxState), as soon as a run is
// there to claim it: the stage looks while the runner plans the run;
// check has the answer.
func (sb *startedSandbox) beginCheck() {
	if sb.checked != nil {
		return
	}
	sb.checked = make(chan error, 1)
	go func() { sb.checked <- sb.askCheck() }()
}

// check is beginCheck's answer: an error says what changed or that the
// sandbox is gone.
func (sb *startedSandbox) check(ctx context.Context) error {
	sb.beginCheck()
	select {
	case err := <-sb.checked:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (sb *startedSandbox) askCheck() error {
	select {
	case <-sb.gone:
		return errors.New("the sandbox ended while it waited")
	default:
	}
	// The check takes the stage a millisecond: one that does not answer
	// soon (stopped, say) is not waited for; the run starts its own.
	sb.conn.setDeadline(time.Now().Add(checkTimeout))
	if err := sb.conn.send(initMsg{T: initMsgCheck}); err != nil {
		return fmt.Errorf("the sandbox went away while it waited: %v", err)
	}
	m, files, err := sb.conn.recv()
	for _, f := range files {
		f.Close()
	}
	switch {
	case err != nil:
		return fmt.Errorf("the sandbox went away while it waited: %v", err)
	case m.T == initMsgError:
		return errors.New(m.Message)
	case m.T != initMsgUnchanged:
		return fmt.Errorf("unexpected message %q from the sandbox", m.T)
	}

	return nil
}

// discard ends a started sandbox nothing ran in.
func (sb *startedSandbox) discard() { sb.abort(nil) }

// run sends the go message with r's run and its stdio (child; ignored for
// a sandbox with its own terminal) and waits until the command was
// exec'd. A claimed pre-started sandbox whose exec stage finds it changed
// fails with ErrCodeVerification.
func (sb *startedSandbox) run(ctx context.Context, r *Run, child [3]*os.File) (sandboxProc, error) {
	p, cfg := sb.p, sb.cfg
	deadline := time.Now().Add(startupTimeout)
	var closers []*os.File
	defer func() {
		for _, f := range closers {
			f.Close()
		}
	}()
	fail := func(e *Error) (sandboxProc, error) {
		sb.abort(e)
		return nil, e
	}
	runR, runW, err := os.Pipe()
	if err != nil {
		return fail(errorf(ErrCodeInternal, "pipe: %v", err))
	}
	closers = append(closers, runR)
	send := []*os.File{runR}
	if !cfg.PTY {
		// Every stdio slot must be a real fd in the sandbox.
		for i := range child {
			if child[i] == nil {
				null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
				if err != nil {
					runW.Close()
					return fail(errorf(ErrCodeInternal, "%v", err))
				}
				closers = append(closers, null)
				child[i] = null
			}
		}
		send = append(send, child[:]...)
	}
	if r.spec.Report {
		rr, rw, err := os.Pipe()
		if err != nil {
			runW.Close()
			return fail(errorf(ErrCodeInternal, "pipe: %v", err))
		}
		closers = append(closers, rw)
		p.report = readReport(rr)
		send = append(send, rw)
	}
	rc := cfg.runConfig
	if sb.noAS {
		rc.Limits.AS = 0
	}
	runBytes, err := json.Marshal(&rc)
	if err != nil {
		runW.Close()
		return fail(errorf(ErrCodeInternal, "%v", err))
	}
	go func() {
		_, _ = runW.Write(runBytes)
		runW.Close()
	}()
	send = append(send, sb.tasks...)
	err = sb.conn.send(initMsg{T: initMsgGo}, send...)
	for _, f := range sb.tasks {
		f.Close()
	}
	sb.tasks = nil
	if err != nil {
		return fail(errorf(ErrCodeSandboxFailed, "the sandbox went away during start-up"))
	}
	sb.conn.close()
	// EOF on the exec-status pipe: the command was exec'd.
	stop := context.AfterFunc(ctx, func() { _ = sb.execStatus.SetReadDeadline(time.Now()) })
	defer stop()
	_ = sb.execStatus.SetReadDeadline(deadline)
	out, _ := io.ReadAll(io.LimitReader(sb.execStatus, 1<<16))
	sb.execStatus.Close()
	sb.execStatus = nil
	tr("exec-eof")
	if len(out) > 0 {
		var em initMsg
		if json.Unmarshal(out, &em) != nil || em.T != initMsgError {
			em = initMsg{Code: ErrCodeExecFailed, Message: strings.TrimSpace(string(out))}
		}
		e := &Error{Code: em.Code, Message: em.Message}
		if em.Code == ErrCodeVerification {
			return fail(e)
		}
		// The command could not be exec'd: the sandbox ends by itself.
		sb.end()
		return nil, e
	}

	cmd := p.cmd
	go func() {
		werr := cmd.Wait()
		sb.release()
		tr("bwrap-exit")
		p.cgroup.remove()
		<-sb.statusDone
		tr("status-eof")
		<-sb.diagDone
		p.mu.Lock()
		defer p.mu.Unlock()
		switch {
		case p.exitSeen:
			p.res = procResult{code: p.exitCode}
			if p.report != nil {
				p.res.report = <-p.report
			}
			if p.exitCode > 128 && p.exitCode < 128+65 {
				p.res.sig = p.exitCode - 128
			}
			if cmd.ProcessState != nil {
				if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
					p.res.cpuMS = (ru.Utime.Nano() + ru.Stime.Nano()) / 1e6
					p.res.maxRSS = ru.Maxrss << 10
				}
			}
		case p.killed:
			p.res = procResult{code: 128 + int(syscall.SIGKILL), sig: int(syscall.SIGKILL)}
		default:
			msg := "the sandbox ended without reporting the command's exit status"
			if werr != nil {
				msg += " (bwrap: " + werr.Error() + ")"
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

func (p *bwrapProc) wait() procResult {
	<-p.waitDone
	return p.res
}

// signal sends sig to every process in the sandbox's pid namespace except
// its PID 1, found by their namespace link: a process that left the
// command's process group or session is still reached.
func (p *bwrapProc) signal(sig syscall.Signal) error {
	select {
	case <-p.waitDone:
		return ErrExited
	default:
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == p.pid1 {
			continue
		}
		if ns, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && ns == p.pidNS {
			_ = unix.Kill(pid, sig)
		}
	}
	return nil
}

func (p *bwrapProc) kill() {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	select {
	case <-p.waitDone:
		return
	default:
	}
	// PID 1 dying takes the whole pid namespace with it; bwrap's monitor
	// dying does too (--die-with-parent).
	if p.pid1 > 0 {
		_ = unix.Kill(p.pid1, unix.SIGKILL)
	}
	_ = p.cmd.Process.Kill()
}

// checkNamespaces compares every namespace of the sandbox's PID 1 with the
// runner's own: each must be different. It returns the pid namespace link.
func checkNamespaces(pid int) (string, error) {
	var pidNS string
	for _, ns := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		mine, err := os.Readlink("/proc/self/ns/" + ns)
		if err != nil {
			return "", fmt.Errorf("cannot read own %s namespace: %v", ns, err)
		}
		theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
		if err != nil {
			return "", fmt.Errorf("cannot read the sandbox's %s namespace: %v", ns, err)
		}
		if mine == theirs {
			return "", fmt.Errorf("the sandbox shares the host's %s namespace (%s)", ns, mine)
		}
		if ns == "pid" {
			pidNS = theirs
		}
	}
	return pidNS, nil
}

// explainBwrap adds the fix to bwrap's best-known failures.
func explainBwrap(msg string) string {
	switch {
	case strings.Contains(msg, "setting up uid map") || strings.Contains(msg, "No permissions to create new namespace") || strings.Contains(msg, "Creating new namespace failed"):
		return msg + " (unprivileged user namespaces are disabled on this host: enable them with sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu 24.04+ allow bwrap in AppArmor; run srt-mcp doctor)"
	case strings.Contains(msg, "RTM_NEWADDR") || strings.Contains(msg, "loopback"):
		return msg + " (the host refuses a private network namespace; run srt-mcp doctor)"
	case strings.Contains(msg, "Unknown option"):
		return msg + " (bubblewrap 0.8.0 or newer is required; run srt-mcp doctor)"
	}
	return msg
}

// closerFunc makes a function an io.Closer.
type closerFunc func()

func (f closerFunc) Close() error {
	f()
	return nil
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

// etcDir returns the mirror of the host's /etc for this run in the cache
// directory, "" (one bind per entry) if there is none or it cannot be built.
func etcDir(cache string) string {
	if cache == "" {
		return ""
	}
	d, err := EtcView(cache, "/etc", policy.SystemEtc)
	if err != nil {
		return ""
	}
	return d
}
