package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// loadReport is what `bench --load` measured.
type loadReport struct {
	Clients     int      `json:"clients"`
	Seconds     float64  `json:"seconds"`
	Calls       int      `json:"calls"`
	Errors      int      `json:"errors"`
	Samples     []string `json:"error_samples,omitempty"`
	P50MS       float64  `json:"p50_ms"`
	P90MS       float64  `json:"p90_ms"`
	P99MS       float64  `json:"p99_ms"`
	MaxMS       float64  `json:"max_ms"`
	Throughput  float64  `json:"throughput_per_s"`
	RSSBefore   int64    `json:"rss_before_bytes"`
	RSSAfter    int64    `json:"rss_after_bytes"`
	RSSPeak     int64    `json:"rss_peak_bytes"`
	FDsBefore   int      `json:"fds_before"`
	FDsAfter    int      `json:"fds_after"`
	ProcsBefore int      `json:"processes_before"`
	ProcsAfter  int      `json:"processes_after"`
	GorBefore   int      `json:"goroutines_before"`
	GorAfter    int      `json:"goroutines_after"`
	Failed      []string `json:"failed,omitempty"` // what did not meet the bar
}

// serverSample is the server process's footprint at one moment.
type serverSample struct {
	rss, peak        int64
	fds, procs, gors int
}

