package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/srt-mcp/srt-mcp/policy"
)

func requireBwrap(t *testing.T) {
	t.Helper()
	if _, err := FindBwrap(); err != nil {
		t.Skip("bubblewrap is not installed (apt-get install -y bubblewrap)")
	}
}

// collector records a run's events and checks the stream's invariants.
type collector struct {
	mu     sync.Mutex
	events []Event
}

func (c *collector) sink(e Event) {
	c.mu.Lock()
	c.events = append(c.events, e)
	c.mu.Unlock()
}

func (c *collector) check(t *testing.T) (stdout, stderr string, end Event) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out, errb bytes.Buffer
	terminals := 0
	for i, e := range c.events {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: %+v", i, e.Seq, c.events)
		}
		if e.TS <= 0 {
			t.Fatalf("event %d has no timestamp", i)
		}
		switch e.Type {
		case EventStdout:
			out.Write(e.Data)
		case EventStderr:
			errb.Write(e.Data)
		}
		if e.Terminal() {
			terminals++
			end = e
			if i != len(c.events)-1 {
				t.Fatalf("terminal event %q is not last", e.Type)
			}
		}
	}
	if terminals != 1 {
		t.Fatalf("want exactly one terminal event, got %d: %+v", terminals, c.events)
	}
	if end.Type != EventError && (len(c.events) == 0 || c.events[0].Type != EventReady) {
		t.Fatalf("first event is not ready: %+v", c.events)
	}
	return out.String(), errb.String(), end
}

// reachableDir is a fresh directory the sandbox user can enter and read
// when the tests run as root (sandboxes then run as DefaultSandboxUser).
func reachableDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	if os.Geteuid() == 0 {
		_ = os.Chmod(filepath.Dir(d), 0o711)
		_ = os.Chmod(d, 0o755)
	}
	return d
}

func testSpec(t *testing.T, argv ...string) Spec {
	return Spec{Version: SpecVersion, ID: t.Name(), Argv: argv, Cwd: reachableDir(t), Stdin: StdinNull,
		Policy: policy.Policy{Limits: policy.Limits{MaxProcesses: 256, MaxMemoryBytes: 2 << 30}}}
}

// both runs fn with the in-process runner and with a re-executed runner
// process (the path the MCP server uses), for both PID 1 variants.
func both(t *testing.T, fn func(t *testing.T, start func(Spec, func(Event)) Handle)) {
	requireBwrap(t)
	for _, init := range []string{"", InitSRT} {
		name := "landlock"
		if init == InitSRT {
			name = "srt-init"
		}
		t.Run("inproc-"+name, func(t *testing.T) {
			fn(t, func(s Spec, sink func(Event)) Handle {
				s.Init = init
				r, _ := Start(context.Background(), s, sink, Options{})
				return r
			})
		})
		t.Run("process-"+name, func(t *testing.T) {
			fn(t, func(s Spec, sink func(Event)) Handle {
				s.Init = init
				p, err := StartProcess(s, sink)
				if err != nil {
					t.Fatal(err)
				}
				return p
			})
		})
	}
}

func TestRunExitAndOutput(t *testing.T) {
	both(t, func(t *testing.T, start func(Spec, func(Event)) Handle) {
		var c collector
		h := start(testSpec(t, "/bin/sh", "-c", "echo out; echo err >&2; printf '\\377\\376'; exit 3"), c.sink)
		h.Wait()
		out, errs, end := c.check(t)
		if end.Type != EventExit || end.ExitCode != 3 {
			t.Fatalf("end %+v", end)
		}
		if out != "out\n\xff\xfe" || errs != "err\n" {
			t.Fatalf("stdout %q stderr %q", out, errs)
		}
	})
}

