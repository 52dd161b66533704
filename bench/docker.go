package bench

import (
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// docker measures warm-session run_python("print(2+2)") on the
// Docker backend against `docker exec` of the same command in the same
// container (the anchor), and against the bubblewrap backend, interleaved.
func (s *suite) docker() error {
	if err := exec.Command("docker", "image", "inspect", s.Image).Run(); err != nil {
		return fail(fmt.Sprintf("bench --docker needs a Docker engine and the image %s (srt-mcp image build): %v", s.Image, err))
	}
	dk, err := startServer(s.Binary, "--backend", "docker", "--image", s.Image)
	if err != nil {
		return fail(err.Error())
	}
	defer dk.stop()
	nat, err := startServer(s.Binary, "--backend", "native")
	if err != nil {
		return fail(err.Error())
	}
	defer nat.stop()
	session := func(b *server) (string, error) {
		sc, err := b.tool("upload_file", map[string]any{"filename": "warm.txt", "content_base64": "eA=="})
		if err != nil {
			return "", err
		}
		return sc["session_id"].(string), nil
	}
	dsid, err := session(dk)
	if err != nil {
		return fail(err.Error())
	}
	nsid, err := session(nat)
	if err != nil {
		return fail(err.Error())
	}
	code := "print(2+2)"
	run := func(b *server, sid string) func() (float64, error) {
		return func() (float64, error) {
			start := time.Now()
			sc, err := b.tool("run_python", map[string]any{"session_id": sid, "code": code})
			if err != nil {
				return 0, err
			}
			if sc["stdout"] != "4\n" {
				return 0, fmt.Errorf("run_python: %v", sc)
			}
			return sinceMS(start), nil
		}
	}
	// The first run creates the container; the anchor execs in it.
	if _, err := run(dk, dsid)(); err != nil {
		return fail(err.Error())
	}
	out, err := exec.Command("docker", "ps", "-q", "--filter", "label=session_id="+dsid).Output()
	cid := strings.TrimSpace(string(out))
	if err != nil || cid == "" {
		return fail(fmt.Sprintf("the session's container: %v %q", err, out))
	}
	rows := []struct {
		name string
		f    func() (float64, error)
		ms   []float64
	}{
		{name: "docker exec (CLI), same container", f: func() (float64, error) {
			start := time.Now()
			if out, err := exec.Command("docker", "exec", "--user", "1000:1000", cid, "/usr/bin/python3", "-c", code).CombinedOutput(); err != nil || string(out) != "4\n" {
				return 0, fmt.Errorf("docker exec: %v %s", err, out)
			}
			return sinceMS(start), nil
		}},
		{name: "run_python, docker backend", f: run(dk, dsid)},
		{name: "run_python, bubblewrap backend", f: run(nat, nsid)},
	}
	for i := 0; i < s.Warmup+s.Rounds; i++ {
		for j := range rows {
			ms, err := rows[j].f()
			if err != nil {
				return fail(err.Error())
			}
			if i >= s.Warmup {
				rows[j].ms = append(rows[j].ms, ms)
			}
		}
	}
	anchor := median(rows[0].ms)
	s.printf("%-36s %9s %9s %14s\n", `warm run_python("print(2+2)")`, "p50", "p99", "vs docker exec")
	for _, r := range rows {
		s.printf("%-36s %7.1fms %7.1fms %13.2fx\n", r.name, median(r.ms), pct(r.ms, 0.99), median(r.ms)/anchor)
	}
	s.printf("\nrounds: %d interleaved; run_python measured at the MCP client over Streamable HTTP; goal: docker backend <= 1.3x docker exec\n", s.Rounds)
	if len(rows) > 1 {
		r := median(rows[1].ms) / anchor
		s.add(Row{Path: "Docker backend warm run_python vs docker exec, p50", Now: fmt.Sprintf("%.1f ms", median(rows[1].ms)),
			Anchor: fmt.Sprintf("%.1f ms", anchor), Ratio: fmt.Sprintf("%.2fx", r), Goal: "<= 1.3x", Met: r <= 1.3})
	}
	return nil
}
