package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/srt-mcp/srt-mcp/nofollow"
)

// execMain is the exec stage ("srt-mcp __srt-exec"), pid 2 of the sandbox:
// the last code of ours the command's process runs. It verifies the sandbox
// from inside, then — only after the runner said go — scopes itself with
// Landlock, applies the rlimits (inside the user namespace, so RLIMIT_NPROC
// counts only this sandbox), takes its stdio, closes every other fd, sets
// no_new_privs and the seccomp filter, and execs the command.
func execMain() int {
	// Landlock and no_new_privs are per thread: stay on one until execve.
	runtime.LockOSThread()
	debug.SetGCPercent(-1) // a few milliseconds of life: no collector needed
	cfgFile := os.NewFile(fdConfig, "srt-config")
	if st, err := unix.GetsockoptInt(fdInit, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || st != unix.SOCK_SEQPACKET || cfgFile == nil {
		fmt.Fprintln(os.Stderr, "srt-mcp: __srt-exec is internal; run srt-mcp exec instead")
		return 125
	}
	// Plain syscalls on fd 3: this stage stays free of the runtime's poller.
	conn := rawConn(fdInit)
	fail := func(code, format string, args ...any) int {
		_ = conn.send(initMsg{T: initMsgError, Code: code, Message: fmt.Sprintf(format, args...)})
		return 125
	}
	var cfg initConfig
	err := json.NewDecoder(io.LimitReader(cfgFile, MaxSpecBytes)).Decode(&cfg)
	cfgFile.Close()
	if err != nil {
		return fail(ErrCodeInternal, "sandbox: bad configuration from the runner: %v", err)
	}
	if err := verifyInside(cfg.PID); err != nil {
		return fail(ErrCodeVerification, "%v", err)
	}
	if err := verifyMounted(cfg.Mounted); err != nil {
		return fail(ErrCodeVerification, "%v; refusing to run", err)
	}
	if err := verifyMountPoints(cfg.Points); err != nil {
		return fail(ErrCodeVerification, "%v; refusing to run", err)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return fail(ErrCodeInternal, "pipe: %v", err)
	}
	handOut := []*os.File{statusR}
	var tty *os.File
	if cfg.PTY {
		// A terminal from the sandbox's own devpts, so that ttyname(3)
		// and /dev/pts/N make sense inside; the runner gets the master.
		ptmx, t, err := pty.Open()
		if err != nil {
			return fail(ErrCodeSandboxFailed, "open a terminal in the sandbox: %v", err)
		}
		_ = pty.Setsize(ptmx, &pty.Winsize{Rows: cfg.Rows, Cols: cfg.Cols})
		handOut, tty = append(handOut, ptmx), t
	}
	if cfg.Proxy {
		for _, port := range []int{ProxyHTTPPort, ProxySOCKSPort} {
			l, err := loopbackListener(port)
			if err != nil {
				return fail(ErrCodeSandboxFailed, "proxy listener on 127.0.0.1:%d: %v", port, err)
			}
			handOut = append(handOut, l)
		}
	}
	var recorded string
	if cfg.Prestarted {
		if recorded, err = sandboxState(&cfg); err != nil {
			return fail(ErrCodeVerification, "%v", err)
		}
	}
	if err := conn.send(initMsg{T: initMsgVerified}, handOut...); err != nil {
		return 125
	}
	for _, f := range handOut {
		f.Close()
	}
	// A pre-started sandbox is checked at its claim, before the run comes:
	// whatever reached it while it waited (its mounts, its private files,
	// a process or socket in its namespaces) makes it another sandbox than
	// the one verified, and the runner discards it.
	checked := false
	var given []*os.File
	for {
		m, files, err := conn.recv()
		if err != nil {
			return 125 // the runner refused the sandbox or went away
		}
		if m.T == initMsgCheck && cfg.Prestarted && !checked {
			now, err := sandboxState(&cfg)
			if err != nil || now != recorded {
				return fail(ErrCodeVerification, "the pre-started sandbox changed while it waited (%s)", stateChange(recorded, now, err))
			}
			// The command gets the nice value of a cold run's.
			if n, err := threadNice(); err != nil || n != 0 {
				return fail(ErrCodeVerification, "the pre-started sandbox changed while it waited (its nice value is %d, not 0: %v)", n, err)
			}
			checked = true
			if err := conn.send(initMsg{T: initMsgUnchanged}); err != nil {
				return 125
			}
			continue
		}
		if m.T != initMsgGo || cfg.Prestarted && !checked {
			for _, f := range files {
				f.Close()
			}
			return 125
		}
		given = files
		break
	}
	_ = unix.Close(fdInit)

	// From here on, failures go to the exec-status pipe.
	failExec := func(code string, rc int, format string, args ...any) int {
		b, _ := json.Marshal(initMsg{T: initMsgError, Code: code, Message: fmt.Sprintf(format, args...)})
		_, _ = statusW.Write(b)
		return rc
	}
	run, stdio, report, tasks, err := takeRun(&cfg, given)
	if err != nil {
		return failExec(ErrCodeInternal, 125, "sandbox: %v", err)
	}
	// As root on cgroup v1: this thread, which execs the command, joins the
	// sandbox's cgroups by itself (no global lock: see cgroupPrep).
	if err := joinCgroups(tasks, cfg.CgroupTasks); err != nil {
		return failExec(ErrCodeLimitUnenforced, 125, "%v", err)
	}
	if tty != nil {
		stdio = [3]int{int(tty.Fd()), int(tty.Fd()), int(tty.Fd())}
	}
	for i, fd := range stdio {
		if fd != i {
			if err := unix.Dup3(fd, i, 0); err != nil {
				return failExec(ErrCodeInternal, 125, "stdio: %v", err)
			}
		}
	}
	if tty != nil {
		_, _ = unix.Setsid() // fails harmlessly if already a session leader
		if err := unix.IoctlSetInt(0, unix.TIOCSCTTY, 0); err != nil {
			return failExec(ErrCodeSandboxFailed, 125, "make the terminal the controlling tty: %v", err)
		}
	}
	if err := unix.Chdir(run.Cwd); err != nil {
		return failExec(ErrCodeInvalidCwd, 125, "cannot enter working directory %s: %v", run.Cwd, err)
	}
	// Everything that allocates comes before the limits: under the
	// address-space limit a Go heap that must grow dies ("fatal error:
	// runtime: out of memory", seen with a 256M limit).
	if len(run.Argv) == 0 {
		return failExec(ErrCodeInvalidSpec, 125, "empty command")
	}
	path, code, err := lookPath(run.Argv[0], envValue(run.Env, "PATH"))
	if err != nil {
		rc := 127
		if code == ErrCodeNotExecutable {
			rc = 126
		}
		return failExec(code, rc, "%v", err)
	}
	keep := 3 // the first fd the command does not inherit
	if report >= 0 {
		if err := unix.Dup3(report, 3, 0); err != nil {
			return failExec(ErrCodeInternal, 125, "report fd: %v", err)
		}
		keep = 4
	}
	// A simple shell command runs without its shell (Spec.Direct): the
	// program bash would exec, as bash would exec it.
	directPath, directEnv := "", []string(nil)
	if len(run.Direct) > 0 {
		if p, _, err := lookPath(run.Direct[0], envValue(run.Env, "PATH")); err == nil {
			if wd, err := unix.Getwd(); err == nil {
				if env, ok := bashEnviron(run.Env, wd, p); ok {
					directPath, directEnv = p, env
				}
			}
		}
	}
	if cfg.OwnerWrites {
		// A run writing as a tree's owner gives nothing it makes to the
		// group or others (the filter keeps it so).
		unix.Umask(unix.Umask(0) | ownerWriteBits)
	}
	filter, err := prepareSeccomp(seccompOpts{NoFallocate: run.NoFallocate, OwnerWrites: cfg.OwnerWrites})
	if err != nil {
		return failExec(ErrCodeSandboxFailed, 125, "seccomp: %v", err)
	}

	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return failExec(ErrCodeSandboxFailed, 125, "prctl(PR_SET_NO_NEW_PRIVS): %v", err)
	}
	if cfg.Landlock > 0 {
		if err := landlockScope(cfg.Landlock); err != nil {
			return failExec(ErrCodeSandboxFailed, 125, "landlock: %v", err)
		}
	}
	if err := applyRlimits(run.Limits); err != nil {
		return failExec(ErrCodeLimitUnenforced, 125, "%v", err)
	}
	_ = unix.CloseRange(uint(keep), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err := filter.install(); err != nil {
		return failExec(ErrCodeSandboxFailed, 125, "seccomp: %v", err)
	}
	if directPath != "" {
		// On failure (a script without #!, say) the shell runs the
		// command and does what bash does with it.
		_ = unix.Exec(directPath, run.Direct, directEnv)
	}
	err = unix.Exec(path, run.Argv, run.Env)
	code, rc := ErrCodeExecFailed, 126
	if errors.Is(err, unix.ENOENT) {
		code, rc = ErrCodeNotFound, 127
	} else if errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOEXEC) {
		code = ErrCodeNotExecutable
	}
	return failExec(code, rc, "cannot execute %s: %v", run.Argv[0], err)
}

