package bench

import (
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
)

// net measures what the egress proxy costs a real client: curl on
// the host straight to a loopback server, and curl inside srt-mcp exec
// through the in-sandbox proxy (HTTPS-style CONNECT via --proxytunnel),
// interleaved. curl reports its own speed and time, so sandbox start-up is
// not counted.
func (s *suite) net() error {
	curl, err := exec.LookPath("curl")
	if err != nil {
		return fail("bench --net needs curl")
	}
	const big = 200 << 20
	zeros := make([]byte, 1<<20)
	mux := http.NewServeMux()
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(big))
		for i := 0; i < big/len(zeros); i++ {
			if _, err := w.Write(zeros); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go http.Serve(l, mux)
	addr := l.Addr().String()
	rounds := min(s.Rounds, 20)
	// curl -w prints: bytes/s of the body, and total seconds.
	w := "%{speed_download} %{time_total}\n"
	direct := func(path string) ([]float64, error) {
		out, err := exec.Command(curl, "-s", "-o", "/dev/null", "-w", w, "http://"+addr+path).Output()
		return parseCurl(out, err)
	}
	proxied := func(path string) ([]float64, error) {
		out, err := exec.Command(s.Binary, "exec", "--allow-domain", addr, "--", "curl", "-s", "--proxytunnel",
			"--noproxy", "", "-o", "/dev/null", "-w", w, "http://"+addr+path).Output()
		return parseCurl(out, err)
	}
	var dBig, pBig, dSmall, pSmall []float64
	for i := 0; i < rounds; i++ {
		for _, run := range []struct {
			f    func(string) ([]float64, error)
			path string
			dst  *[]float64
			idx  int
		}{{direct, "/big", &dBig, 0}, {proxied, "/big", &pBig, 0}, {direct, "/small", &dSmall, 1}, {proxied, "/small", &pSmall, 1}} {
			v, err := run.f(run.path)
			if err != nil {
				return fail(err.Error())
			}
			*run.dst = append(*run.dst, v[run.idx])
		}
	}
	mbps := func(xs []float64) float64 { return median(xs) / (1 << 20) }
	s.printf("%-34s %12s %12s\n", "200 MB download (curl)", "direct", "via proxy")
	s.printf("%-34s %9.0f MB/s %7.0f MB/s   ratio %.2fx\n", "median throughput", mbps(dBig), mbps(pBig), median(pBig)/median(dBig))
	s.printf("%-34s %9.2f ms %9.2f ms   added %.2f ms\n", "small request, median time_total", median(dSmall)*1000, median(pSmall)*1000, (median(pSmall)-median(dSmall))*1000)
	s.printf("\nrounds: %d (interleaved); goal: via proxy >= 0.80x direct throughput\n", rounds)
	ratio := median(pBig) / median(dBig)
	s.add(Row{Path: "200 MB download through the proxy (CONNECT, loopback) vs direct", Now: fmt.Sprintf("%.0f MB/s", mbps(pBig)),
		Anchor: fmt.Sprintf("%.0f MB/s", mbps(dBig)), Ratio: fmt.Sprintf("%.2fx", ratio), Goal: ">= 0.8x", Met: ratio >= 0.8})
	return nil
}

// parseCurl reads what curl -w "%{speed_download} %{time_total}" printed:
// bytes per second and seconds; err is curl's, quoted with its output.
func parseCurl(out []byte, err error) ([]float64, error) {
	if err != nil {
		return nil, fmt.Errorf("curl: %v: %s", err, out)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return nil, fmt.Errorf("curl printed %q", out)
	}
	a, _ := strconv.ParseFloat(f[0], 64)
	b, _ := strconv.ParseFloat(f[1], 64)
	return []float64{a, b}, nil
}
