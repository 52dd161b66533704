package bench

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
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
	if err := exec.Command("docker", "image", "inspect", s.Image).Run(); err != nil {
		s.printf("\nDocker backend: not measured (no engine or no image %s)\n", s.Image)
		return nil
	}
	return s.prestartDocker()
}

// prestartDocker times execute_code of `python3 -c 1` and of `true` in a
// session on the Docker backend, with the session's next stage started
// ahead (the default) and without (--sandbox-pool 0), against `docker
// exec` of the same command in the session's container. A session's
// calls come one at a time with a pause between them (an agent reads each
// reply before its next call), which the started-ahead stage needs: a
// call right on the heels of the last finds none waiting yet.
func (s *suite) prestartDocker() error {
	const pause = 150 * time.Millisecond
	type side struct {
		b   *server
		sid string
	}
	var sides []side
	for _, extra := range [][]string{nil, {"--sandbox-pool", "0"}} {
		b, err := startServer(s.Binary, append([]string{"--backend", "docker", "--image", s.Image, "--rate-limit", "100000"}, extra...)...)
		if err != nil {
			return fail(err.Error())
		}
		defer b.stop()
		sc, err := b.tool("upload_file", map[string]any{"filename": "warm.txt", "content_base64": "eA=="})
		if err != nil {
			return fail(err.Error())
		}
		sides = append(sides, side{b, sc["session_id"].(string)})
	}
	call := func(sd side, command string) (float64, error) {
		start := time.Now()
		sc, err := sd.b.tool("execute_code", map[string]any{"session_id": sd.sid, "command": command})
		if err != nil {
			return 0, err
		}
		if fmt.Sprint(sc["exit_code"]) != "0" {
			return 0, fmt.Errorf("execute_code %q: %v", command, sc)
		}
		return sinceMS(start), nil
	}
	if _, err := call(sides[0], "true"); err != nil { // the containers start
		return fail(err.Error())
	}
	if _, err := call(sides[1], "true"); err != nil {
		return fail(err.Error())
	}
	out, err := exec.Command("docker", "ps", "-q", "--filter", "label=session_id="+sides[1].sid).Output()
	cid := strings.TrimSpace(string(out))
	if err != nil || cid == "" {
		return fail(fmt.Sprintf("the session's container: %v %q", err, out))
	}
	s.printf("\n%-34s %12s %22s %22s\n", "Docker session, p50", "docker exec", "execute_code (ahead)", "execute_code (none)")
	for _, cmd := range []string{s.Python + " -c 1", "true"} {
		var anchor, on, off []float64
		for i := 0; i < s.Warmup+s.Rounds; i++ {
			start := time.Now()
			if out, err := exec.Command("docker", "exec", "--user", "1000:1000", cid, "/bin/bash", "-c", cmd).CombinedOutput(); err != nil {
				return fail(fmt.Sprintf("docker exec: %v %s", err, out))
			}
			a := sinceMS(start)
			time.Sleep(pause)
			o, err := call(sides[0], cmd)
			if err != nil {
				return fail(err.Error())
			}
			time.Sleep(pause)
			f, err := call(sides[1], cmd)
			if err != nil {
				return fail(err.Error())
			}
			time.Sleep(pause)
			if i >= s.Warmup {
				anchor, on, off = append(anchor, a), append(on, o), append(off, f)
			}
		}
		a, o, f := median(anchor), median(on), median(off)
		s.printf("%-34s %10.1fms %12.1fms %6.2fx %12.1fms %6.2fx\n", cmd, a, o, o/a, f, f/a)
		s.add(Row{Path: "Docker session execute_code " + cmd + ", next stage started ahead vs its own, p50", Now: fmt.Sprintf("%.1f ms", o),
			Anchor: fmt.Sprintf("%.1f ms (own stage)", f), Ratio: fmt.Sprintf("%.2fx", o/f), Goal: "faster than its own stage", Met: o < f})
	}
	h, _ := sides[0].b.health()
	if pool, ok := h["sandbox_pool"].(map[string]any); ok {
		s.printf("%d rounds interleaved, %s between calls, Go MCP client over Streamable HTTP; the server with stages ahead after: %v\n", s.Rounds, pause, pool["docker"])
	}
	return nil
}