// joinCgroups writes 0 to each tasks file, moving the calling thread (the
// exec stage is locked to it) into each cgroup, and closes them; want is
// the number the configuration announced.
func joinCgroups(tasks []*os.File, want int) error {
	defer func() {
		for _, f := range tasks {
			f.Close()
		}
	}()
	if len(tasks) != want {
		return fmt.Errorf("expected %d cgroup files from the runner, got %d; refusing to run without the sandbox's limits", want, len(tasks))
	}
	for _, f := range tasks {
		if _, err := f.Write([]byte("0")); err != nil {
			return fmt.Errorf("cannot join the sandbox's cgroup: %v; refusing to run without the sandbox's limits", err)
		}
	}
	return nil
}

// takeRun reads the run that came with the go message: given holds the
// runConfig pipe, then the command's stdin, stdout and stderr (unless the
// sandbox has its own terminal), its report pipe (when the run asks for
// one) and the cgroup files. It returns the stdio and report fds (-1: no
// report) and the cgroup files; any other number of files is refused.
func takeRun(cfg *initConfig, given []*os.File) (run runConfig, stdio [3]int, report int, tasks []*os.File, err error) {
	report = -1
	fail := func(format string, args ...any) (runConfig, [3]int, int, []*os.File, error) {
		for _, f := range given {
			f.Close()
		}
		return runConfig{}, stdio, -1, nil, fmt.Errorf(format, args...)
	}
	if len(given) == 0 {
		return fail("the go message carried no run")
	}
	err = json.NewDecoder(io.LimitReader(given[0], MaxSpecBytes)).Decode(&run)
	given[0].Close()
	given = given[1:]
	if err != nil {
		return fail("bad run configuration from the runner: %v", err)
	}
	want := cfg.CgroupTasks
	if !cfg.PTY {
		want += 3
	}
	if run.Report {
		want++
	}
	if len(given) != want {
		return fail("the go message carried %d files, %d expected", len(given), want)
	}
	if !cfg.PTY {
		for i := range stdio {
			stdio[i] = int(given[i].Fd())
		}
		given = given[3:]
	}
	if run.Report {
		report = int(given[0].Fd())
		given = given[1:]
	}
	// The stdio and report files stay open (dup'd, then closed at exec).
	return run, stdio, report, given, nil
}

