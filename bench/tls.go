package bench

import (
	"archive/zip"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/srt-mcp/srt-mcp/tlsca"
)

// tlsHost is the name the TLS part's upstream is reached by: its
// certificate's, pinned to loopback inside the sandbox (--resolve) and on
// the host (curl --resolve; pip goes to 127.0.0.1, which the certificate
// also names).
const tlsHost = "api.example.com"

// tlsToken is the operator's credential the TLS part masks: long, as real
// tokens are, so the proxy scans every response for it and its stand-in.
const tlsToken = "bench_operatorsRealToken_0123456789abcdef0123456789ABCDEF"

// tls measures the TLS-terminating egress proxy (network.tlsTerminate,
// with a masked credential, so responses are scanned) against direct
// HTTPS on loopback, interleaved: a request on a kept-alive connection
// and a new connection (curl's time_total per transfer, the first of each
// run left out, so sandbox start-up is not counted), a 200 MB download,
// and pip download of 20 wheels from an HTTPS simple index (wall time of
// the whole command, sandbox included). The upstream has its own CA and
// an ECDSA P-256 leaf, as the proxy's leaves are, so a handshake costs
// both sides alike, and the host's tools trust a bundle the size of the
// sandbox's; curl inside the sandbox sends the stand-in as a bearer token
// (the proxy swaps it in), and curl on the host the real one.
func (s *suite) tls() error {
	curl, err := exec.LookPath("curl")
	if err != nil {
		return fail("bench --tls needs curl")
	}
	dir, err := os.MkdirTemp("", "srt-mcp-bench-tls-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	caPEM, leaf, err := benchCA(tlsHost, "127.0.0.1")
	if err != nil {
		return err
	}
	caPath := filepath.Join(dir, "upstream-ca.pem")
	if err := os.WriteFile(caPath, caPEM, 0o644); err != nil {
		return err
	}
	// What curl and pip on the host trust: the host's roots and the
	// upstream's CA, a bundle the size of the sandbox's (the host's roots,
	// the proxy's CA and the extra CA). OpenSSL 3 takes ~40 ms to load
	// ~150 roots, in every process: with the upstream's CA alone, the
	// anchor of a new connection would leave that out.
	_, roots := tlsca.SystemBundle()
	bundle := filepath.Join(dir, "upstream-bundle.pem")
	if err := os.WriteFile(bundle, append(tlsca.CertificatesOnly(roots), caPEM...), 0o644); err != nil {
		return err
	}
	const size = 200 << 20
	const pkgs = 20
	zeros := make([]byte, 1<<20)
	mux := http.NewServeMux()
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for i := 0; i < size/len(zeros); i++ {
			if _, err := w.Write(zeros); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	var names []string
	for i := 1; i <= pkgs; i++ {
		name := fmt.Sprintf("bench-pkg-%02d", i)
		names = append(names, name)
		mod := strings.ReplaceAll(name, "-", "_")
		file := mod + "-1.0-py3-none-any.whl"
		whl, err := benchWheel(mod, "1.0")
		if err != nil {
			return err
		}
		mux.HandleFunc("/simple/"+name+"/", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="/files/%s">%s</a></body></html>`, file, file)
		})
		mux.HandleFunc("/files/"+file, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(whl) })
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ErrorLog: log.New(io.Discard, "", 0),
		// HTTP/1.1 only, as the proxy speaks on both of its sides.
		TLSConfig:    &tls.Config{Certificates: []tls.Certificate{leaf}, NextProtos: []string{"http/1.1"}},
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}}
	go srv.ServeTLS(l, "", "")
	defer srv.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	hostPort := tlsHost + ":" + port
	url := "https://" + hostPort
	settings := filepath.Join(dir, "settings.json")
	b, _ := json.Marshal(map[string]any{
		"network":     map[string]any{"tlsTerminate": map[string]any{"extraCaCertPaths": []string{caPath}}},
		"credentials": map[string]any{"envVars": []any{map[string]any{"name": "BENCH_TOKEN", "mode": "mask", "injectHosts": []string{tlsHost}}}},
	})
	if err := os.WriteFile(settings, b, 0o644); err != nil {
		return err
	}
	// Variables that would override --cert (requests reads them before
	// pip's setting) or add a local wheel directory to the index are left
	// out, on the host and inside alike (the sandbox sets its own).
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != "REQUESTS_CA_BUNDLE" && k != "CURL_CA_BUNDLE" && k != "PIP_FIND_LINKS" {
			env = append(env, kv)
		}
	}
	env = append(env, "BENCH_TOKEN="+tlsToken)
	// direct runs argv on the host, proxied inside srt-mcp exec through
	// the terminating proxy; both print stdout, or an error with stderr.
	run := func(argv []string) ([]byte, error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = env
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("%s: %v: %s%s", truncate(strings.Join(argv, " "), 300), err, out, errb.Bytes())
		}
		return out, nil
	}
	direct := func(argv ...string) ([]byte, error) { return run(argv) }
	proxied := func(argv ...string) ([]byte, error) {
		return run(append([]string{s.Binary, "exec", "--settings", settings, "--allow-ip-range", "127.0.0.0/8",
			"--resolve", tlsHost + "=127.0.0.1", "--allow-domain", hostPort, "--"}, argv...))
	}
	// The same curl command line both ways; on the host it trusts the
	// upstream's CA and resolves the name itself, inside the sandbox it
	// trusts the proxy's through the sandbox's bundle.
	hostCurl := curl + " -s --noproxy '*' --cacert '" + bundle + "' --resolve " + hostPort + ":127.0.0.1"
	sandboxCurl := "curl -s"
	auth := ` -H "Authorization: Bearer $BENCH_TOKEN" -w '%{num_connects} %{time_total}\n'`
	const keepN, newN = 30, 20
	keepAlive := func(c string) string {
		return "exec " + c + auth + strings.Repeat(" -o /dev/null "+url+"/small", keepN)
	}
	newConn := func(c string) string {
		return "for i in $(seq " + strconv.Itoa(newN) + "); do " + c + auth + " -o /dev/null " + url + "/small || exit 1; done"
	}
	download := func(c string) string {
		return "exec " + c + ` -H "Authorization: Bearer $BENCH_TOKEN" -o /dev/null -w '%{speed_download} %{time_total}\n' ` + url + "/big"
	}
	pipArgs := []string{s.Python, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--no-cache-dir"}
	pipDirect := func() (float64, error) {
		dl, err := os.MkdirTemp(dir, "dl-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(dl)
		start := time.Now()
		out, err := direct(append(append(pipArgs, "--cert", bundle, "--index-url", "https://127.0.0.1:"+port+"/simple/", "-d", dl), names...)...)
		return sinceMS(start), pipSaved(out, err, pkgs)
	}
	pipProxied := func() (float64, error) {
		start := time.Now()
		out, err := proxied(append(append(pipArgs, "--index-url", url+"/simple/", "-d", "/tmp/dl"), names...)...)
		return sinceMS(start), pipSaved(out, err, pkgs)
	}
	rounds := min(s.Rounds, 20)
	bigRounds := min(s.Rounds, 10)
	pipRounds := min(s.Rounds, 5)
	var dKeep, pKeep, dNew, pNew, dBig, pBig, dPip, pPip []float64
	for i := 0; i < rounds; i++ {
		for _, r := range []struct {
			f       func(...string) ([]byte, error)
			script  string
			dst     *[]float64
			connect int // what curl must report as num_connects after the first transfer
		}{{direct, keepAlive(hostCurl), &dKeep, 0}, {proxied, keepAlive(sandboxCurl), &pKeep, 0},
			{direct, newConn(hostCurl), &dNew, 1}, {proxied, newConn(sandboxCurl), &pNew, 1}} {
			ts, err := curlTimes(r.f("sh", "-c", r.script))
			if err == nil {
				err = checkConnects(ts, r.connect)
			}
			if err != nil {
				return fail(err.Error())
			}
			for _, t := range ts[1:] {
				*r.dst = append(*r.dst, t[1])
			}
		}
		if i < bigRounds {
			for _, r := range []struct {
				f      func(...string) ([]byte, error)
				script string
				dst    *[]float64
			}{{direct, download(hostCurl), &dBig}, {proxied, download(sandboxCurl), &pBig}} {
				v, err := parseCurl(r.f("sh", "-c", r.script))
				if err != nil {
					return fail(err.Error())
				}
				*r.dst = append(*r.dst, v[0])
			}
		}
		if i < pipRounds {
			for _, r := range []struct {
				f   func() (float64, error)
				dst *[]float64
			}{{pipDirect, &dPip}, {pipProxied, &pPip}} {
				ms, err := r.f()
				if err != nil {
					return fail(err.Error())
				}
				*r.dst = append(*r.dst, ms)
			}
		}
	}
	ms := func(xs []float64) float64 { return median(xs) * 1000 }
	mbps := func(xs []float64) float64 { return median(xs) / (1 << 20) }
	keepAdded, newAdded := ms(pKeep)-ms(dKeep), ms(pNew)-ms(dNew)
	bigRatio, pipRatio := median(pBig)/median(dBig), median(pPip)/median(dPip)
	s.printf("%-40s %12s %12s\n", "HTTPS, TLS-terminating proxy (masked)", "direct", "via proxy")
	s.printf("%-40s %9.2f ms %9.2f ms   added %.2f ms\n", "kept-alive request, p50 time_total", ms(dKeep), ms(pKeep), keepAdded)
	s.printf("%-40s %9.2f ms %9.2f ms   added %.2f ms\n", "new connection, p50 time_total", ms(dNew), ms(pNew), newAdded)
	s.printf("%-40s %7.0f MB/s %7.0f MB/s   ratio %.2fx\n", "200 MB download, median throughput", mbps(dBig), mbps(pBig), bigRatio)
	s.printf("%-40s %9.0f ms %9.0f ms   ratio %.2fx\n", "pip download of 20 wheels, median wall", median(dPip), median(pPip), pipRatio)
	s.printf("\nrounds: %d (%d requests kept alive, %d new connections each), %d downloads, %d pip runs (interleaved)\n",
		rounds, keepN-1, newN-1, bigRounds, pipRounds)
	s.printf("goals: added p50 <= 1 ms kept alive, <= 3 ms new connection; download >= 0.5x; pip <= 1.3x\n")
	s.add(Row{Path: "HTTPS request, kept alive, terminating proxy vs direct, p50", Now: fmt.Sprintf("%.2f ms", ms(pKeep)),
		Anchor: fmt.Sprintf("%.2f ms", ms(dKeep)), Ratio: fmt.Sprintf("%+.2f ms", keepAdded), Goal: "<= +1 ms", Met: keepAdded <= 1})
	s.add(Row{Path: "HTTPS new connection, terminating proxy vs direct, p50", Now: fmt.Sprintf("%.2f ms", ms(pNew)),
		Anchor: fmt.Sprintf("%.2f ms", ms(dNew)), Ratio: fmt.Sprintf("%+.2f ms", newAdded), Goal: "<= +3 ms", Met: newAdded <= 3})
	s.add(Row{Path: "200 MB HTTPS download, terminating proxy vs direct", Now: fmt.Sprintf("%.0f MB/s", mbps(pBig)),
		Anchor: fmt.Sprintf("%.0f MB/s", mbps(dBig)), Ratio: fmt.Sprintf("%.2fx", bigRatio), Goal: ">= 0.5x", Met: bigRatio >= 0.5})
	s.add(Row{Path: "pip download of 20 wheels, HTTPS index, terminating proxy", Now: fmt.Sprintf("%.0f ms", median(pPip)),
		Anchor: fmt.Sprintf("%.0f ms", median(dPip)), Ratio: fmt.Sprintf("%.2fx", pipRatio), Goal: "<= 1.3x", Met: pipRatio <= 1.3})
	return nil
}

// curlTimes reads what curl -w "%{num_connects} %{time_total}\n" printed,
// one line a transfer; err is the command's.
func curlTimes(out []byte, err error) ([][2]float64, error) {
	if err != nil {
		return nil, err
	}
	var ts [][2]float64
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("curl printed %q", out)
		}
		n, err1 := strconv.ParseFloat(f[0], 64)
		t, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("curl printed %q", out)
		}
		ts = append(ts, [2]float64{n, t})
	}
	if len(ts) < 2 {
		return nil, fmt.Errorf("curl printed %q", out)
	}
	return ts, nil
}

// checkConnects holds every transfer after the first to want connections
// made: 0 on a kept-alive connection, 1 for a new one each.
func checkConnects(ts [][2]float64, want int) error {
	for i, t := range ts[1:] {
		if int(t[0]) != want {
			return fmt.Errorf("transfer %d of %d made %d connections, want %d (all: %v)", i+2, len(ts), int(t[0]), want, ts)
		}
	}
	return nil
}

// pipSaved checks that pip download saved n files.
func pipSaved(out []byte, err error, n int) error {
	if err != nil {
		return fmt.Errorf("pip download: %v", err)
	}
	if c := strings.Count(string(out), "Saved "); c != n {
		return fmt.Errorf("pip download saved %d files, want %d: %s", c, n, out)
	}
	return nil
}

// truncate is s cut to n bytes, "..." marking a cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// benchCA makes a CA (ECDSA P-256) and a leaf it signed for names (DNS
// names or IP addresses): the CA's certificate in PEM, and the leaf with
// its key.
func benchCA(names ...string) ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "srt-mcp bench upstream CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageCertSign,
		BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	ca, _ = x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// benchWheel builds a minimal pure-Python wheel of module mod.
func benchWheel(mod, version string) ([]byte, error) {
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	dist := mod + "-" + version + ".dist-info"
	files := [][2]string{
		{mod + "/__init__.py", "def hello():\n    return 'hi from " + mod + "'\n"},
		{dist + "/METADATA", "Metadata-Version: 2.1\nName: " + strings.ReplaceAll(mod, "_", "-") + "\nVersion: " + version + "\n"},
		{dist + "/WHEEL", "Wheel-Version: 1.0\nGenerator: srt-mcp-bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
		{dist + "/top_level.txt", mod + "\n"},
	}
	var record strings.Builder
	for _, f := range files {
		w, err := z.Create(f[0])
		if err != nil {
			return nil, err
		}
		_, _ = io.WriteString(w, f[1])
		record.WriteString(f[0] + ",,\n")
	}
	record.WriteString(dist + "/RECORD,,\n")
	w, err := z.Create(dist + "/RECORD")
	if err != nil {
		return nil, err
	}
	_, _ = io.WriteString(w, record.String())
	if err := z.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
