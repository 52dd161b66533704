package kernel

// The protocol against the real Python kernel and the real interpreter.
// The process runs unsandboxed here (procHandle); the sandboxed path is
// covered by the integration suite.

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/srt-mcp/srt-mcp/runner"
)

type procHandle struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
	end   runner.Event
}

func (p *procHandle) Write(b []byte) (int, error)     { return p.stdin.Write(b) }
func (p *procHandle) CloseStdin() error               { return p.stdin.Close() }
func (p *procHandle) Resize(uint16, uint16) error     { return nil }
func (p *procHandle) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }
func (p *procHandle) Cancel(bool)                     { _ = p.cmd.Process.Kill() }
func (p *procHandle) Wait() runner.Event              { <-p.done; return p.end }
func (p *procHandle) Done() <-chan struct{}           { return p.done }

// localStart runs spec's argv as a plain child process, streaming its
// stdout and stderr as runner events.
func localStart(dir string) Starter {
	return func(spec runner.Spec, sink func(runner.Event)) (runner.Handle, error) {
		cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "MPLBACKEND=Agg", "MPLCONFIGDIR="+filepath.Join(dir, ".mpl"))
		stdin, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		errp, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		p := &procHandle{cmd: cmd, stdin: stdin, done: make(chan struct{})}
		var mu sync.Mutex
		var wg sync.WaitGroup
		pipe := func(r io.Reader, typ string) {
			defer wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := r.Read(buf)
				if n > 0 {
					mu.Lock()
					sink(runner.Event{Type: typ, Data: append([]byte(nil), buf[:n]...)})
					mu.Unlock()
				}
				if err != nil {
					return
				}
			}
		}
		wg.Add(2)
		go pipe(out, runner.EventStdout)
		go pipe(errp, runner.EventStderr)
		go func() {
			wg.Wait()
			_ = cmd.Wait()
			p.end = runner.Event{Type: runner.EventExit, ExitCode: cmd.ProcessState.ExitCode()}
			sink(p.end)
			close(p.done)
		}()
		return p, nil
	}
}