// initMain is our own PID 1 ("srt-mcp __srt-init", bwrap --as-pid-1), used
// where the kernel has no Landlock: bwrap's PID 1 is dumpable, so without
// Landlock's ptrace scoping the command could open its /proc/1/mem. Ours is
// not dumpable. It relays the start-up protocol to the exec stage, reaps
// orphans, and when the command exits kills whatever is left and exits
// with the command's status.
func initMain() int {
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	signal.Ignore(unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGPIPE)
	up, err := newMsgConn(os.NewFile(fdInit, "srt-init"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "srt-mcp: __srt-init is internal; run srt-mcp exec instead")
		return 125
	}
	fail := func(code, format string, args ...any) int {
		_ = up.send(initMsg{T: initMsgError, Code: code, Message: fmt.Sprintf(format, args...)})
		return 125
	}
	cfgFile := os.NewFile(fdConfig, "srt-config")
	var cfg initConfig
	err = json.NewDecoder(io.LimitReader(cfgFile, MaxSpecBytes)).Decode(&cfg)
	cfgFile.Close()
	if err != nil {
		return fail(ErrCodeInternal, "sandbox init: bad configuration: %v", err)
	}
	if os.Getpid() != 1 {
		return fail(ErrCodeVerification, "sandbox init is pid %d, not 1: no private pid namespace", os.Getpid())
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(ErrCodeInternal, "socketpair: %v", err)
	}
	down, err := newMsgConn(os.NewFile(uintptr(fds[0]), "exec-stage"))
	if err != nil {
		return fail(ErrCodeInternal, "%v", err)
	}
	up.relay, down.relay = true, true
	sockChild := os.NewFile(uintptr(fds[1]), "exec-stage-child")
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return fail(ErrCodeInternal, "pipe: %v", err)
	}
	// The binary goes to the child at a fixed slot: Go's fork may reuse any
	// fd number not listed here while it arranges these. The child's stdio
	// is ours (bwrap's diagnostics) until the command's comes with go.
	attr := &os.ProcAttr{
		Env:   []string{},
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr, sockChild, cfgR, os.NewFile(fdSelf, "srt-mcp")},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	}
	p, err := os.StartProcess("/proc/self/fd/5", []string{"srt-mcp", ModeExec}, attr)
	// Non-dumpable from here on (the exec stage is started through our own
	// /proc/self/fd, which a non-dumpable process may not use; nothing
	// untrusted runs before this point).
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	sockChild.Close()
	cfgR.Close()
	if err != nil {
		return fail(ErrCodeSandboxFailed, "start the exec stage: %v", err)
	}
	// Our own threads took the first pids of the namespace.
	cfg.PID = p.Pid
	go func() {
		_ = json.NewEncoder(cfgW).Encode(cfg)
		cfgW.Close()
	}()
	// Relay the start-up protocol, which alternates: verified (with the
	// exec-status pipe) or an error up; check or go down; after a check,
	// unchanged or an error up, then go down.
	for {
		m, files, err := down.recv()
		if err != nil {
			break
		}
		_ = up.send(m, files...)
		for _, f := range files {
			f.Close()
		}
		if m.T == initMsgError {
			break
		}
		g, gf, err := up.recv()
		if err != nil {
			break
		}
		_ = down.send(g, gf...)
		for _, f := range gf {
			f.Close()
		}
		if g.T == initMsgGo {
			break
		}
	}
	down.close()
	up.close()
	detachStdio()
	ws := reapAll(p.Pid)
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return 128 + int(ws.Signal())
	}
	return 125
}