// Spec.Report: the command's fd 3 is a pipe to the runner and its first
// line comes back on the exit event; without it the command has no fd 3.
func TestRunReport(t *testing.T) {
	both(t, func(t *testing.T, start func(Spec, func(Event)) Handle) {
		var c collector
		s := testSpec(t, "/bin/sh", "-c", "echo step_failed >&3; echo more >&3; exec 3>&-; echo out; exit 86")
		s.Report = true
		h := start(s, c.sink)
		h.Wait()
		out, _, end := c.check(t)
		if end.Type != EventExit || end.ExitCode != 86 || end.Report != "step_failed" || out != "out\n" {
			t.Fatalf("with a report fd: end %+v, stdout %q", end, out)
		}
		var c2 collector
		h = start(testSpec(t, "/bin/sh", "-c", "if [ -e /proc/self/fd/3 ]; then echo open; else echo closed; fi; echo x >&3; exit 86"), c2.sink)
		h.Wait()
		out, _, end = c2.check(t)
		if end.Type != EventExit || end.ExitCode != 86 || end.Report != "" || out != "closed\n" {
			t.Fatalf("without a report fd: end %+v, stdout %q", end, out)
		}
	})
}

func TestRunStdinPipe(t *testing.T) {
	both(t, func(t *testing.T, start func(Spec, func(Event)) Handle) {
		var c collector
		s := testSpec(t, "/bin/sh", "-c", "read a; echo got:$a; cat")
		s.Stdin = StdinPipe
		h := start(s, c.sink)
		if _, err := h.Write([]byte("one\ntwo\n")); err != nil {
			t.Fatal(err)
		}
		if err := h.CloseStdin(); err != nil {
			t.Fatal(err)
		}
		h.Wait()
		out, _, end := c.check(t)
		if end.ExitCode != 0 || out != "got:one\ntwo\n" {
			t.Fatalf("out %q end %+v", out, end)
		}
		if _, err := h.Write([]byte("late")); err == nil {
			t.Fatal("a write after exit succeeded")
		}
	})
}

func TestRunPTY(t *testing.T) {
	both(t, func(t *testing.T, start func(Spec, func(Event)) Handle) {
		var c collector
		s := testSpec(t, "/bin/sh", "-c", "tty; stty size; read x; echo hi-$x")
		s.Stdin, s.Rows, s.Cols = StdinPTY, 30, 100
		h := start(s, c.sink)
		_, _ = h.Write([]byte("bob\n"))
		h.Wait()
		out, _, end := c.check(t)
		if end.ExitCode != 0 || !strings.Contains(out, "/dev/pts/") || !strings.Contains(out, "30 100") || !strings.Contains(out, "hi-bob") {
			t.Fatalf("out %q end %+v", out, end)
		}
	})
}

func TestRunCancel(t *testing.T) {
	both(t, func(t *testing.T, start func(Spec, func(Event)) Handle) {
		for _, force := range []bool{false, true} {
			var c collector
			// The trap shows SIGTERM reached the command before the kill.
			h := start(testSpec(t, "/bin/sh", "-c", "trap 'echo term; exit 9' TERM; echo up; while :; do sleep 0.05; done"), c.sink)
			waitFor(t, &c, "up")
			began := time.Now()
			h.Cancel(force)
			h.Wait()
			out, _, end := c.check(t)
			if end.Type != EventCancelled {
				t.Fatalf("force=%v: end %+v", force, end)
			}
			if !force && !strings.Contains(out, "term") {
				t.Fatalf("graceful cancel did not deliver SIGTERM: %q", out)
			}
			if time.Since(began) > 3*time.Second {
				t.Fatalf("force=%v: cancel took %s", force, time.Since(began))
			}
		}
	})
}

func TestRunTimeoutKillsIgnorers(t *testing.T) {
	both(t, func(t *testing.T, start func(Spec, func(Event)) Handle) {
		var c collector
		s := testSpec(t, "/bin/sh", "-c", "trap '' TERM; sleep 30")
		s.Policy.Limits.Timeout = policy.Duration(300 * time.Millisecond)
		s.Grace = policy.Duration(300 * time.Millisecond)
		began := time.Now()
		h := start(s, c.sink)
		h.Wait()
		_, _, end := c.check(t)
		if end.Type != EventTimeout || end.TimeoutSeconds != 0.3 {
			t.Fatalf("end %+v", end)
		}
		if d := time.Since(began); d > 3*time.Second {
			t.Fatalf("timeout took %s", d)
		}
	})
}

