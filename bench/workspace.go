package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// workspace measures stateful workspaces on a real srt-mcp serve:
// a warm cell through MCP over Streamable HTTP; the first
// `import pandas, seaborn` of a new workspace with the warm pool and
// without; and the memory of an idle warm session beyond its interpreter.
func (s *suite) workspace() error {
	rounds := s.Rounds
	backend := []string{"--backend", "native"}
	if s.Docker {
		backend = []string{"--backend", "docker", "--image", s.Image}
	}
	backend = append(backend, "--rate-limit", "1000000") // the bench is one fast client
	warm, err := startServer(s.Binary, append(backend, "--warm-pool", "2")...)
	if err != nil {
		return fail(err.Error())
	}
	defer warm.stop()
	cold, err := startServer(s.Binary, append(backend, "--warm-pool", "0")...)
	if err != nil {
		return fail(err.Error())
	}
	defer cold.stop()
	cell := func(b *server, code string) (float64, error) {
		start := time.Now()
		sc, err := b.tool("execute_code", map[string]any{"code": code, "language": "python"})
		if err != nil {
			return 0, err
		}
		if fmt.Sprint(sc["exit_code"]) != "0" {
			return 0, fmt.Errorf("cell %q: %v", code, sc)
		}
		return sinceMS(start), nil
	}
	// 1. A warm cell: the workspace exists, its kernel runs.
	if _, err := cell(cold, "x = 1"); err != nil {
		return fail(err.Error())
	}
	var warmMS []float64
	for i := 0; i < s.Warmup+rounds*5; i++ {
		ms, err := cell(cold, "x + 1")
		if err != nil {
			return fail(err.Error())
		}
		if i >= s.Warmup {
			warmMS = append(warmMS, ms)
		}
	}
	// 2. The first import of a new workspace (a new MCP session each).
	first := func(b *server) (float64, error) {
		nb := &server{url: b.url, cl: b.cl}
		if _, err := nb.rpc("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "bench", "version": "1"}}); err != nil {
			return 0, err
		}
		_, _ = nb.rpc("notifications/initialized", nil)
		ms, err := cell(nb, "import pandas, seaborn")
		_ = nb.deleteSession() // its workspace closes with it
		return ms, err
	}
	waitPool := func() error {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			h, err := warm.health()
			if err == nil && h["warm_pool_ready"] == float64(2) {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the warm pool did not fill: %v %v", h, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var poolMS, coldMS []float64
	n := min(rounds, 10)
	for i := 0; i < n; i++ {
		if err := waitPool(); err != nil {
			return fail(err.Error())
		}
		a, err := first(warm)
		if err != nil {
			return fail(err.Error())
		}
		b, err := first(cold)
		if err != nil {
			return fail(err.Error())
		}
		poolMS, coldMS = append(poolMS, a), append(coldMS, b)
	}
	// 3. Memory of the idle warm sessions.
	if err := waitPool(); err != nil {
		return fail(err.Error())
	}
	interp, overhead, sessions := kernelMemory(warm.cmd.Process.Pid)

	s.printf("%-52s %9s %9s %8s\n", "stateful workspaces ("+backend[1]+" backend)", "p50", "p99", "goal")
	s.printf("%-52s %7.2fms %7.2fms %8s\n", "warm cell execute_code(\"x + 1\"), MCP over HTTP", median(warmMS), pct(warmMS, 0.99), "<2/<10")
	s.printf("%-52s %7.1fms %7.1fms %8s\n", "first \"import pandas, seaborn\", warm pool", median(poolMS), pct(poolMS, 0.99), "<100")
	s.printf("%-52s %7.1fms %7.1fms %8s\n", "first \"import pandas, seaborn\", no pool", median(coldMS), pct(coldMS, 0.99), "~900")
	if sessions > 0 {
		s.printf("\nidle warm sessions: %d; per session: interpreter %.1f MB PSS, sandbox and runner beyond it %.1f MB PSS (goal < 40 MB)\n",
			sessions, float64(interp)/float64(sessions)/(1<<20), float64(overhead)/float64(sessions)/(1<<20))
	} else {
		s.printf("\nidle warm sessions: memory not measurable here (Docker backend: the interpreter runs under the engine)\n")
	}
	s.printf("rounds: %d warm cells, %d new workspaces each way\n", len(warmMS), n)
	s.add(Row{Path: "warm cell p50 / p99, single client (" + backend[1] + ")", Now: fmt.Sprintf("%.1f / %.1f ms", median(warmMS), pct(warmMS, 0.99)),
		Goal: "keep (1.8/4.9)", Met: median(warmMS) <= 2 && pct(warmMS, 0.99) <= 10})
	s.add(Row{Path: "first pandas cell from the warm pool, p50 (" + backend[1] + ")", Now: fmt.Sprintf("%.1f ms", median(poolMS)),
		Anchor: fmt.Sprintf("%.0f ms no pool", median(coldMS)), Goal: "keep (26)", Met: median(poolMS) <= 100})
	return nil
}

// kernelMemory sums the proportional set size of the warm kernels under
// the server: their interpreters, and everything else of their sandboxes
// (runner, bwrap, PID 1) beyond them.
func kernelMemory(serverPID int) (interp, overhead int64, sessions int) {
	children := map[int][]int{}
	for pid, ppid := range processParents() {
		children[ppid] = append(children[ppid], pid)
	}
	for _, runner := range children[serverPID] {
		var tree []int
		var walk func(int)
		walk = func(p int) {
			tree = append(tree, p)
			for _, c := range children[p] {
				walk(c)
			}
		}
		walk(runner)
		isKernel, sum, py := false, int64(0), int64(0)
		for _, p := range tree {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
			pss := pssOf(p)
			if bytes.Contains(cmd, []byte("srt-mcp's Python kernel")) {
				isKernel, py = true, py+pss
				continue
			}
			sum += pss
		}
		if isKernel {
			sessions++
			interp += py
			overhead += sum
		}
	}
	return interp, overhead, sessions
}

// pssOf is the proportional set size of a process, in bytes (0 when it
// cannot be read).
func pssOf(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	return parsePss(f)
}

// parsePss reads the Pss line of a /proc/PID/smaps_rollup, in bytes.
func parsePss(r io.Reader) int64 {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
