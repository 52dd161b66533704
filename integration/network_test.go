package integration

// Network tests: real loopback servers on the host (plain HTTP, HTTPS with
// a test CA, a TCP echo, a pip simple index, a git repository over dumb
// HTTP), reached from inside the sandbox only through srt-mcp's proxy.
// Names are pinned to 127.0.0.1 with --resolve (no /etc/hosts edits) and
// the loopback range is allowed with --allow-ip-range, since the proxy's
// DNS-rebinding guard refuses loopback otherwise.
//
// Host assumptions: bwrap, curl, git, /usr/bin/python3 with pip (Debian's
// python3-pip).

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// nwBinOnce builds srt-mcp when SRT_MCP_BIN is not set.
var (
	nwBinOnce sync.Once
	nwBinPath string
	nwBinErr  error
)

func nwBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SRT_MCP_BIN"); p != "" {
		return p
	}
	nwBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "srt-mcp-bin-")
		if err != nil {
			nwBinErr = err
			return
		}
		nwBinPath = filepath.Join(dir, "srt-mcp")
		cmd := exec.Command("go", "build", "-tags", "urfave_cli_no_docs", "-o", nwBinPath, "./cmd/srt-mcp")
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			nwBinErr = fmt.Errorf("build: %v: %s", err, out)
		}
	})
	if nwBinErr != nil {
		t.Fatal(nwBinErr)
	}
	return nwBinPath
}

// nwServer is a loopback HTTP server that counts the requests it served.
type nwServer struct {
	*httptest.Server
	hits atomic.Int64
	port string
}

func nwStart(t *testing.T, h http.Handler, tls bool) *nwServer {
	t.Helper()
	s := &nwServer{}
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h.ServeHTTP(w, r)
	})
	if tls {
		s.Server = httptest.NewTLSServer(wrapped)
	} else {
		s.Server = httptest.NewServer(wrapped)
	}
	t.Cleanup(s.Close)
	_, s.port, _ = net.SplitHostPort(s.Listener.Addr().String())
	return s
}

type nwResult struct {
	stdout, stderr string
	code           int
	events         []map[string]any
}

// nwRun runs srt-mcp exec --json with the given flags and command, and
// splits the event stream back into stdout, stderr and events.
func nwRun(t *testing.T, cwd string, flags []string, argv ...string) nwResult {
	t.Helper()
	return nwRunEnv(t, cwd, nil, flags, argv...)
}

// nwRunEnv is nwRun with env added to srt-mcp exec's own environment.
func nwRunEnv(t *testing.T, cwd string, env []string, flags []string, argv ...string) nwResult {
	t.Helper()
	args := append([]string{"exec", "--json", "--cwd", cwd}, flags...)
	args = append(append(args, "--"), argv...)
	cmd := exec.Command(nwBin(t), args...)
	cmd.Env = append(append(os.Environ(), "HOME="+cwd), env...)
	if os.Getenv("XDG_CACHE_HOME") == "" && os.Getenv("HOME") != "" {
		// srt-mcp's private cache (the sandbox's /etc mirror) stays in the
		// suite's home, not in each test's tree (HOME is the tree here).
		cmd.Env = append(cmd.Env, "XDG_CACHE_HOME="+filepath.Join(os.Getenv("HOME"), ".cache"))
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := nwResult{}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var so, se strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if line == "" {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("bad event line %q: %v (stderr %s)", line, err, errb.String())
		}
		res.events = append(res.events, e)
		switch e["type"] {
		case "stdout":
			so.WriteString(fmt.Sprint(e["data"]))
		case "stderr":
			se.WriteString(fmt.Sprint(e["data"]))
		}
	}
	res.stdout, res.stderr = so.String(), se.String()+errb.String()
	return res
}

// netDecisions returns the network violations of a run as "decision host:port".
func (r nwResult) netDecisions() []string {
	var out []string
	for _, e := range r.events {
		v, ok := e["violation"].(map[string]any)
		if !ok || v["kind"] != "network" {
			continue
		}
		out = append(out, fmt.Sprintf("%v %v:%v %v", v["decision"], v["host"], v["port"], v["rule"]))
	}
	return out
}

func (r nwResult) hasDecision(prefix string) bool {
	for _, d := range r.netDecisions() {
		if strings.HasPrefix(d, prefix) {
			return true
		}
	}
	return false
}

func nwRequire(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
}

