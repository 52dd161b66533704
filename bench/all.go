package bench

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/srt-mcp/srt-mcp/runner"
)

// Row is one line of `srt-mcp bench --all`: a path, srt-mcp's number,
// the anchor measured in the same run, their ratio and the goal.
type Row struct {
	Path, Now, Anchor, Ratio, Goal string
	Met                            bool
}

// all runs every part of the bench, each measured against its own
// anchor in the same run (interleaved), and prints one table at the end.
func (s *suite) all() error {
	rows := []Row{}
	s.summary = &rows
	defer func() { s.summary = nil }()
	parts := []struct {
		name string
		run  func() error
	}{
		{"exec", s.exec},
		{"mcp", s.mcp},
		{"prestart", s.prestart},
		{"cold", s.cold},
		{"net", s.net},
		{"tls", s.tls},
		{"load", s.load},
		{"workspace", s.workspace},
		{"docker", s.docker},
		{"disk", s.disk},
		{"costs", s.costs},
	}
	for _, p := range parts {
		s.printf("\n== %s\n", p.name)
		if err := p.run(); err != nil {
			s.printf("(%s: %v)\n", p.name, err)
			rows = append(rows, Row{Path: p.name + ": not measured (" + err.Error() + ")"})
		}
	}
	writeSummary(s.Out, rows)
	return nil
}

// writeSummary prints the table of `bench --all`: every row with its goal,
// and whether it was met (nothing when the row has no goal).
func writeSummary(w io.Writer, rows []Row) {
	fmt.Fprintf(w, "\n%-62s %14s %14s %8s %12s %s\n", "path", "srt-mcp", "anchor", "ratio", "goal", "")
	for _, r := range rows {
		met := ""
		if r.Goal != "" {
			met = "missed"
			if r.Met {
				met = "met"
			}
		}
		fmt.Fprintf(w, "%-62s %14s %14s %8s %12s %s\n", r.Path, r.Now, r.Anchor, r.Ratio, r.Goal, met)
	}
}

// cold is cold-run throughput: 10 concurrent MCP TypeScript SDK clients
// calling execute_code (a fresh sandbox each) against 10 concurrent loops
// of minimal bwrap, alternated.
func (s *suite) cold() error {
	const clients = 10
	secs := 10
	dir, err := clientDir(s.ClientDir, "--cold")
	if err != nil {
		return err
	}
	bwrap, err := runner.FindBwrap()
	if err != nil {
		return errNoBwrap
	}
	py := s.Python
	// The same server with and without sandboxes started ahead of their
	// calls (--sandbox-pool 0 is how every run started before them).
	b, err := startServer(s.Binary, "--max-concurrent", strconv.Itoa(clients), "--rate-limit", "100000")
	if err != nil {
		return fail(err.Error())
	}
	defer b.stop()
	cold, err := startServer(s.Binary, "--max-concurrent", strconv.Itoa(clients), "--rate-limit", "100000", "--sandbox-pool", "0")
	if err != nil {
		return fail(err.Error())
	}
	defer cold.stop()
	bwrapLoops := func() float64 {
		var n atomic.Int64
		deadline := time.Now().Add(time.Duration(secs) * time.Second)
		var wg sync.WaitGroup
		for i := 0; i < clients; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					if exec.Command(bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/", "/",
						"--dev", "/dev", "--proc", "/proc", "--", py, "-c", "print(1)").Run() == nil {
						n.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		return float64(n.Load()) / float64(secs)
	}
	mcpClients := func(srv *server) (loadReport, error) {
		r, err := runLoadClients(dir, "--url", srv.url, "--clients", strconv.Itoa(clients),
			"--seconds", strconv.Itoa(secs), "--command", py+" -c 'print(1)'")
		if err != nil {
			return r, err
		}
		if r.Calls == 0 {
			return r, fmt.Errorf("the load clients made no call in %d s", secs)
		}
		if r.Errors > 0 {
			return r, fmt.Errorf("%d errors: %v", r.Errors, r.Samples)
		}
		return r, nil
	}
	var bw, mc, mcP99, off, offP99 []float64
	for round := 0; round < 2; round++ {
		bw = append(bw, bwrapLoops())
		r, err := mcpClients(b)
		if err != nil {
			return fail(err.Error())
		}
		mc, mcP99 = append(mc, r.Throughput), append(mcP99, r.P99MS)
		if r, err = mcpClients(cold); err != nil {
			return fail(err.Error())
		}
		off, offP99 = append(off, r.Throughput), append(offP99, r.P99MS)
	}
	mb, mm, mo := median(bw), median(mc), median(off)
	s.printf("%-52s %12s %10s\n", "cold runs, 10 concurrent, python3 -c 'print(1)'", "runs/s", "p99")
	s.printf("%-52s %12.1f\n", "minimal bwrap loops", mb)
	s.printf("%-52s %12.1f %8.1fms\n", "execute_code, MCP TypeScript SDK clients", mm, median(mcP99))
	s.printf("%-52s %12.1f %8.1fms\n", "  the same, --sandbox-pool 0 (no pre-started sandboxes)", mo, median(offP99))
	s.printf("\nratio %.2fx (goal >= 0.8x), without the pool %.2fx; %d s each, alternated twice\n", mm/mb, mo/mb, secs)
	s.add(Row{Path: "cold throughput: 10 TS SDK clients execute_code vs 10 bwrap loops", Now: fmt.Sprintf("%.1f runs/s", mm),
		Anchor: fmt.Sprintf("%.1f runs/s", mb), Ratio: fmt.Sprintf("%.2fx", mm/mb), Goal: ">= 0.8x", Met: mm/mb >= 0.8})
	s.add(Row{Path: "cold p99: 10 TS SDK clients, pool vs --sandbox-pool 0", Now: fmt.Sprintf("%.1f ms", median(mcP99)),
		Anchor: fmt.Sprintf("%.1f ms", median(offP99)), Ratio: fmt.Sprintf("%.2fx", median(mcP99)/median(offP99)), Goal: "< 1x", Met: median(mcP99) < median(offP99)})
	return nil
}

// clientDir is where the MCP TypeScript SDK clients are (load.mjs and
// node_modules): dir, else $SRT_MCP_CLIENTS, else integration/mcpclient;
// or an error saying how to install them for mode. The directory returned
// is absolute.
func clientDir(dir, mode string) (string, error) {
	if dir == "" {
		dir = os.Getenv("SRT_MCP_CLIENTS")
	}
	if dir == "" {
		dir = "integration/mcpclient"
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		return "", fail(fmt.Sprintf("bench %s drives the MCP TypeScript SDK from %s/node_modules: run make clients (npm ci in integration/mcpclient), or give --client-dir", mode, dir))
	}
	// The clients run with dir as their working directory; a relative
	// dir would name load.mjs under itself.
	return filepath.Abs(dir)
}
