package runner

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// initMain is the sandbox's PID 1 ("srt-mcp __srt-init"). It runs inside
// every namespace bwrap made, without the seccomp filter (it is our code),
// and is not dumpable, so the command can neither ptrace it nor open its
// /proc/1/mem. It verifies the sandbox, starts the exec stage, forwards
// signals to every process in the sandbox, reaps orphans, and when the
// command exits kills whatever is left and exits with the command's status.
func initMain() int {
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	conn := os.NewFile(3, "srt-init")
	if conn == nil {
		fmt.Fprintln(os.Stderr, "srt-mcp: __srt-init is internal; run srt-mcp exec instead")
		return 125
	}
	// Nothing bwrap passed through (its status fd, our stdio copies) may
	// reach the exec stage except what startExecStage hands it.
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	in := bufio.NewReader(conn)
	var mu sync.Mutex
	send := func(m initMsg) {
		b, _ := json.Marshal(m)
		mu.Lock()
		_, _ = conn.Write(append(b, '\n'))
		mu.Unlock()
	}
	fail := func(code, format string, args ...any) int {
		send(initMsg{T: initMsgError, Code: code, Message: fmt.Sprintf(format, args...)})
		return 125
	}
	var first initMsg
	if err := readInitMsg(in, &first); err != nil || first.T != initMsgConfig || first.Config == nil {
		return fail(ErrCodeInternal, "sandbox init: no configuration from the runner")
	}
	cfg := first.Config
	if err := verifyInside(); err != nil {
		return fail(ErrCodeVerification, "%v", err)
	}
	send(initMsg{T: initMsgVerified})
	var goMsg initMsg
	if err := readInitMsg(in, &goMsg); err != nil || goMsg.T != initMsgGo {
		return 125 // the runner refused the sandbox or went away
	}

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2)
	go func() {
		for s := range sigs {
			_ = unix.Kill(-1, s.(syscall.Signal))
		}
	}()

	stdio := []*os.File{os.NewFile(fdStdin, "stdin"), os.NewFile(fdStdout, "stdout"), os.NewFile(fdStderr, "stderr")}
	mainPid, errMsg := startExecStage(cfg, stdio)
	if errMsg != nil {
		send(*errMsg)
		reapAll(-1)
		return 125
	}
	send(initMsg{T: initMsgStarted})
	detachStdio()
	for _, f := range stdio {
		f.Close()
	}
	_ = unix.Close(fdJSONStatus)

	go func() {
		for {
			var m initMsg
			if err := readInitMsg(in, &m); err != nil {
				// The runner is gone: take the sandbox down with it.
				_ = unix.Kill(-1, unix.SIGKILL)
				return
			}
			if m.T == initMsgSignal && m.Sig > 0 {
				_ = unix.Kill(-1, syscall.Signal(m.Sig))
			}
		}
	}()

	ws := reapAll(mainPid)
	code, sig := 0, 0
	switch {
	case ws.Exited():
		code = ws.ExitStatus()
	case ws.Signaled():
		sig = int(ws.Signal())
		code = 128 + sig
	}
	send(initMsg{T: initMsgExit, Exit: code, Sig: sig})
	return code
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

// startExecStage starts "__srt-exec" as the command's process and waits
// until it has exec'd the command (EOF on its status pipe) or failed.
func startExecStage(cfg *initConfig, stdio []*os.File) (int, *initMsg) {
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return 0, &initMsg{T: initMsgError, Code: ErrCodeInternal, Message: err.Error()}
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		return 0, &initMsg{T: initMsgError, Code: ErrCodeInternal, Message: err.Error()}
	}
	attr := &os.ProcAttr{
		Dir:   cfg.Cwd,
		Env:   []string{},
		Files: []*os.File{stdio[0], stdio[1], stdio[2], cfgR, stW},
		Sys:   &syscall.SysProcAttr{Setsid: true, Setctty: cfg.PTY, Ctty: 0},
	}
	p, err := os.StartProcess(SandboxSelf, []string{"srt-mcp", ModeExec}, attr)
	cfgR.Close()
	stW.Close()
	if err != nil {
		return 0, &initMsg{T: initMsgError, Code: ErrCodeSandboxFailed, Message: "start exec stage: " + err.Error()}
	}
	go func() {
		_ = json.NewEncoder(cfgW).Encode(cfg)
		cfgW.Close()
	}()
	out, _ := io.ReadAll(io.LimitReader(stR, 1<<16))
	stR.Close()
	if len(out) > 0 {
		var m initMsg
		if err := json.Unmarshal(out, &m); err != nil || m.T != initMsgError {
			m = initMsg{T: initMsgError, Code: ErrCodeExecFailed, Message: strings.TrimSpace(string(out))}
		}
		return 0, &m
	}
	return p.Pid, nil
}

