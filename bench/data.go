package bench

import (
	"fmt"
	"os/exec"
	"time"

	"github.com/srt-mcp/srt-mcp/runner"
)

// data measures seed 000's data tools on a real srt-mcp serve:
// run_python("print(2+2)") in a warm session, and the first
// `import pandas, seaborn` of a new session, each interleaved with the
// same Python run bare on the host and under minimal bwrap (the anchors).
func (s *suite) data() error {
	bwrap, err := runner.FindBwrap()
	if err != nil {
		return errNoBwrap
	}
	py := s.Python
	if out, err := exec.Command(py, "-c", "import pandas, seaborn").CombinedOutput(); err != nil {
		return fail(fmt.Sprintf("the Python data profile is missing (make deps): %v %s", err, out))
	}
	b, err := startServer(s.Binary)
	if err != nil {
		return fail(err.Error())
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
		return fail(err.Error())
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
	if err := measure(small, s.Warmup, s.Rounds); err != nil {
		return fail(err.Error())
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
	coldRounds := min(s.Rounds, 15)
	if err := measure(cold, 1, coldRounds); err != nil {
		return fail(err.Error())
	}
	table := func(title string, rows []*row) {
		s.printf("%-36s %9s %9s %10s\n", title, "p50", "p99", "vs bwrap")
		anchor := median(rows[1].ms)
		for _, r := range rows {
			s.printf("%-36s %7.1fms %7.1fms %9.2fx\n", r.name, median(r.ms), pct(r.ms, 0.99), median(r.ms)/anchor)
		}
		s.printf("\n")
	}
	table(`python3 -c "print(2+2)"`, small)
	table(`first "import pandas, seaborn"`, cold)
	s.printf("rounds: %d warm, %d cold (interleaved); run_python is measured at the MCP client, over Streamable HTTP\n", s.Rounds, coldRounds)
	return nil
}
