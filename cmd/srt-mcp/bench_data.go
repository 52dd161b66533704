package main

import (
	"fmt"
	"os/exec"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/srt-mcp/srt-mcp/runner"
)

// runDataBench measures seed 000's data tools on a real srt-mcp serve:
// run_python("print(2+2)") in a warm session, and the first
// `import pandas, seaborn` of a new session, each interleaved with the
// same Python run bare on the host and under minimal bwrap (the anchors).
func runDataBench(c *cli.Context) error {
	bwrap, err := runner.FindBwrap()
	if err != nil {
		return cli.Exit("bench needs bwrap: apt-get install -y bubblewrap", 1)
	}
	py := c.String("python")
	if out, err := exec.Command(py, "-c", "import pandas, seaborn").CombinedOutput(); err != nil {
		return cli.Exit(fmt.Sprintf("the Python data profile is missing (make deps): %v %s", err, out), 1)
	}
	b, err := startBenchServer()
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	defer b.stop()
	host := func(code string) func() (float64, error) {
		return func() (float64, error) {
			start := time.Now()
			if out, err := exec.Command(py, "-c", code).CombinedOutput(); err != nil {
				return 0, fmt.Errorf("%v %s", err, out)
			}
			return sinceMS(start), nil
		}
	}
	bw := func(code string) func() (float64, error) {
		return func() (float64, error) {
			start := time.Now()
			out, err := exec.Command(bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/", "/",
				"--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--", py, "-c", code).CombinedOutput()
			if err != nil {
				return 0, fmt.Errorf("bwrap: %v %s", err, out)
			}
			return sinceMS(start), nil
		}
	}
	run := func(sid, code string) (float64, error) {
		start := time.Now()
		sc, err := b.tool("run_python", map[string]any{"session_id": sid, "code": code})
		if err != nil {
			return 0, err
		}
		if fmt.Sprint(sc["exit_code"]) != "0" {
			return 0, fmt.Errorf("run_python: %v", sc)
		}
		return sinceMS(start), nil
	}
	sc, err := b.tool("upload_file", map[string]any{"filename": "warm.txt", "content_base64": "eA=="})
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	warm := sc["session_id"].(string)
	type row struct {
		name string
		f    func() (float64, error)
		ms   []float64
	}
	measure := func(rows []*row, warmup, rounds int) error {
		for i := 0; i < warmup+rounds; i++ {
			for _, r := range rows {
				ms, err := r.f()
				if err != nil {
					return err
				}
				if i >= warmup {
					r.ms = append(r.ms, ms)
				}
			}
		}
		return nil
	}
	small := []*row{
		{name: "bare python3 (host)", f: host("print(2+2)")},
		{name: "minimal bwrap", f: bw("print(2+2)")},
		{name: "run_python, warm session", f: func() (float64, error) { return run(warm, "print(2+2)") }},
	}
	if err := measure(small, c.Int("warmup"), c.Int("rounds")); err != nil {
		return cli.Exit(err.Error(), 1)
	}
	imp := "import pandas, seaborn"
	cold := []*row{
		{name: "bare python3 (host)", f: host(imp)},
		{name: "minimal bwrap", f: bw(imp)},
		{name: "run_python, new session", f: func() (float64, error) {
			sc, err := b.tool("upload_file", map[string]any{"filename": "x.txt", "content_base64": "eA=="})
			if err != nil {
				return 0, err
			}
			sid := sc["session_id"].(string)
			ms, err := run(sid, imp)
			_, _ = b.tool("close_session", map[string]any{"session_id": sid})
			return ms, err
		}},
	}
	coldRounds := min(c.Int("rounds"), 15)
	if err := measure(cold, 1, coldRounds); err != nil {
		return cli.Exit(err.Error(), 1)
	}
	print := func(title string, rows []*row) {
		fmt.Printf("%-36s %9s %9s %10s\n", title, "p50", "p99", "vs bwrap")
		anchor := median(rows[1].ms)
		for _, r := range rows {
			fmt.Printf("%-36s %7.1fms %7.1fms %9.2fx\n", r.name, median(r.ms), pct(r.ms, 0.99), median(r.ms)/anchor)
		}
		fmt.Println()
	}
	print(`python3 -c "print(2+2)"`, small)
	print(`first "import pandas, seaborn"`, cold)
	fmt.Printf("rounds: %d warm, %d cold (interleaved); run_python is measured at the MCP client, over Streamable HTTP\n", c.Int("rounds"), coldRounds)
	return nil
}