// runLoadBench runs N MCP TypeScript SDK clients, each in its own MCP
// session and so its own workspace, running cells back to back for a
// while against a server on its defaults (only --max-sessions raised to
// fit them), and checks the server afterwards: no error, RSS within 100 MB
// of before, no descriptor, process or goroutine left over.
func runLoadBench(c *cli.Context) error {
	n, secs := c.Int("clients"), c.Int("seconds")
	dir, err := clientDir(c, "--load")
	if err != nil {
		return err
	}
	b, err := startBenchServer("--max-sessions", strconv.Itoa(n+10))
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	defer b.stop()
	base := strings.TrimSuffix(b.url, "/mcp")
	pid := b.cmd.Process.Pid
	// Before: the server's start-up work done (the warm pool full, the
	// cache template built, nothing running).
	settle := func(want func(serverSample) bool) serverSample {
		var s serverSample
		deadline := time.Now().Add(60 * time.Second)
		for {
			h, _ := b.health()
			s = sample(pid, base)
			ready, _ := h["warm_pool_ready"].(float64)
			running, _ := h["running_executions"].(float64)
			// The runner pool at rest: its default two waiting (after a
			// burst it keeps more for a few seconds).
			idle, ok := h["runners_idle"].(float64)
			rest := !ok || idle == 2
			if (ready >= 2 && running == 0 && rest && want(s)) || time.Now().After(deadline) {
				return s
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	time.Sleep(2 * time.Second)
	before := settle(func(serverSample) bool { return true })
	r, err := runLoadClients(dir, "--url", b.url, "--clients", strconv.Itoa(n), "--seconds", strconv.Itoa(secs))
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	r.RSSBefore, r.FDsBefore, r.ProcsBefore, r.GorBefore = before.rss, before.fds, before.procs, before.gors
	// After: the clients closed their sessions; whatever they started
	// must go (allowing the server's own pool to refill).
	after := settle(func(s serverSample) bool {
		return s.fds <= before.fds && s.procs <= before.procs && s.gors <= before.gors+2 && s.rss-before.rss <= 100<<20
	})
	r.RSSAfter, r.RSSPeak, r.FDsAfter, r.ProcsAfter, r.GorAfter = after.rss, after.peak, after.fds, after.procs, after.gors
	if r.Errors > 0 {
		r.Failed = append(r.Failed, fmt.Sprintf("%d errors", r.Errors))
	}
	if r.RSSAfter-r.RSSBefore > 100<<20 {
		r.Failed = append(r.Failed, fmt.Sprintf("RSS grew %d MB (more than 100 MB)", (r.RSSAfter-r.RSSBefore)>>20))
	}
	if r.FDsAfter > r.FDsBefore || r.ProcsAfter > r.ProcsBefore || r.GorAfter > r.GorBefore+2 {
		r.Failed = append(r.Failed, fmt.Sprintf("left over: fds %d -> %d, processes %d -> %d, goroutines %d -> %d",
			r.FDsBefore, r.FDsAfter, r.ProcsBefore, r.ProcsAfter, r.GorBefore, r.GorAfter))
	}
	addBenchRow(benchRow{Path: fmt.Sprintf("%d TS SDK clients, warm cells, %.0f s: p99 and calls/s", r.Clients, r.Seconds),
		Now: fmt.Sprintf("%.0f ms, %.0f/s", r.P99MS, r.Throughput), Goal: "< 150 ms, >= 600/s",
		Met: r.Errors == 0 && r.P99MS < 150 && r.Throughput >= 600})
	if c.Bool("json") {
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
	} else {
		fmt.Printf("%d MCP TypeScript SDK clients, a cell after each reply, for %.0f s (server defaults, --max-sessions %d)\n\n", r.Clients, r.Seconds, n+10)
		fmt.Printf("%-22s %12s\n", "calls", strconv.Itoa(r.Calls))
		fmt.Printf("%-22s %12d\n", "errors", r.Errors)
		fmt.Printf("%-22s %12.1f\n", "throughput (calls/s)", r.Throughput)
		fmt.Printf("%-22s %12.1f\n", "p50 (ms)", r.P50MS)
		fmt.Printf("%-22s %12.1f\n", "p90 (ms)", r.P90MS)
		fmt.Printf("%-22s %12.1f\n", "p99 (ms)", r.P99MS)
		fmt.Printf("%-22s %12.1f\n", "max (ms)", r.MaxMS)
		fmt.Printf("\n%-22s %12s %12s\n", "server", "before", "after")
		fmt.Printf("%-22s %12d %12d   (peak %d MB)\n", "RSS (MB)", r.RSSBefore>>20, r.RSSAfter>>20, r.RSSPeak>>20)
		fmt.Printf("%-22s %12d %12d\n", "descriptors", r.FDsBefore, r.FDsAfter)
		fmt.Printf("%-22s %12d %12d\n", "processes", r.ProcsBefore, r.ProcsAfter)
		fmt.Printf("%-22s %12d %12d\n", "goroutines", r.GorBefore, r.GorAfter)
		for _, s := range r.Samples {
			fmt.Println("error:", s)
		}
	}
	if len(r.Failed) > 0 {
		return cli.Exit("load: "+strings.Join(r.Failed, "; "), 1)
	}
	return nil
}

// runLoadClients runs load.mjs from dir (where the MCP TypeScript SDK is
// installed) with args, and returns the report on its last line.
func runLoadClients(dir string, args ...string) (loadReport, error) {
	cmd := exec.Command("node", append([]string{filepath.Join(dir, "load.mjs")}, args...)...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return loadReport{}, fmt.Errorf("node: %w", err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var last string
	for sc.Scan() {
		last = sc.Text()
	}
	_ = cmd.Wait()
	var r loadReport
	if err := json.Unmarshal([]byte(last), &r); err != nil || r.Clients == 0 {
		return r, fmt.Errorf("the load clients reported %q", last)
	}
	return r, nil
}

// sample reads the server's RSS, peak RSS, open descriptors, descendant
// processes and goroutines (from its /metrics).
func sample(pid int, base string) serverSample {
	var s serverSample
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && (f[0] == "VmRSS:" || f[0] == "VmHWM:") {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				if f[0] == "VmRSS:" {
					s.rss = kb << 10
				} else {
					s.peak = kb << 10
				}
			}
		}
	}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		s.fds = len(ents)
	}
	s.procs = len(descendants(pid))
	if resp, err := http.Get(base + "/metrics"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
				s.gors, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
	}
	return s
}

// descendants lists the processes below pid.
func descendants(pid int) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b)[i+1:])
		if len(f) > 1 {
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}