func readInitMsg(r *bufio.Reader, m *initMsg) error {
	line, err := r.ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return err
	}
	return json.Unmarshal(line, m)
}

// verifyInside checks, from within, that the sandbox is what bwrap was asked
// for. The runner checks the namespaces from outside as well.
func verifyInside() error {
	if os.Getpid() != 1 {
		return fmt.Errorf("sandbox init is pid %d, not 1: no private pid namespace", os.Getpid())
	}
	self, err := os.Readlink("/proc/self")
	if err != nil || self != "1" {
		return fmt.Errorf("/proc is not the sandbox's own (/proc/self is %q): refusing to run", self)
	}
	if m, err := os.ReadFile("/proc/self/uid_map"); err != nil || strings.Join(strings.Fields(string(m)), " ") == "0 0 4294967295" {
		return errors.New("still in the host's user namespace")
	}
	dev, err := os.ReadFile("/proc/self/net/dev")
	if err != nil {
		return fmt.Errorf("cannot read network interfaces: %v", err)
	}
	for _, line := range strings.Split(string(dev), "\n")[2:] {
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
		case "NoNewPrivs":
			if v != "1" {
				return errors.New("no_new_privs is not set")
			}
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/", &st); err != nil || st.Flags&unix.ST_RDONLY == 0 {
		return errors.New("the sandbox root is writable")
	}
	return nil
}

// execMain is the exec stage ("srt-mcp __srt-exec"): the last code of ours
// the command's process runs. It applies the rlimits (inside the user
// namespace, so RLIMIT_NPROC counts only this sandbox), closes every fd but
// stdio, sets no_new_privs and the seccomp filter, and execs the command.
// Failures go to PID 1 on fd 4 (close-on-exec: EOF there means success).
func execMain() int {
	unix.CloseOnExec(4)
	status := os.NewFile(4, "exec-status")
	fail := func(code string, rc int, format string, args ...any) int {
		b, _ := json.Marshal(initMsg{T: initMsgError, Code: code, Message: fmt.Sprintf(format, args...)})
		if status != nil {
			_, _ = status.Write(b)
		}
		return rc
	}
	cfgFile := os.NewFile(3, "exec-config")
	if cfgFile == nil || status == nil {
		fmt.Fprintln(os.Stderr, "srt-mcp: __srt-exec is internal; run srt-mcp exec instead")
		return 125
	}
	var cfg initConfig
	if err := json.NewDecoder(io.LimitReader(cfgFile, MaxSpecBytes)).Decode(&cfg); err != nil {
		return fail(ErrCodeInternal, 125, "exec stage: bad configuration: %v", err)
	}
	cfgFile.Close()
	if len(cfg.Argv) == 0 {
		return fail(ErrCodeInvalidSpec, 125, "empty command")
	}
	if err := unix.Chdir(cfg.Cwd); err != nil {
		return fail(ErrCodeInvalidCwd, 125, "cannot enter working directory %s: %v", cfg.Cwd, err)
	}
	if err := applyRlimits(cfg.Limits); err != nil {
		return fail(ErrCodeLimitUnenforced, 125, "%v", err)
	}
	path, code, err := lookPath(cfg.Argv[0], envValue(cfg.Env, "PATH"))
	if err != nil {
		rc := 127
		if code == ErrCodeNotExecutable {
			rc = 126
		}
		return fail(code, rc, "%v", err)
	}
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err := installSeccomp(); err != nil {
		return fail(ErrCodeSandboxFailed, 125, "seccomp: %v", err)
	}
	err = unix.Exec(path, cfg.Argv, cfg.Env)
	code = ErrCodeExecFailed
	rc := 126
	if errors.Is(err, unix.ENOENT) {
		code, rc = ErrCodeNotFound, 127
	} else if errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOEXEC) {
		code = ErrCodeNotExecutable
	}
	return fail(code, rc, "cannot execute %s: %v", cfg.Argv[0], err)
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
