package bench

import (
	"fmt"
	"os/exec"
	"strconv"
	"time"
)

// prestart times execute_code of `python3 -c 1` and of `true` through the
// MCP TypeScript SDK, one call at a time (a client waits for each reply),
// on a server with sandboxes started ahead of their calls (its default)
// and on one without (--sandbox-pool 0), against the same commands run
// bare (unsandboxed, by this process), in interleaved rounds.
func (s *suite) prestart() error {
	dir, err := clientDir(s.ClientDir, "--prestart")
	if err != nil {
		return err
	}
	// Calls come faster than the default per-caller rate limit (50/s).
	on, err := startServer(s.Binary, "--rate-limit", "100000")
	if err != nil {
		return fail(err.Error())
	}
	defer on.stop()
	off, err := startServer(s.Binary, "--rate-limit", "100000", "--sandbox-pool", "0")
	if err != nil {
		return fail(err.Error())
	}
	defer off.stop()
	const rounds, secs, bareRuns = 3, 4, 40
	type result struct{ bare, on, off []float64 }
	measure := func(argv []string, command string) (result, error) {
		var r result
		for round := 0; round < rounds; round++ {
			var bare []float64
			for i := 0; i < bareRuns+5; i++ {
				start := time.Now()
				if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
					return r, fmt.Errorf("%v: %v %s", argv, err, out)
				}
				if i >= 5 {
					bare = append(bare, sinceMS(start))
				}
			}
			r.bare = append(r.bare, median(bare))
			for _, srv := range []struct {
				b   *server
				out *[]float64
			}{{on, &r.on}, {off, &r.off}} {
				lr, err := runLoadClients(dir, "--url", srv.b.url, "--clients", "1", "--seconds", strconv.Itoa(secs), "--command", command)
				if err != nil {
					return r, err
				}
				if lr.Errors > 0 || lr.Calls == 0 {
					return r, fmt.Errorf("execute_code %q: %d calls, %d errors: %v", command, lr.Calls, lr.Errors, lr.Samples)
				}
				*srv.out = append(*srv.out, lr.P50MS)
			}
		}
		return r, nil
	}
	py, err := measure([]string{s.Python, "-c", "1"}, s.Python+" -c 1")
	if err != nil {
		return fail(err.Error())
	}
	tr, err := measure([]string{"/bin/true"}, "true")
	if err != nil {
		return fail(err.Error())
	}
	h, _ := on.health()
	s.printf("%-34s %10s %22s %22s\n", "one call at a time, p50", "bare", "execute_code (pool)", "execute_code (no pool)")
	for _, row := range []struct {
		name string
		r    result
	}{{"python3 -c 1", py}, {"true", tr}} {
		b, o, f := median(row.r.bare), median(row.r.on), median(row.r.off)
		s.printf("%-34s %8.2fms %12.2fms %6.2fx %12.2fms %6.2fx\n", row.name, b, o, o/b, f, f/b)
	}
	s.printf("\n%d rounds interleaved: %d bare runs, then %d s of a client on each server; the median of the rounds' p50s\n", rounds, bareRuns, secs)
	if pool, ok := h["sandbox_pool"].(map[string]any); ok {
		s.printf("the pool's server after: %v\n", pool)
	}
	pb, po := median(py.bare), median(py.on)
	s.add(Row{Path: "execute_code python3 -c 1, TS SDK, one at a time, p50 (vs bare)", Now: fmt.Sprintf("%.1f ms", po),
		Anchor: fmt.Sprintf("%.1f ms", pb), Ratio: fmt.Sprintf("%.2fx", po/pb), Goal: "<= 1.15x", Met: po/pb <= 1.15})
	tb, to := median(tr.bare), median(tr.on)
	s.add(Row{Path: "execute_code true, TS SDK, one at a time, p50 (vs bare)", Now: fmt.Sprintf("%.1f ms", to),
		Anchor: fmt.Sprintf("%.1f ms", tb), Ratio: fmt.Sprintf("+%.1f ms", to-tb), Goal: "<= +3 ms", Met: to-tb <= 3})
	return nil
}