// reapAll waits for every child. When mainPid exits it kills the rest of
// the sandbox; it returns mainPid's status once nothing is left.
func reapAll(mainPid int) unix.WaitStatus {
	var mainStatus unix.WaitStatus
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return mainStatus
		}
		if pid == mainPid && (ws.Exited() || ws.Signaled()) {
			mainStatus = ws
			_ = unix.Kill(-1, unix.SIGKILL)
		}
	}
}

// detachStdio points PID 1's own stdio (bwrap's, which the runner reads as
// diagnostics) at /dev/null once the command runs.
func detachStdio() {
	null, err := unix.Open("/dev/null", unix.O_RDWR, 0)
	if err != nil {
		return
	}
	for fd := 0; fd < 3; fd++ {
		_ = unix.Dup3(null, fd, 0)
	}
	_ = unix.Close(null)
}

// verifyInside checks, from within, that the sandbox is what bwrap was asked
// for. The runner checks every namespace from outside as well.
func verifyInside(wantPid int) error {
	if os.Getpid() != wantPid {
		return fmt.Errorf("the sandbox's command is pid %d, not %d: no private pid namespace", os.Getpid(), wantPid)
	}
	self, err := os.Readlink("/proc/self")
	if err != nil || self != strconv.Itoa(wantPid) {
		return fmt.Errorf("/proc is not the sandbox's own (/proc/self is %q)", self)
	}
	if m, err := os.ReadFile("/proc/self/uid_map"); err != nil || strings.Join(strings.Fields(string(m)), " ") == "0 0 4294967295" {
		return errors.New("still in the host's user namespace")
	}
	dev, err := os.ReadFile("/proc/self/net/dev")
	if err != nil {
		return fmt.Errorf("cannot read network interfaces: %v", err)
	}
	lines := strings.Split(string(dev), "\n")
	for _, line := range lines[min(2, len(lines)):] {
		name, _, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && name != "lo" {
			return fmt.Errorf("network interface %q is visible: no private network namespace", name)
		}
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh":
			if n, err := strconv.ParseUint(v, 16, 64); err != nil || n != 0 {
				return fmt.Errorf("capabilities were not dropped (%s %s)", k, v)
			}
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/", &st); err != nil || st.Flags&unix.ST_RDONLY == 0 {
		return errors.New("the sandbox root is writable")
	}
	return nil
}

