package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
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
	ClientCPUS  float64  `json:"client_cpu_s"`
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

// maxRSSGrowth is how much more memory the server may hold after the load
// than before it.
const maxRSSGrowth = 100 << 20

// load runs N MCP TypeScript SDK clients, each in its own MCP session and
// so its own workspace, running cells back to back for a while against a
// server on its defaults (only --max-sessions raised to fit them), and
// checks the server afterwards: no error, RSS within 100 MB of before, no
// descriptor, process or goroutine left over.
func (s *suite) load() error {
	n, secs := s.Clients, s.Seconds
	dir, err := clientDir(s.ClientDir, "--load")
	if err != nil {
		return err
	}
	b, err := startServer(s.Binary, "--max-sessions", strconv.Itoa(n+10))
	if err != nil {
		return fail(err.Error())
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
		return fail(err.Error())
	}
	r.RSSBefore, r.FDsBefore, r.ProcsBefore, r.GorBefore = before.rss, before.fds, before.procs, before.gors
	// After: the clients closed their sessions; whatever they started
	// must go (allowing the server's own pool to refill).
	after := settle(func(s serverSample) bool {
		return s.fds <= before.fds && s.procs <= before.procs && s.gors <= before.gors+2 && s.rss-before.rss <= maxRSSGrowth
	})
	r.RSSAfter, r.RSSPeak, r.FDsAfter, r.ProcsAfter, r.GorAfter = after.rss, after.peak, after.fds, after.procs, after.gors
	r.Failed = append(r.Failed, loadFailures(r)...)
	s.add(loadRow(r))
	if s.JSON {
		b, _ := json.Marshal(r)
		s.printf("%s\n", b)
	} else {
		s.printf("%d MCP TypeScript SDK clients, a cell after each reply, for %.0f s (server defaults, --max-sessions %d)\n\n", r.Clients, r.Seconds, n+10)
		writeLoadReport(s.Out, r)
	}
	if len(r.Failed) > 0 {
		return fail("load: " + strings.Join(r.Failed, "; "))
	}
	return nil
}

// loadFailures lists what of r did not meet the bar: errors, RSS grown by
// more than 100 MB, descriptors, processes or goroutines left over (two
// goroutines of slack: the server's pool refilling).
func loadFailures(r loadReport) []string {
	var out []string
	if r.Errors > 0 {
		out = append(out, fmt.Sprintf("%d errors", r.Errors))
	}
	if r.RSSAfter-r.RSSBefore > maxRSSGrowth {
		out = append(out, fmt.Sprintf("RSS grew %d MB (more than 100 MB)", (r.RSSAfter-r.RSSBefore)>>20))
	}
	if r.FDsAfter > r.FDsBefore || r.ProcsAfter > r.ProcsBefore || r.GorAfter > r.GorBefore+2 {
		out = append(out, fmt.Sprintf("left over: fds %d -> %d, processes %d -> %d, goroutines %d -> %d",
			r.FDsBefore, r.FDsAfter, r.ProcsBefore, r.ProcsAfter, r.GorBefore, r.GorAfter))
	}
	return out
}

// loadRow is the summary row of a load run: its goal is issue 29's p99
// under 150 ms at 800 calls/s or more, without an error (the clients'
// share of the CPU beside it).
func loadRow(r loadReport) Row {
	share := 0.0
	if r.Seconds > 0 {
		share = 100 * r.ClientCPUS / r.Seconds / float64(runtime.NumCPU())
	}
	return Row{Path: fmt.Sprintf("%d TS SDK clients, warm cells, %.0f s: p99, calls/s (clients' CPU %.0f%%)", r.Clients, r.Seconds, share),
		Now: fmt.Sprintf("%.0f ms, %.0f/s", r.P99MS, r.Throughput), Goal: "< 150 ms, >= 800/s",
		Met: r.Errors == 0 && r.P99MS < 150 && r.Throughput >= 800}
}

// writeLoadReport prints r as a table: the calls, then the server before
// and after.
func writeLoadReport(w io.Writer, r loadReport) {
	fmt.Fprintf(w, "%-22s %12s\n", "calls", strconv.Itoa(r.Calls))
	fmt.Fprintf(w, "%-22s %12d\n", "errors", r.Errors)
	fmt.Fprintf(w, "%-22s %12.1f\n", "throughput (calls/s)", r.Throughput)
	fmt.Fprintf(w, "%-22s %12.1f\n", "p50 (ms)", r.P50MS)
	fmt.Fprintf(w, "%-22s %12.1f\n", "p90 (ms)", r.P90MS)
	fmt.Fprintf(w, "%-22s %12.1f\n", "p99 (ms)", r.P99MS)
	fmt.Fprintf(w, "%-22s %12.1f\n", "max (ms)", r.MaxMS)
	if r.Seconds > 0 {
		fmt.Fprintf(w, "%-22s %11.0f%%   (of %d cores: the clients' own CPU, on the machine they measure)\n", "clients' CPU", 100*r.ClientCPUS/r.Seconds/float64(runtime.NumCPU()), runtime.NumCPU())
	}
	fmt.Fprintf(w, "\n%-22s %12s %12s\n", "server", "before", "after")
	fmt.Fprintf(w, "%-22s %12d %12d   (peak %d MB)\n", "RSS (MB)", r.RSSBefore>>20, r.RSSAfter>>20, r.RSSPeak>>20)
	fmt.Fprintf(w, "%-22s %12d %12d\n", "descriptors", r.FDsBefore, r.FDsAfter)
	fmt.Fprintf(w, "%-22s %12d %12d\n", "processes", r.ProcsBefore, r.ProcsAfter)
	fmt.Fprintf(w, "%-22s %12d %12d\n", "goroutines", r.GorBefore, r.GorAfter)
	for _, s := range r.Samples {
		fmt.Fprintln(w, "error:", s)
	}
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
	return parseLoadReport(last)
}

// parseLoadReport reads the report load.mjs prints as its last line; a
// line that is not one, or reports no client, is an error quoting it.
func parseLoadReport(last string) (loadReport, error) {
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
		s.rss, s.peak = parseStatusMemory(b)
	}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		s.fds = len(ents)
	}
	s.procs = len(descendants(pid))
	if resp, err := http.Get(base + "/metrics"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s.gors = parseGoroutines(body)
	}
	return s
}

// parseStatusMemory reads VmRSS and VmHWM (the peak) of a
// /proc/PID/status, in bytes.
func parseStatusMemory(status []byte) (rss, peak int64) {
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && (f[0] == "VmRSS:" || f[0] == "VmHWM:") {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			if f[0] == "VmRSS:" {
				rss = kb << 10
			} else {
				peak = kb << 10
			}
		}
	}
	return rss, peak
}

// parseGoroutines reads go_goroutines from a Prometheus text exposition
// (0 when it is absent).
func parseGoroutines(metrics []byte) int {
	n := 0
	for _, line := range strings.Split(string(metrics), "\n") {
		if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			n, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return n
}

// processParents maps every process in /proc to its parent.
func processParents() map[int]int {
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
		if pp, ok := parentOf(b); ok {
			parent[p] = pp
		}
	}
	return parent
}

// parentOf reads the parent's PID from a /proc/PID/stat line:
// "pid (comm) state ppid ...", where comm may hold spaces and parentheses.
func parentOf(stat []byte) (int, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid, true
}

// descendants lists the processes below pid.
func descendants(pid int) []int { return descendantsIn(processParents(), pid) }

// descendantsIn lists the processes below pid in a map of parents.
func descendantsIn(parent map[int]int, pid int) []int {
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