func pinned(names ...string) []string {
	flags := []string{"--allow-ip-range", "127.0.0.0/8"}
	for _, n := range names {
		flags = append(flags, "--resolve", n+"=127.0.0.1")
	}
	return flags
}

func TestNetworkCurlAllowedAndDenied(t *testing.T) {
	parallel(t)
	nwRequire(t, "curl")
	srv := nwStart(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello-from-host") }), false)
	cwd := sbDir(t)
	flags := append(pinned("pkgs.test", "other.test"), "--allow-domain", "pkgs.test:"+srv.port)

	r := nwRun(t, cwd, flags, "curl", "-sS", "http://pkgs.test:"+srv.port+"/")
	if r.code != 0 || r.stdout != "hello-from-host" {
		t.Fatalf("allowed name: code %d out %q err %q", r.code, r.stdout, r.stderr)
	}
	if !r.hasDecision("allow pkgs.test:" + srv.port) {
		t.Fatalf("no allow event: %v", r.netDecisions())
	}
	// The run's last violation event says what the proxy carried.
	var transfer map[string]any
	for _, e := range r.events {
		if v, ok := e["violation"].(map[string]any); ok && v["decision"] == "transfer" {
			transfer = v
		}
	}
	if transfer == nil || transfer["bytes_out"].(float64) < 50 || transfer["bytes_in"].(float64) < float64(len("hello-from-host")) {
		t.Fatalf("no transfer totals: %v", transfer)
	}

	before := srv.hits.Load()
	for _, tc := range []struct{ url, host string }{
		{"http://other.test:" + srv.port + "/", "other.test"},                   // a name not on the list
		{"http://pkgs.test:" + strconv.Itoa(nwOtherPort(t)) + "/", "pkgs.test"}, // another port
		{"http://127.0.0.1:" + srv.port + "/", "127.0.0.1"},                     // an IP literal
		{"http://2130706433:" + srv.port + "/", "127.0.0.1"},                    // the same, spelled as one number (curl canonicalises it)
	} {
		r := nwRun(t, cwd, flags, "curl", "-sS", "--noproxy", "", "-o", "/dev/stdout", "-w", "\n%{http_code}", tc.url)
		if !strings.HasSuffix(r.stdout, "403") || !strings.Contains(r.stdout, "blocked") {
			t.Fatalf("%s: want a 403 naming the block, got %q (code %d, stderr %q)", tc.url, r.stdout, r.code, r.stderr)
		}
		if !r.hasDecision("deny " + tc.host) {
			t.Fatalf("%s: no deny event for %s: %v", tc.url, tc.host, r.netDecisions())
		}
	}
	if srv.hits.Load() != before {
		t.Fatal("a denied request reached the server")
	}
}

// nwOtherPort returns a port nothing listens on.
func nwOtherPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func TestNetworkWildcardIsStrictSubdomains(t *testing.T) {
	parallel(t)
	nwRequire(t, "curl")
	srv := nwStart(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }), false)
	cwd := sbDir(t)
	flags := append(pinned("api.x.com", "x.com", "evil-x.com"), "--allow-domain", "*.x.com")
	r := nwRun(t, cwd, flags, "curl", "-sS", "http://api.x.com:"+srv.port+"/")
	if r.stdout != "ok" {
		t.Fatalf("api.x.com: %q %q", r.stdout, r.stderr)
	}
	for _, host := range []string{"x.com", "evil-x.com"} {
		r := nwRun(t, cwd, flags, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://"+host+":"+srv.port+"/")
		if r.stdout != "403" || !r.hasDecision("deny "+host) {
			t.Fatalf("%s: want 403 and a deny event, got %q %v", host, r.stdout, r.netDecisions())
		}
	}
}

func TestNetworkHTTPSWithTestCA(t *testing.T) {
	parallel(t)
	nwRequire(t, "curl")
	srv := nwStart(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "tls-hello") }), true)
	cwd := sbDir(t)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(cwd, "ca.pem"), ca, 0o644); err != nil {
		t.Fatal(err)
	}
	// httptest's certificate names example.com.
	flags := append(pinned("example.com"), "--allow-domain", "example.com:"+srv.port)
	url := "https://example.com:" + srv.port + "/"
	r := nwRun(t, cwd, flags, "curl", "-sS", "--cacert", "ca.pem", url)
	if r.stdout != "tls-hello" {
		t.Fatalf("curl over CONNECT: %q %q", r.stdout, r.stderr)
	}
	if !r.hasDecision("allow example.com:" + srv.port) {
		t.Fatalf("no CONNECT allow event: %v", r.netDecisions())
	}
	r = nwRun(t, cwd, append(flags, "--env", "SSL_CERT_FILE="+filepath.Join(cwd, "ca.pem")), "/usr/bin/python3", "-c",
		"import urllib.request; print(urllib.request.urlopen('"+url+"').read().decode())")
	if strings.TrimSpace(r.stdout) != "tls-hello" {
		t.Fatalf("python urllib over https: %q %q", r.stdout, r.stderr)
	}
}