// verifyMounted checks that each path the runner mounted by descriptor,
// reached from the sandbox's root without following a link, is the very
// object the runner opened: a destination swapped for a link (or a source
// swapped for another directory) while the sandbox was being built shows
// up here.
func verifyMounted(ms []mountedObject) error {
	for _, m := range ms {
		f, err := nofollow.Open(m.Dst, unix.O_PATH)
		if err != nil {
			return fmt.Errorf("%s is not reachable without following a link (%v)", m.Dst, err)
		}
		var st unix.Stat_t
		err = unix.Fstat(int(f.Fd()), &st)
		f.Close()
		if err != nil {
			return fmt.Errorf("stat %s: %v", m.Dst, err)
		}
		if uint64(st.Dev) != m.Dev || st.Ino != m.Ino {
			return fmt.Errorf("%s is not the object the runner mounted there (it changed during start-up)", m.Dst)
		}
	}
	return nil
}

// verifyMountPoints checks that every path the plan mounted something at
// is a mount point in the sandbox's mount table: a mount moves with its
// directory when a host directory above it is renamed (by another user
// owning it, by another sandbox writing there) while bwrap builds the
// sandbox, and the path would then show what the mount was to cover.
func verifyMountPoints(points []string) error {
	if len(points) == 0 {
		return nil
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("cannot read the sandbox's mount table: %v", err)
	}
	return missingMountPoint(mi, points)
}

// missingMountPoint is verifyMountPoints on the mount table mi.
func missingMountPoint(mi []byte, points []string) error {
	mounted := map[string]bool{}
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			mounted[unescapeMountPath(f[4])] = true
		}
	}
	for _, p := range points {
		if !mounted[p] {
			return fmt.Errorf("%s is not the mount point it was made (a directory above it changed during start-up)", p)
		}
	}
	return nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space,
// \011, \012, \134).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func applyRlimits(l rlimits) error {
	set := func(name string, res int, v uint64) error {
		if v == 0 {
			return nil
		}
		var cur syscall.Rlimit
		if err := syscall.Getrlimit(res, &cur); err == nil && cur.Max < v {
			v = cur.Max
		}
		// syscall.Setrlimit (not x/sys) so the runtime forgets the
		// RLIMIT_NOFILE it would otherwise restore at exec.
		if err := syscall.Setrlimit(res, &syscall.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("cannot set %s to %d: %v", name, v, err)
		}
		return nil
	}
	if err := set("RLIMIT_NPROC", unix.RLIMIT_NPROC, l.NProc); err != nil {
		return err
	}
	if err := set("RLIMIT_AS", unix.RLIMIT_AS, l.AS); err != nil {
		return err
	}
	if err := set("RLIMIT_FSIZE", unix.RLIMIT_FSIZE, l.FSize); err != nil {
		return err
	}
	if err := set("RLIMIT_NOFILE", unix.RLIMIT_NOFILE, l.NoFile); err != nil {
		return err
	}
	return syscall.Setrlimit(unix.RLIMIT_CORE, &syscall.Rlimit{})
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// lookPath finds name the way a shell would, in the sandbox's own PATH.
func lookPath(name, path string) (string, string, error) {
	check := func(p string) (string, error) {
		fi, err := os.Stat(p)
		if err != nil {
			return ErrCodeNotFound, err
		}
		if fi.IsDir() || unix.Access(p, unix.X_OK) != nil {
			return ErrCodeNotExecutable, fmt.Errorf("%s: permission denied (not an executable file)", p)
		}
		return "", nil
	}
	if strings.Contains(name, "/") {
		if code, err := check(name); err != nil {
			if code == ErrCodeNotFound {
				return "", code, fmt.Errorf("%s: no such file in the sandbox", name)
			}
			return "", code, err
		}
		return name, "", nil
	}
	var lastErr error
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		code, err := check(p)
		if err == nil {
			return p, "", nil
		}
		if code == ErrCodeNotExecutable {
			lastErr = err
		}
	}
	if lastErr != nil {
		return "", ErrCodeNotExecutable, lastErr
	}
	return "", ErrCodeNotFound, fmt.Errorf("%s: command not found in the sandbox (PATH=%s)", name, path)
}

// loopbackListener opens a TCP listener on the sandbox's own loopback. The
// runner serves it from outside; inside, nothing else can take the port.
func loopbackListener(port int) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.Listen(fd, 512); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), fmt.Sprintf("proxy-%d", port)), nil
}