func TestRunOutputCap(t *testing.T) {
	both(t, func(t *testing.T, start func(Spec, func(Event)) Handle) {
		var c collector
		s := testSpec(t, "/bin/sh", "-c", "head -c 5000000 /dev/zero; echo done >&2")
		s.Policy.Limits.MaxOutputBytes = 1000
		h := start(s, c.sink)
		h.Wait()
		out, errs, end := c.check(t)
		if len(out) != 1000 || errs != "done\n" || end.ExitCode != 0 || len(end.Truncated) != 1 || end.Truncated[0] != "stdout" {
			t.Fatalf("len %d stderr %q end %+v", len(out), errs, end)
		}
	})
}

func TestRunErrors(t *testing.T) {
	both(t, func(t *testing.T, start func(Spec, func(Event)) Handle) {
		for _, tc := range []struct {
			argv []string
			code string
		}{
			{[]string{"no-such-command"}, ErrCodeNotFound},
			{[]string{"/etc/passwd"}, ErrCodeNotExecutable},
		} {
			var c collector
			h := start(testSpec(t, tc.argv...), c.sink)
			h.Wait()
			_, _, end := c.check(t)
			if end.Type != EventError || end.ErrCode != tc.code {
				t.Fatalf("%v: end %+v", tc.argv, end)
			}
		}
		var c collector
		s := testSpec(t, "/bin/true")
		s.Policy.Filesystem.AllowWrite = []string{"/no/such/dir"}
		h := start(s, c.sink)
		h.Wait()
		_, _, end := c.check(t)
		if end.Type != EventError || end.ErrCode != ErrCodeInvalidPolicy || !strings.Contains(end.Message, "filesystem.allow_write[0]") {
			t.Fatalf("end %+v", end)
		}
	})
}