func TestNetworkPythonUrllibAndSOCKS(t *testing.T) {
	parallel(t)
	nwRequire(t, "curl")
	srv := nwStart(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "py-ok") }), false)
	cwd := sbDir(t)
	flags := append(pinned("pkgs.test"), "--allow-domain", "pkgs.test")
	r := nwRun(t, cwd, flags, "/usr/bin/python3", "-c",
		"import urllib.request; print(urllib.request.urlopen('http://pkgs.test:"+srv.port+"/').read().decode())")
	if strings.TrimSpace(r.stdout) != "py-ok" {
		t.Fatalf("urllib: %q %q", r.stdout, r.stderr)
	}
	// socks5h: the proxy resolves the name; there is no DNS inside.
	r = nwRun(t, cwd, flags, "sh", "-c", `curl -sS -x "$ALL_PROXY" http://pkgs.test:`+srv.port+`/`)
	if r.stdout != "py-ok" || !strings.Contains(strings.Join(r.netDecisions(), "\n"), "allow pkgs.test:"+srv.port) {
		t.Fatalf("socks5h: %q %q %v", r.stdout, r.stderr, r.netDecisions())
	}
	r = nwRun(t, cwd, flags, "sh", "-c", `curl -sS -x "$ALL_PROXY" http://denied.test:`+srv.port+`/; echo rc=$?`)
	if !strings.Contains(r.stdout, "rc=97") || !r.hasDecision("deny denied.test") {
		t.Fatalf("socks5 refusal: %q %q %v", r.stdout, r.stderr, r.netDecisions())
	}
}