func startPython(t *testing.T) (*Kernel, string) {
	t.Helper()
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	dir := t.TempDir()
	argv, err := Argv("python", py)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	k, err := Start(ctx, "python", runner.Spec{Argv: argv}, localStart(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k, dir
}

type cellResult struct {
	stdout, stderr string
	end            runner.Event
	cell           *Cell
}

func run(t *testing.T, k *Kernel, code string, opt CellOptions) cellResult {
	t.Helper()
	var mu sync.Mutex
	var r cellResult
	c, err := RunCell(k, code, opt, func(ev runner.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch ev.Type {
		case runner.EventStdout:
			r.stdout += string(ev.Data)
		case runner.EventStderr:
			r.stderr += string(ev.Data)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("cell %q did not finish", code)
	}
	mu.Lock()
	defer mu.Unlock()
	r.end, r.cell = c.Wait(), c
	return r
}

func TestStatePersistsAndREPLValue(t *testing.T) {
	k, _ := startPython(t)
	if k.Version == "" {
		t.Error("no version in the ready frame")
	}
	r := run(t, k, "x = 42\nimport json as js", CellOptions{})
	if r.end.Type != runner.EventExit || r.end.ExitCode != 0 || r.stdout != "" {
		t.Fatalf("cell 1: %+v %q %q", r.end, r.stdout, r.stderr)
	}
	r = run(t, k, "y = x * 2", CellOptions{})
	r = run(t, k, "print(f'Result: {y}')\ny + 1", CellOptions{})
	if r.stdout != "Result: 84\n85\n" || r.end.ExitCode != 0 {
		t.Fatalf("state across cells: %q %q", r.stdout, r.stderr)
	}
	r = run(t, k, "import os\nos.system('echo from a subprocess; echo err >&2')", CellOptions{})
	if !strings.Contains(r.stdout, "from a subprocess\n") || !strings.Contains(r.stderr, "err\n") {
		t.Fatalf("fd-level output: %q %q", r.stdout, r.stderr)
	}
	info, err := k.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(info.Variables, ",") != "x,y" || strings.Join(info.Modules, ",") != "json,os" || info.ExecCount != 4 || info.Memory <= 0 {
		t.Fatalf("info: %+v", info)
	}
}

func TestExceptionIsExitOneWithTraceback(t *testing.T) {
	k, _ := startPython(t)
	r := run(t, k, "a = 1\nb = {'x': 1}\nb['sales_amount']", CellOptions{})
	if r.end.ExitCode != 1 || !strings.Contains(r.stderr, "Traceback") || !strings.Contains(r.stderr, "KeyError: 'sales_amount'") ||
		!strings.Contains(r.stderr, "b['sales_amount']") || strings.Contains(r.stderr, "run_cell") {
		t.Fatalf("exception: %+v\n%s", r.end, r.stderr)
	}
	if r := run(t, k, "print(a)", CellOptions{}); r.stdout != "1\n" {
		t.Fatalf("state after an exception: %q", r.stdout)
	}
	// sys.exit ends the cell as it ends a script (its status, a message
	// argument printed, no traceback); the kernel stays.
	for code, want := range map[string]struct {
		exit   int
		stderr string
	}{"raise SystemExit(3)": {3, ""}, "import sys; sys.exit()": {0, ""}, "import sys; sys.exit('bye')": {1, "bye\n"}} {
		r = run(t, k, code, CellOptions{})
		if r.end.ExitCode != want.exit || r.stderr != want.stderr || !k.Alive() {
			t.Fatalf("%s: %+v stderr %q alive=%v", code, r.end, r.stderr, k.Alive())
		}
	}
	if r := run(t, k, "print(a)", CellOptions{}); r.stdout != "1\n" {
		t.Fatalf("state after sys.exit: %q", r.stdout)
	}
}

func TestInterruptAndTimeout(t *testing.T) {
	k, _ := startPython(t)
	run(t, k, "keep = 'kept'", CellOptions{})
	start := time.Now()
	r := run(t, k, "while True: pass", CellOptions{Timeout: 500 * time.Millisecond})
	if r.end.Type != runner.EventTimeout || !strings.Contains(r.stderr, "KeyboardInterrupt") || r.cell.Restarted || time.Since(start) > 3*time.Second {
		t.Fatalf("an interrupted loop: %+v %q", r.end, r.stderr)
	}
	if r := run(t, k, "print(keep)", CellOptions{}); r.stdout != "kept\n" {
		t.Fatalf("the next cell after an interrupt: %q %q", r.stdout, r.stderr)
	}
	// A cell that ignores SIGINT: the kernel is killed and says so.
	r = run(t, k, "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(0.01)",
		CellOptions{Timeout: 300 * time.Millisecond, Grace: 500 * time.Millisecond})
	if r.end.Type != runner.EventTimeout || !r.cell.Restarted || !strings.Contains(r.end.Message, "restarted") {
		t.Fatalf("a wedged cell: %+v", r.end)
	}
	select {
	case <-k.Dead():
	case <-time.After(5 * time.Second):
		t.Fatal("the wedged kernel is still running")
	}
	if _, err := RunCell(k, "1", CellOptions{}, func(runner.Event) {}); err == nil {
		t.Fatal("a dead kernel accepted a cell")
	}
}

func TestCancelAndBusy(t *testing.T) {
	k, _ := startPython(t)
	var c *Cell
	done := make(chan runner.Event, 1)
	c, err := RunCell(k, "import time\ntime.sleep(30)", CellOptions{}, func(ev runner.Event) {
		if ev.Terminal() {
			done <- ev
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RunCell(k, "1", CellOptions{}, func(runner.Event) {}); err != ErrBusy {
		t.Fatalf("a second cell while one runs: %v", err)
	}
	ictx, icancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	start := time.Now()
	if _, err := k.Info(ictx); err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("Info during a cell must give up with its context: %v after %v", err, time.Since(start))
	}
	icancel()
	time.Sleep(200 * time.Millisecond)
	c.Cancel(false)
	select {
	case ev := <-done:
		if ev.Type != runner.EventCancelled {
			t.Fatalf("cancel: %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancel did not end the cell")
	}
	if r := run(t, k, "2+2", CellOptions{}); r.stdout != "4\n" {
		t.Fatalf("after cancel: %q", r.stdout)
	}
}

func TestOutputCapAndFigures(t *testing.T) {
	k, dir := startPython(t)
	r := run(t, k, "print('x' * 10000)", CellOptions{MaxOutput: 100})
	if len(r.stdout) != 100 || len(r.end.Truncated) != 1 || r.end.Truncated[0] != "stdout" {
		t.Fatalf("cap: %d %v", len(r.stdout), r.end.Truncated)
	}
	if exec.Command("/usr/bin/python3", "-c", "import matplotlib").Run() != nil {
		t.Skip("no matplotlib")
	}
	r = run(t, k, "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t')", CellOptions{})
	if r.end.ExitCode != 0 {
		t.Fatalf("plot: %q", r.stderr)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "figure_*.png"))
	if len(matches) != 1 {
		t.Fatalf("an open figure must be saved as a PNG: %v (stderr %q)", matches, r.stderr)
	}
}

func TestNodeKernel(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node")
	}
	dir := t.TempDir()
	argv, _ := Argv("javascript", node)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	k, err := Start(ctx, "javascript", runner.Spec{Argv: argv}, localStart(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	r := run(t, k, "var x = 42; let y = 2; const path = require('path'); console.log('hi', x)", CellOptions{})
	if r.stdout != "hi 42\n" || r.end.ExitCode != 0 {
		t.Fatalf("cell 1: %q %q %+v", r.stdout, r.stderr, r.end)
	}
	r = run(t, k, "x * y", CellOptions{})
	if r.stdout != "84\n" {
		t.Fatalf("state across cells: %q %q", r.stdout, r.stderr)
	}
	r = run(t, k, "require('child_process').execSync('echo from-child', {stdio: 'inherit'}); 1", CellOptions{})
	if !strings.Contains(r.stdout, "from-child\n") {
		t.Fatalf("a child's output: %q", r.stdout)
	}
	r = run(t, k, "null.foo", CellOptions{})
	if r.end.ExitCode != 1 || !strings.Contains(r.stderr, "TypeError") {
		t.Fatalf("exception: %+v %q", r.end, r.stderr)
	}
	r = run(t, k, "await Promise.resolve(0); 1", CellOptions{})
	r = run(t, k, "Promise.resolve(7)", CellOptions{})
	if r.stdout != "7\n" {
		t.Fatalf("a promise's value: %q %q", r.stdout, r.stderr)
	}
	r = run(t, k, "while (true) {}", CellOptions{Timeout: 300 * time.Millisecond})
	if r.end.Type != runner.EventTimeout || r.cell.Restarted {
		t.Fatalf("interrupting a loop: %+v %q", r.end, r.stderr)
	}
	if r := run(t, k, "x", CellOptions{}); r.stdout != "42\n" {
		t.Fatalf("after the interrupt: %q %q", r.stdout, r.stderr)
	}
	info, err := k.Info(context.Background())
	if err != nil || strings.Join(info.Variables, ",") != "path,x,y" || strings.Join(info.Modules, ",") != "child_process,path" {
		t.Fatalf("info: %+v %v", info, err)
	}
}

func startNode(t *testing.T) *Kernel {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node")
	}
	argv, _ := Argv("javascript", node)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	k, err := Start(ctx, "javascript", runner.Spec{Argv: argv}, localStart(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

// memWatch measures the Go heap while a cell runs: the bytes allocated in
// all and the peak growth of the live heap.
type memWatch struct {
	start runtime.MemStats
	peak  uint64
	stop  chan struct{}
	done  chan struct{}
}

func watchMemory() *memWatch {
	runtime.GC()
	w := &memWatch{stop: make(chan struct{}), done: make(chan struct{})}
	runtime.ReadMemStats(&w.start)
	go func() {
		defer close(w.done)
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > w.start.HeapAlloc && m.HeapAlloc-w.start.HeapAlloc > w.peak {
				w.peak = m.HeapAlloc - w.start.HeapAlloc
			}
			select {
			case <-w.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return w
}

// end returns the bytes allocated since the start and the peak growth.
func (w *memWatch) end() (allocated, peak uint64) {
	close(w.stop)
	<-w.done
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc - w.start.TotalAlloc, w.peak
}

// A huge trailing value is cut in the interpreter (not sent whole and
// buffered by the server), says so, and costs the server little memory.
func TestHugeREPLValueIsBoundedAtSource(t *testing.T) {
	k, _ := startPython(t)
	for _, max := range []int64{100 << 10, 0} {
		w := watchMemory()
		start := time.Now()
		r := run(t, k, "'x' * 60_000_000", CellOptions{MaxOutput: max})
		took := time.Since(start)
		allocated, peak := w.end()
		t.Logf("cap %d: %v, %d bytes shown, Go heap: %d MB allocated, peak +%d MB", max, took, len(r.stdout), allocated>>20, peak>>20)
		bound := max
		if bound == 0 {
			bound = 1 << 20
		}
		if r.end.Type != runner.EventExit || r.end.ExitCode != 0 || int64(len(r.stdout)) > bound ||
			!strings.HasPrefix(r.stdout, "'xxxx") || !strings.Contains(r.stdout, "truncated") || !strings.Contains(r.stdout, "60000002 bytes") ||
			len(r.end.Truncated) != 1 || r.end.Truncated[0] != "stdout" {
			t.Fatalf("cap %d: %+v, %d bytes: %.80q … %q", max, r.end, len(r.stdout), r.stdout, r.stdout[max64(0, len(r.stdout)-100):])
		}
		if took > 5*time.Second || allocated > 64<<20 || peak > 64<<20 {
			t.Fatalf("cap %d: a huge value took %v and %d MB of allocations (peak +%d MB) in the server", max, took, allocated>>20, peak>>20)
		}
	}
	if r := run(t, k, "len(_)", CellOptions{}); r.stdout != "60000000\n" {
		t.Fatalf("the value itself is whole: %q %q", r.stdout, r.stderr)
	}
	// The same in Node (an object of many keys: util.inspect cuts strings
	// and arrays, not objects).
	n := startNode(t)
	w := watchMemory()
	start := time.Now()
	r := run(t, n, "const o = {}; for (let i = 0; i < 1e6; i++) o['key' + i] = i; o", CellOptions{MaxOutput: 100 << 10})
	took := time.Since(start)
	allocated, peak := w.end()
	t.Logf("node: %v, %d bytes shown, Go heap: %d MB allocated, peak +%d MB", took, len(r.stdout), allocated>>20, peak>>20)
	if r.end.ExitCode != 0 || len(r.stdout) > 100<<10 || !strings.HasPrefix(r.stdout, "{") || !strings.Contains(r.stdout, "truncated") ||
		len(r.end.Truncated) != 1 || took > 10*time.Second || allocated > 64<<20 || peak > 64<<20 {
		t.Fatalf("node: %+v in %v (%d MB allocated, peak +%d MB), %d bytes: %q", r.end, took, allocated>>20, peak>>20, len(r.stdout), r.stdout[max64(0, len(r.stdout)-100):])
	}
}

func max64(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// Output far beyond the cap is counted and dropped in the interpreter, so
// it costs no more than the interpreter's own writes, and the server never
// sees it.
func TestOutputCapAppliedAtSource(t *testing.T) {
	k, _ := startPython(t)
	n := startNode(t)
	for _, c := range []struct {
		name, code, stream, char string
		k                        *Kernel
	}{
		{"python print", "print('x' * 200_000_000)", "stdout", "x", k},
		{"python fd 1", "import os\nfor _ in range(200): os.write(1, b'y' * 1_000_000)", "stdout", "y", k},
		{"python stderr", "import sys\nfor _ in range(200): sys.stderr.write('z' * 1_000_000)", "stderr", "z", k},
		{"node write", "process.stdout.write('x'.repeat(200e6)); 1", "stdout", "x", n},
		{"node console.error", "for (let i = 0; i < 200; i++) console.error('e'.repeat(1e6))", "stderr", "e", n},
	} {
		w := watchMemory()
		start := time.Now()
		r := run(t, c.k, c.code, CellOptions{MaxOutput: 1000})
		took := time.Since(start)
		allocated, peak := w.end()
		t.Logf("%s: 200 MB printed in %v, Go heap: %d MB allocated, peak +%d MB", c.name, took, allocated>>20, peak>>20)
		got := r.stdout
		if c.stream == "stderr" {
			got = r.stderr
		}
		if r.end.ExitCode != 0 || got != strings.Repeat(c.char, 1000) || strings.Join(r.end.Truncated, ",") != c.stream {
			t.Errorf("%s: %+v, %d bytes (%.200q; stderr %.200q)", c.name, r.end, len(got), got, r.stderr)
		}
		if took > 2*time.Second || allocated > 32<<20 {
			t.Errorf("%s: 200 MB beyond the cap took %v and %d MB of allocations in the server", c.name, took, allocated>>20)
		}
	}
	for _, k := range []*Kernel{k, n} {
		if r := run(t, k, "print('after')", CellOptions{MaxOutput: 1000}); k == n {
			// (node has no print: the cell fails, its stderr is short)
			if len(r.end.Truncated) != 0 {
				t.Errorf("node: the cap is per cell: %+v", r.end)
			}
		} else if r.stdout != "after\n" || len(r.end.Truncated) != 0 {
			t.Errorf("the cap is per cell: %q %+v", r.stdout, r.end)
		}
	}
	// A character is not split at the cap, nor between pieces.
	for code, k := range map[string]*Kernel{"print('é' * 1000)": k, "console.log('é'.repeat(1000))": n} {
		if r := run(t, k, code, CellOptions{MaxOutput: 101}); r.stdout != strings.Repeat("é", 50) || len(r.end.Truncated) != 1 {
			t.Errorf("%s: a cut at the cap: %q %+v", code, r.stdout, r.end)
		}
	}
	for code, k := range map[string]*Kernel{"print('é' * 300_000)": k, "console.log('é'.repeat(300000))": n} {
		if r := run(t, k, code, CellOptions{MaxOutput: 1 << 20}); r.stdout != strings.Repeat("é", 300_000)+"\n" || len(r.end.Truncated) != 0 {
			t.Errorf("%s: %d bytes, %d of them U+FFFD, %+v", code, len(r.stdout), strings.Count(r.stdout, "\uFFFD"), r.end)
		}
	}
}

// The server reads frames in linear time and holds no line longer than
// the bound: a longer frame is an error for its cell, the kernel goes on.
func TestFrameReaderIsLinearAndBounded(t *testing.T) {
	k := &Kernel{Language: "python", waiters: map[uint64]func(Frame){}, ready: make(chan Frame, 1), dead: make(chan struct{})}
	var mu sync.Mutex
	var got []Frame
	k.waiters[1] = func(f Frame) {
		mu.Lock()
		got = append(got, f)
		mu.Unlock()
	}
	k.current = 1
	huge := append([]byte(`{"id":1,"ev":"result","repr":"'`), bytes.Repeat([]byte("x"), 64<<20)...)
	huge = append(huge, "'\"}\n{\"id\":1,\"ev\":\"stdout\",\"data\":\"after\\n\"}\n{\"id\":1,\"ev\":\"done\",\"ok\":true}\n"...)
	w := watchMemory()
	start := time.Now()
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		for b := huge; len(b) > 0; {
			n := min(len(b), 32<<10)
			k.onEvent(runner.Event{Type: runner.EventStdout, Data: b[:n]})
			b = b[n:]
		}
	}()
	select {
	case <-fed:
	case <-time.After(5 * time.Second):
		t.Fatalf("64 MB of one frame not read in 5 s")
	}
	took := time.Since(start)
	allocated, peak := w.end()
	t.Logf("64 MB frame: %v, Go heap: %d MB allocated, peak +%d MB", took, allocated>>20, peak>>20)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got[0].Ev != "oversize" || !strings.Contains(got[0].Data, "result") || got[1].Data != "after\n" || got[2].Ev != "done" {
		t.Fatalf("frames: %+v", got)
	}
	if allocated > 48<<20 || peak > 48<<20 {
		t.Fatalf("reading one 64 MB frame allocated %d MB (peak +%d MB)", allocated>>20, peak>>20)
	}

	// Live, with a small bound: the frame is an error for its cell, the
	// kernel goes on; a Node child's long line of plain output is passed on.
	m := maxFrame
	t.Cleanup(func() { maxFrame = m }) // after the kernels below are closed
	maxFrame = 4096
	py, _ := startPython(t)
	r := run(t, py, "v = 'y' * 100_000\nprint('before')\nv", CellOptions{})
	if r.end.ExitCode != 1 || r.stdout != "before\n" || !strings.Contains(r.stderr, `srt-mcp: the kernel sent a "result" message larger than 4096 bytes`) {
		t.Fatalf("an oversize frame: %+v %q %q", r.end, r.stdout, r.stderr)
	}
	if r := run(t, py, "len(v)", CellOptions{}); r.stdout != "100000\n" || r.end.ExitCode != 0 {
		t.Fatalf("after an oversize frame: %+v %q %q", r.end, r.stdout, r.stderr)
	}
	n := startNode(t)
	r = run(t, n, "require('child_process').execSync(\"head -c 100000 /dev/zero | tr '\\\\0' z; echo; echo next\", {stdio: 'inherit'}); 1", CellOptions{})
	if r.stdout != strings.Repeat("z", 100_000)+"\nnext\n1\n" || r.end.ExitCode != 0 {
		t.Fatalf("a child's long line: %+v %d bytes %.100q %q", r.end, len(r.stdout), r.stdout, r.stderr)
	}
}