// TestRunnerDiesWithParent kills -9 a process that started a runner: the
// runner, bwrap and the sandboxed command must all be gone.
func TestRunnerDiesWithParent(t *testing.T) {
	requireBwrap(t)
	if os.Getenv("SRT_TEST_PARENT") == "1" {
		p, err := StartProcess(Spec{Version: SpecVersion, ID: "orphan", Argv: []string{"/bin/sleep", "300.4242"}, Cwd: os.TempDir(), Stdin: StdinNull}, func(e Event) { os.Stderr.WriteString(e.Type + " " + e.Message + "\n") })
		if err != nil {
			os.Exit(3)
		}
		_ = p
		time.Sleep(time.Hour)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunnerDiesWithParent$")
	cmd.Env = append(os.Environ(), "SRT_TEST_PARENT=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !sleeperRunning() {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("the sandboxed sleep never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("sandboxed sleep running (pid %s); killing its grandparent %d", sleeperPid(), cmd.Process.Pid)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	deadline = time.Now().Add(3 * time.Second)
	for sleeperRunning() {
		if time.Now().After(deadline) {
			t.Fatal("the sandboxed sleep survived kill -9 of its parent")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func sleeperRunning() bool { return sleeperPid() != "" }

func sleeperPid() string {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.HasPrefix(b, []byte("/bin/sleep\x00300.4242")) {
			return e.Name()
		}
	}
	return ""
}

func waitFor(t *testing.T, c *collector, text string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		var all []byte
		ended := false
		for _, e := range c.events {
			all = append(all, e.Data...)
			ended = ended || e.Terminal()
		}
		events := fmt.Sprintf("%+v", c.events)
		c.mu.Unlock()
		if bytes.Contains(all, []byte(text)) {
			return
		}
		if ended {
			t.Fatalf("the run ended before printing %q: %s", text, events)
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Fatalf("timed out waiting for %q: %+v", text, c.events)
}

// A Pool hands out runners started ahead of need: each run works as with
// a fresh runner, the pool refills in the background, a pooled runner that
// died is skipped, and Close ends the waiting ones.
func TestPool(t *testing.T) {
	requireBwrap(t)
	p := NewPool("", "", 1)
	idle := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.idle)
	}
	waitIdle := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for idle() != n {
			if time.Now().After(deadline) {
				t.Fatalf("the pool holds %d runners, want %d", idle(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitIdle(1)
	// One runner serves the runs one after another, and each sandbox sees
	// the same descriptors: nothing of an earlier run reaches a later one.
	var pids []int
	fdsSeen := ""
	for i := 0; i < 3; i++ {
		var c collector
		h, err := p.Start(testSpec(t, "/bin/sh", "-c", fmt.Sprintf("echo run%d; ls /proc/self/fd | tr '\\n' ' ' >&2", i)), c.sink)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, h.Pid())
		h.Wait()
		out, errOut, end := c.check(t)
		if end.Type != EventExit || end.ExitCode != 0 || out != fmt.Sprintf("run%d\n", i) {
			t.Fatalf("run %d: %q %q %+v", i, out, errOut, end)
		}
		if i == 0 {
			fdsSeen = errOut
		} else if errOut != fdsSeen {
			t.Fatalf("run %d's sandbox has fds %q, the first had %q", i, errOut, fdsSeen)
		}
		waitIdle(1)
	}
	if pids[0] != pids[1] || pids[1] != pids[2] {
		t.Fatalf("the pooled runner was not reused: runner pids %v", pids)
	}
	// A run whose runner is killed: that runner is not reused.
	{
		var c collector
		h, err := p.Start(testSpec(t, "/bin/sleep", "30"), c.sink)
		if err != nil {
			t.Fatal(err)
		}
		killed := h.Pid()
		h.Kill()
		h.Wait()
		waitIdle(1)
		var c2 collector
		h2, err := p.Start(testSpec(t, "/bin/true"), c2.sink)
		if err != nil {
			t.Fatal(err)
		}
		if h2.Pid() == killed {
			t.Fatal("a killed runner went back to the pool")
		}
		h2.Wait()
		waitIdle(1)
	}
	// A waiting runner killed by someone: the next start does not use it.
	p.mu.Lock()
	_ = p.idle[0].cmd.Process.Kill()
	p.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	var c collector
	h, err := p.Start(testSpec(t, "/bin/sh", "-c", "echo after"), c.sink)
	if err != nil {
		t.Fatal(err)
	}
	h.Wait()
	if out, _, end := c.check(t); out != "after\n" || end.Type != EventExit {
		t.Fatalf("after a dead pooled runner: %q %+v", out, end)
	}
	waitIdle(1)
	p.mu.Lock()
	pid := p.idle[0].cmd.Process.Pid
	p.mu.Unlock()
	p.Close()
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("Close left the waiting runner %d running", pid)
	}
}

// A pool given a stage binary hands it to its runners (their fd 6), and
// their sandboxes run it instead of the runner's own binary: here a script
// that names itself and fails, so the run's error carries its words.
func TestPoolStage(t *testing.T) {
	requireBwrap(t)
	stage := filepath.Join(t.TempDir(), "stage")
	if err := os.WriteFile(stage, []byte("#!/bin/sh\necho \"stage-from-pool $1\" >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := NewPool("", stage, 1)
	defer p.Close()
	var c collector
	h, err := p.Start(testSpec(t, "/bin/true"), c.sink)
	if err != nil {
		t.Fatal(err)
	}
	end := h.Wait()
	if end.Type != EventError || !strings.Contains(end.Message, "stage-from-pool __srt-") {
		t.Fatalf("the sandbox did not run the pool's stage: %+v", end)
	}
	// Without one, the runner's own binary runs inside, as before.
	q := NewPool("", "", 1)
	defer q.Close()
	var c2 collector
	h, err = q.Start(testSpec(t, "/bin/sh", "-c", "echo own"), c2.sink)
	if err != nil {
		t.Fatal(err)
	}
	h.Wait()
	if out, _, end := c2.check(t); end.Type != EventExit || out != "own\n" {
		t.Fatalf("%q %+v", out, end)
	}
}

// --runner-pool 0: no runner waits and none is reused (a process per
// execution), and none is left when the executions ended.
func TestPoolSizeZero(t *testing.T) {
	requireBwrap(t)
	p := NewPool("", "", 0)
	defer p.Close()
	var pids []int
	for i := 0; i < 2; i++ {
		var c collector
		h, err := p.Start(testSpec(t, "/bin/true"), c.sink)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, h.Pid())
		if end := h.Wait(); end.Type != EventExit || end.ExitCode != 0 {
			t.Fatalf("%+v", end)
		}
	}
	if pids[0] == pids[1] {
		t.Fatalf("a pool of size 0 reused runner %d", pids[0])
	}
	time.Sleep(100 * time.Millisecond)
	p.mu.Lock()
	idle, soon := len(p.idle), p.soon
	p.mu.Unlock()
	if idle != 0 || soon != 0 {
		t.Fatalf("a pool of size 0 holds %d idle runners, counts %d returning", idle, soon)
	}
	for _, pid := range pids {
		if processAlive(pid) {
			t.Errorf("runner %d still runs", pid)
		}
	}
}

// Spec.Direct: a simple command runs without its shell, in the environment
// bash would have given it; a program that is not found or cannot be
// executed, or an environment bash would act on, leaves it to the shell.
func TestRunDirect(t *testing.T) {
	both(t, func(t *testing.T, start func(Spec, func(Event)) Handle) {
		run := func(s Spec) (string, string, Event) {
			t.Helper()
			var c collector
			h := start(s, c.sink)
			h.Wait()
			return c.check(t)
		}
		dir := reachableDir(t)
		shell := filepath.Join(dir, "shell")
		if err := os.WriteFile(shell, []byte("#!/bin/sh\necho shell-ran\nexec /bin/bash \"$@\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "noshebang"), []byte("echo script-ran\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		spec := func(cmd string, bash bool) Spec {
			s := testSpec(t, shell, "-c", cmd)
			s.Cwd = dir
			if bash {
				s.Argv[0] = "/bin/bash"
			} else if w, ok := SimpleCommand(cmd); ok {
				s.Direct = w
			} else {
				t.Fatalf("%q is not a simple command", cmd)
			}
			return s
		}
		sorted := func(s string) string {
			l := strings.Split(strings.TrimSpace(s), "\n")
			sort.Strings(l)
			return strings.Join(l, "\n")
		}

		direct, _, end := run(spec("env", false))
		if end.Type != EventExit || end.ExitCode != 0 || strings.Contains(direct, "shell-ran") {
			t.Fatalf("env ran by the shell or failed: %+v\n%s", end, direct)
		}
		viaBash, _, _ := run(spec("env", true))
		if sorted(direct) != sorted(viaBash) {
			t.Errorf("the environment differs from bash's:\ndirect:\n%s\nbash -c:\n%s", sorted(direct), sorted(viaBash))
		}

		out, errs, end := run(spec("no-such-program-srt", false))
		if end.Type != EventExit || end.ExitCode != 127 || out != "shell-ran\n" || !strings.Contains(errs, "no-such-program-srt: command not found") {
			t.Errorf("a missing program: %+v stdout %q stderr %q; want the shell's own error", end, out, errs)
		}
		out, _, end = run(spec("./noshebang", false))
		if end.Type != EventExit || end.ExitCode != 0 || out != "shell-ran\nscript-ran\n" {
			t.Errorf("a script without #!: %+v stdout %q; want the shell to run it", end, out)
		}
		s := spec("env", false)
		s.Env = map[string]string{"BASH_ENV": "/dev/null"}
		if out, _, _ = run(s); !strings.HasPrefix(out, "shell-ran\n") {
			t.Errorf("with BASH_ENV set the shell must run the command: %q", out)
		}
	})
}