func TestNetworkPipIndex(t *testing.T) {
	parallel(t)
	srv := nwPackageIndex(t)
	cwd := sbDir(t)
	flags := append(pinned("pypi.test"), "--allow-domain", "pypi.test:"+srv.port)
	r := nwRun(t, cwd, flags, "/usr/bin/python3", "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
		"--index-url", "http://pypi.test:"+srv.port+"/simple/", "--trusted-host", "pypi.test", "-d", "/tmp/dl", "demo-pkg")
	if r.code != 0 || !strings.Contains(r.stdout, "Saved") {
		t.Fatalf("pip download: code %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// Without the index on the list, pip gets the proxy's refusal.
	r = nwRun(t, cwd, pinned("pypi.test"), "/usr/bin/python3", "-m", "pip", "download", "--no-deps", "--retries", "0",
		"--disable-pip-version-check", "--index-url", "http://pypi.test:"+srv.port+"/simple/", "--trusted-host", "pypi.test", "-d", "/tmp/dl", "demo-pkg")
	if r.code == 0 || !r.hasDecision("deny pypi.test:"+srv.port) {
		t.Fatalf("pip without permission: code %d %v\n%s", r.code, r.netDecisions(), r.stderr)
	}
}

// nwPackageIndex serves a simple package index on loopback with one
// package, demo-pkg 1.0 (module demo_pkg, hello() -> "hi from demo_pkg").
func nwPackageIndex(t *testing.T) *nwServer {
	t.Helper()
	whl := nwWheel(t, "demo_pkg", "1.0", "def hello():\n    return 'hi from demo_pkg'\n")
	name := "demo_pkg-1.0-py3-none-any.whl"
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/demo-pkg/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="/files/%s">%s</a></body></html>`, name, name)
	})
	mux.HandleFunc("/files/"+name, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(whl) })
	srv := nwStart(t, mux, false)
	return srv
}

// nwWheel builds a minimal pure-Python wheel.
func nwWheel(t *testing.T, pkg, version, code string) []byte {
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	dist := pkg + "-" + version + ".dist-info"
	files := map[string]string{
		pkg + "/__init__.py":    code,
		dist + "/METADATA":      "Metadata-Version: 2.1\nName: " + strings.ReplaceAll(pkg, "_", "-") + "\nVersion: " + version + "\n",
		dist + "/WHEEL":         "Wheel-Version: 1.0\nGenerator: srt-mcp-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
		dist + "/top_level.txt": pkg + "\n",
	}
	var record strings.Builder
	for name, content := range files {
		w, _ := z.Create(name)
		_, _ = io.WriteString(w, content)
		record.WriteString(name + ",,\n")
	}
	record.WriteString(dist + "/RECORD,,\n")
	w, _ := z.Create(dist + "/RECORD")
	_, _ = io.WriteString(w, record.String())
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestNetworkGitCloneOverHTTP(t *testing.T) {
	parallel(t)
	nwRequire(t, "git")
	work := sbDir(t)
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "HOME="+work)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	src := filepath.Join(work, "src")
	_ = os.MkdirAll(src, 0o755)
	git(src, "init", "-q")
	_ = os.WriteFile(filepath.Join(src, "README"), []byte("cloned through the proxy\n"), 0o644)
	git(src, "add", "README")
	git(src, "commit", "-qm", "init")
	git(work, "clone", "-q", "--bare", "src", "repo.git")
	git(filepath.Join(work, "repo.git"), "update-server-info")
	srv := nwStart(t, http.FileServer(http.Dir(work)), false)
	cwd := sbDir(t)
	flags := append(pinned("git.test"), "--allow-domain", "git.test:"+srv.port)
	r := nwRun(t, cwd, flags, "sh", "-c", "git clone -q http://git.test:"+srv.port+"/repo.git /tmp/r && cat /tmp/r/README")
	if r.code != 0 || !strings.Contains(r.stdout, "cloned through the proxy") {
		t.Fatalf("git clone: code %d %q %q", r.code, r.stdout, r.stderr)
	}
}

func TestNetworkNoBypass(t *testing.T) {
	parallel(t)
	nwRequire(t, "curl")
	srv := nwStart(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "should-not-see") }), false)
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	var echoHits atomic.Int64
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			echoHits.Add(1)
			c.Close()
		}
	}()
	_, echoPort, _ := net.SplitHostPort(echo.Addr().String())
	cwd := sbDir(t)
	flags := append(pinned("pkgs.test"), "--allow-domain", "pkgs.test:"+srv.port)
	for _, argv := range [][]string{
		{"curl", "-sS", "--noproxy", "*", "http://pkgs.test:" + srv.port + "/"},                                   // no DNS inside
		{"curl", "-sS", "--noproxy", "*", "http://127.0.0.1:" + srv.port + "/"},                                   // the sandbox's own loopback
		{"/usr/bin/python3", "-c", "import socket; socket.create_connection(('127.0.0.1', " + echoPort + "), 2)"}, // raw socket
		{"/usr/bin/python3", "-c", "import socket; socket.create_connection(('10.0.2.2', 80), 2)"},                // any other address: no route
	} {
		r := nwRun(t, cwd, flags, argv...)
		if r.code == 0 || strings.Contains(r.stdout, "should-not-see") {
			t.Fatalf("%v bypassed the proxy: code %d %q", argv, r.code, r.stdout)
		}
	}
	if srv.hits.Load() != 0 || echoHits.Load() != 0 {
		t.Fatalf("the host servers were reached: http %d, tcp %d", srv.hits.Load(), echoHits.Load())
	}
	// A proxy request without the execution's token gets 407.
	r := nwRun(t, cwd, flags, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-x", "http://127.0.0.1:3128", "http://pkgs.test:"+srv.port+"/")
	if r.stdout != "407" {
		t.Fatalf("no token: want 407, got %q", r.stdout)
	}
}

func TestNetworkEmptyAllowListMeansNone(t *testing.T) {
	parallel(t)
	nwRequire(t, "curl")
	srv := nwStart(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "x") }), false)
	cwd := sbDir(t)
	r := nwRun(t, cwd, pinned("pkgs.test"), "curl", "-s", "-w", "%{http_code}", "-o", "/dev/null", "http://pkgs.test:"+srv.port+"/")
	if r.stdout != "403" || !r.hasDecision("deny pkgs.test") || srv.hits.Load() != 0 {
		t.Fatalf("empty allow-list: %q %v hits %d", r.stdout, r.netDecisions(), srv.hits.Load())
	}
	if !strings.Contains(strings.Join(r.netDecisions(), "\n"), "network disabled") {
		t.Fatalf("the reason should say the network is disabled: %v", r.netDecisions())
	}
}
