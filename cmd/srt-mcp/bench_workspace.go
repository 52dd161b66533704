package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// runWorkspaceBench measures stateful workspaces on a real srt-mcp serve:
// a warm cell through MCP over Streamable HTTP; the first
// `import pandas, seaborn` of a new workspace with the warm pool and
// without; and the memory of an idle warm session beyond its interpreter.
func runWorkspaceBench(c *cli.Context) error {
	rounds := c.Int("rounds")
	backend := []string{"--backend", "native"}
	if c.Bool("docker") {
		backend = []string{"--backend", "docker", "--image", c.String("image")}
	}
	backend = append(backend, "--rate-limit", "1000000") // the bench is one fast client
	warm, err := startBenchServer(append(backend, "--warm-pool", "2")...)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	defer warm.stop()
	cold, err := startBenchServer(append(backend, "--warm-pool", "0")...)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	defer cold.stop()
	cell := func(b *benchServer, code string) (float64, error) {
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
		return cli.Exit(err.Error(), 1)
	}
	var warmMS []float64
	for i := 0; i < c.Int("warmup")+rounds*5; i++ {
		ms, err := cell(cold, "x + 1")
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		if i >= c.Int("warmup") {
			warmMS = append(warmMS, ms)
		}
	}
	// 2. The first import of a new workspace (a new MCP session each).
	first := func(b *benchServer) (float64, error) {
		nb := &benchServer{url: b.url, cl: b.cl}
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
			return cli.Exit(err.Error(), 1)
		}
		a, err := first(warm)
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		b, err := first(cold)
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		poolMS, coldMS = append(poolMS, a), append(coldMS, b)
	}
	// 3. Memory of the idle warm sessions.
	if err := waitPool(); err != nil {
		return cli.Exit(err.Error(), 1)
	}
	interp, overhead, sessions := kernelMemory(warm.cmd.Process.Pid)

	fmt.Printf("%-52s %9s %9s %8s\n", "stateful workspaces ("+backend[1]+" backend)", "p50", "p99", "goal")
	fmt.Printf("%-52s %7.2fms %7.2fms %8s\n", "warm cell execute_code(\"x + 1\"), MCP over HTTP", median(warmMS), pct(warmMS, 0.99), "<2/<10")
	fmt.Printf("%-52s %7.1fms %7.1fms %8s\n", "first \"import pandas, seaborn\", warm pool", median(poolMS), pct(poolMS, 0.99), "<100")
	fmt.Printf("%-52s %7.1fms %7.1fms %8s\n", "first \"import pandas, seaborn\", no pool", median(coldMS), pct(coldMS, 0.99), "~900")
	if sessions > 0 {
		fmt.Printf("\nidle warm sessions: %d; per session: interpreter %.1f MB PSS, sandbox and runner beyond it %.1f MB PSS (goal < 40 MB)\n",
			sessions, float64(interp)/float64(sessions)/(1<<20), float64(overhead)/float64(sessions)/(1<<20))
	} else {
		fmt.Printf("\nidle warm sessions: memory not measurable here (Docker backend: the interpreter runs under the engine)\n")
	}
	fmt.Printf("rounds: %d warm cells, %d new workspaces each way\n", len(warmMS), n)
	addBenchRow(benchRow{Path: "warm cell p50 / p99, single client (" + backend[1] + ")", Now: fmt.Sprintf("%.1f / %.1f ms", median(warmMS), pct(warmMS, 0.99)),
		Goal: "keep (1.8/4.9)", Met: median(warmMS) <= 2 && pct(warmMS, 0.99) <= 10})
	addBenchRow(benchRow{Path: "first pandas cell from the warm pool, p50 (" + backend[1] + ")", Now: fmt.Sprintf("%.1f ms", median(poolMS)),
		Anchor: fmt.Sprintf("%.0f ms no pool", median(coldMS)), Goal: "keep (26)", Met: median(poolMS) <= 100})
	return nil
}

// kernelMemory sums the proportional set size of the warm kernels under
// the server: their interpreters, and everything else of their sandboxes
// (runner, bwrap, PID 1) beyond them.
func kernelMemory(serverPID int) (interp, overhead int64, sessions int) {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 {
			ppid, _ := strconv.Atoi(f[1])
			children[ppid] = append(children[ppid], pid)
		}
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

func pssOf(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
