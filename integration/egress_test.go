package integration

// Egress tests (issue 27): TLS-terminated tunnels and masked credentials,
// with the real tools inside the sandbox (curl, Python urllib and
// requests, pip, node fetch, npm, git) against loopback HTTPS upstreams
// that have their own CA (httptest's, for example.com and
// *.example.com), which the operator trusts through
// tlsTerminate.extraCaCertPaths. Every tool verifies the proxy's leaf
// through the sandbox's bundle without a flag; every upstream sees the
// real secret; nothing inside ever does.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// egSecret is the operator's token the tests mask: long, so its stand-in
// has its length.
const egSecret = "ghp_operatorsRealToken0123456789abcdefABCDEF"

// egUpstream is an HTTPS upstream that records the Authorization it got
// and echoes the request back (the worst case for redaction).
type egUpstream struct {
	*nwServer
	mu    sync.Mutex
	auths []string
}

func egStart(t *testing.T, extra http.Handler) *egUpstream {
	t.Helper()
	u := &egUpstream{}
	u.nwServer = nwStart(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.auths = append(u.auths, r.Header.Get("Authorization"))
		u.mu.Unlock()
		if extra != nil && !strings.HasPrefix(r.URL.Path, "/echo") {
			extra.ServeHTTP(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		fmt.Fprintf(w, "echo %s %s auth=[%s] body=[%s]", r.Method, r.URL.Path, r.Header.Get("Authorization"), b)
	}), true)
	return u
}

func (u *egUpstream) sawSecret() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, a := range u.auths {
		if strings.Contains(a, egSecret) {
			return true
		}
		if strings.HasPrefix(a, "Basic ") {
			if b, err := base64.StdEncoding.DecodeString(a[6:]); err == nil && strings.Contains(string(b), egSecret) {
				return true
			}
		}
	}
	return false
}

// egSettings writes a settings file that terminates TLS, trusts the
// upstream's CA for re-origination and masks EG_TOKEN for injectHosts.
func egSettings(t *testing.T, dir string, up *egUpstream, injectHosts []string, extra map[string]any) string {
	t.Helper()
	caPath := filepath.Join(dir, "upstream-ca.pem")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw})
	if err := os.WriteFile(caPath, ca, 0o644); err != nil {
		t.Fatal(err)
	}
	network := map[string]any{"tlsTerminate": map[string]any{"extraCaCertPaths": []string{caPath}}}
	for k, v := range extra {
		network[k] = v
	}
	entry := map[string]any{"name": "EG_TOKEN", "mode": "mask", "injectHosts": injectHosts}
	if b, ok := network["_injectBody"]; ok {
		entry["injectBody"] = b // the test's switch, not a network key
		delete(network, "_injectBody")
	}
	s := map[string]any{
		"network":     network,
		"credentials": map[string]any{"envVars": []any{entry}},
	}
	b, _ := json.Marshal(s)
	path := filepath.Join(dir, "settings.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// egRun is nwRun with EG_TOKEN in srt-mcp exec's own environment.
func egRun(t *testing.T, cwd string, flags []string, argv ...string) nwResult {
	t.Helper()
	r := nwRunEnv(t, cwd, []string{"EG_TOKEN=" + egSecret}, flags, argv...)
	if strings.Contains(r.stdout+r.stderr, egSecret) {
		t.Fatalf("the real secret reached the sandbox's output:\n%s\n%s", r.stdout, r.stderr)
	}
	for _, e := range r.events {
		if b, _ := json.Marshal(e); strings.Contains(string(b), egSecret) {
			t.Fatalf("the real secret is in an event: %s", b)
		}
	}
	return r
}

func (r nwResult) requests() []map[string]any {
	var out []map[string]any
	for _, e := range r.events {
		if v, ok := e["violation"].(map[string]any); ok && v["kind"] == "request" {
			out = append(out, v)
		}
	}
	return out
}

func TestEgressCurlAndPythonWithMaskedToken(t *testing.T) {
	parallel(t)
	nwRequire(t, "curl")
	up := egStart(t, nil)
	cwd := sbDir(t)
	host := "api.example.com:" + up.port
	settings := egSettings(t, cwd, up, []string{"api.example.com"}, nil)
	flags := append(pinned("api.example.com"), "--allow-domain", host, "--settings", settings)
	url := "https://" + host + "/echo"
	r := egRun(t, cwd, flags, "sh", "-c", `echo "inside: $EG_TOKEN"; curl -sS -H "Authorization: Bearer $EG_TOKEN" `+url)
	if r.code != 0 || !strings.Contains(r.stdout, "echo GET /echo") {
		t.Fatalf("curl through the terminated tunnel: code %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !up.sawSecret() {
		t.Fatal("the upstream did not get the real token")
	}
	if !strings.Contains(r.stdout, "inside: srtmcp_masked_") || !strings.Contains(r.stdout, "auth=[Bearer srtmcp_masked_") {
		t.Fatalf("the sandbox must see the stand-in, and the echo must come back with it: %s", r.stdout)
	}
	reqs := r.requests()
	if len(reqs) != 1 || reqs[0]["protocol"] != "https" || reqs[0]["path"] != "/echo" || fmt.Sprint(reqs[0]["credentials"]) != "[EG_TOKEN]" {
		t.Fatalf("request events: %v", reqs)
	}
	py := `import os, urllib.request, requests
h = {"Authorization": "token " + os.environ["EG_TOKEN"]}
print(urllib.request.urlopen(urllib.request.Request("` + url + `/urllib", headers=h)).read().decode())
print(requests.post("` + url + `/requests", headers=h, data="x=" + os.environ["EG_TOKEN"]).text)`
	r = egRun(t, cwd, flags, "/usr/bin/python3", "-c", py)
	if r.code != 0 || !strings.Contains(r.stdout, "echo GET /echo/urllib") || !strings.Contains(r.stdout, "echo POST /echo/requests") {
		t.Fatalf("python urllib and requests: code %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestEgressStandinGoesNowhereElse(t *testing.T) {
	parallel(t)
	nwRequire(t, "curl")
	up := egStart(t, nil)
	cwd := sbDir(t)
	settings := egSettings(t, cwd, up, []string{"api.example.com"}, nil)
	flags := append(pinned("api.example.com", "other.example.com"), "--allow-domain", "api.example.com:"+up.port,
		"--allow-domain", "other.example.com:"+up.port, "--settings", settings)
	// Another allowed host, over TLS; and the injection host over
	// cleartext (the proxy must not put a secret on the wire in clear).
	plain := nwStart(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "plain auth=", r.Header.Get("Authorization"))
	}), false)
	flags = append(flags, "--allow-domain", "api.example.com:"+plain.port)
	r := egRun(t, cwd, flags, "sh", "-c", `curl -sS -H "Authorization: Bearer $EG_TOKEN" https://other.example.com:`+up.port+`/echo; echo; `+
		`curl -sS -H "Authorization: Bearer $EG_TOKEN" http://api.example.com:`+plain.port+`/`)
	if r.code != 0 || strings.Count(r.stdout, "Bearer srtmcp_masked_") != 2 {
		t.Fatalf("code %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if up.sawSecret() {
		t.Fatal("a host outside injectHosts got the real token")
	}
}

func TestEgressPipFromHTTPSIndex(t *testing.T) {
	parallel(t)
	idx := nwPackageIndex(t) // for its handler only
	up := egStart(t, idx.Config.Handler)
	cwd := sbDir(t)
	host := "pypi.example.com:" + up.port
	flags := append(pinned("pypi.example.com"), "--allow-domain", host, "--settings", egSettings(t, cwd, up, []string{"api.example.com"}, nil))
	r := egRun(t, cwd, flags, "/usr/bin/python3", "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
		"--index-url", "https://"+host+"/simple/", "-d", "/tmp/dl", "demo-pkg")
	if r.code != 0 || !strings.Contains(r.stdout, "Saved") {
		t.Fatalf("pip download over a terminated tunnel (no --trusted-host, no --cert): code %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestEgressNodeFetchAndNpm(t *testing.T) {
	parallel(t)
	nwRequire(t, "node", "npm")
	clients := os.Getenv("SRT_MCP_CLIENTS")
	undici := filepath.Join(clients, "node_modules", "undici7")
	if _, err := os.Stat(undici); clients == "" || err != nil {
		if os.Getenv("SRT_MCP_REQUIRE_CLIENTS") != "" {
			t.Fatalf("undici7 is not installed in %s (make integration-clients)", clients)
		}
		t.Skip("SRT_MCP_CLIENTS with undici7 is needed")
	}
	reg := &npmRegistry{}
	up := egStart(t, reg)
	reg.base = "https://npm.example.com:" + up.port
	cwd := sbDir(t)
	host := "npm.example.com:" + up.port
	flags := append(pinned("npm.example.com"), "--allow-domain", host, "--allow-read", undici,
		"--settings", egSettings(t, cwd, up, []string{"npm.example.com"}, nil))
	if os.Geteuid() != 0 {
		// Node's fetch parses HTTP in WebAssembly, whose memory V8
		// reserves ~10 GiB of address space for; without root there is no
		// cgroup and the memory limit is RLIMIT_AS (README, Limits).
		flags = append(flags, "--max-memory", "32G")
	}
	// Node 20's fetch reads no proxy variables: undici's EnvHttpProxyAgent
	// (what Node 24's NODE_USE_ENV_PROXY does) sends it through the proxy;
	// NODE_EXTRA_CA_CERTS makes it trust the proxy's leaf.
	js := `const { EnvHttpProxyAgent, setGlobalDispatcher } = require(` + fmt.Sprintf("%q", filepath.Join(undici, "index.js")) + `);
setGlobalDispatcher(new EnvHttpProxyAgent());
fetch("https://` + host + `/echo/fetch", { headers: { authorization: "Bearer " + process.env.EG_TOKEN } })
  .then(r => r.text()).then(t => console.log(t)).catch(e => { console.error("fetch failed:", e, e.cause); process.exit(1); });`
	r := egRun(t, cwd, flags, "node", "-e", js)
	if r.code != 0 || !strings.Contains(r.stdout, "echo GET /echo/fetch auth=[Bearer srtmcp_masked_") {
		t.Fatalf("node fetch: code %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !up.sawSecret() {
		t.Fatal("node fetch: the upstream did not get the real token")
	}
	r = egRun(t, cwd, flags, "sh", "-c", "cd /tmp && npm install --no-audit --no-fund --loglevel=error --registry "+reg.base+"/ demo-npm && node -e 'console.log(require(\"demo-npm\"))'")
	if r.code != 0 || !strings.Contains(r.stdout, "hi from demo-npm") {
		t.Fatalf("npm install from an HTTPS registry: code %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// npmRegistry serves one package, demo-npm 1.0.0.
type npmRegistry struct {
	base string
	once sync.Once
	tgz  []byte
}

func (n *npmRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n.once.Do(func() {
		var b bytes.Buffer
		gz := gzip.NewWriter(&b)
		tw := tar.NewWriter(gz)
		for name, body := range map[string]string{
			"package/package.json": `{"name":"demo-npm","version":"1.0.0","main":"index.js"}`,
			"package/index.js":     `module.exports = "hi from demo-npm";`,
		} {
			_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
			_, _ = tw.Write([]byte(body))
		}
		tw.Close()
		gz.Close()
		n.tgz = b.Bytes()
	})
	switch r.URL.Path {
	case "/demo-npm":
		s1 := sha1.Sum(n.tgz)
		s512 := sha512.Sum512(n.tgz)
		doc := map[string]any{"name": "demo-npm", "dist-tags": map[string]string{"latest": "1.0.0"},
			"versions": map[string]any{"1.0.0": map[string]any{"name": "demo-npm", "version": "1.0.0", "main": "index.js",
				"dist": map[string]string{"tarball": n.base + "/demo-npm/-/demo-npm-1.0.0.tgz", "shasum": hex.EncodeToString(s1[:]),
					"integrity": "sha512-" + base64.StdEncoding.EncodeToString(s512[:])}}}}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	case "/demo-npm/-/demo-npm-1.0.0.tgz":
		_, _ = w.Write(n.tgz)
	default:
		http.NotFound(w, r)
	}
}

func TestEgressGitCloneAndPushWithMaskedToken(t *testing.T) {
	parallel(t)
	nwRequire(t, "git")
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Skip("git-http-backend is not installed")
	}
	work := t.TempDir()
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
	git(src, "init", "-q", "-b", "main")
	_ = os.WriteFile(filepath.Join(src, "README"), []byte("cloned through a terminated tunnel\n"), 0o644)
	git(src, "add", "README")
	git(src, "commit", "-qm", "init")
	git(work, "clone", "-q", "--bare", "src", "repo.git")
	git(filepath.Join(work, "repo.git"), "config", "http.receivepack", "true")
	// Smart HTTP that wants the real token as the Basic password.
	cgiH := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + work, "GIT_HTTP_EXPORT_ALL=1"}}
	up := egStart(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pw, ok := r.BasicAuth(); !ok || pw != egSecret {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "auth", http.StatusUnauthorized)
			return
		}
		cgiH.ServeHTTP(w, r)
	}))
	cwd := sbDir(t)
	host := "git.example.com:" + up.port
	flags := append(pinned("git.example.com"), "--allow-domain", host, "--settings", egSettings(t, cwd, up, []string{"git.example.com"}, nil))
	helper := `credential.helper=!f() { echo username=x-access-token; echo "password=$EG_TOKEN"; }; f`
	script := `set -e; cd /tmp
git -c '` + helper + `' clone -q https://` + host + `/repo.git r
cd r && cat README
git config user.email t@t && git config user.name t
echo pushed > PUSHED && git add PUSHED && git commit -qm push
git -c '` + helper + `' push -q origin main
echo "--- config"; cat .git/config; grep -r "srtmcp_masked_\|x-access-token" .git/config && echo LEAKED || true`
	r := egRun(t, cwd, flags, "sh", "-c", script)
	if r.code != 0 || !strings.Contains(r.stdout, "cloned through a terminated tunnel") || strings.Contains(r.stdout, "LEAKED") {
		t.Fatalf("git clone and push with a masked token: code %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	out, err := exec.Command("git", "--git-dir", filepath.Join(work, "repo.git"), "log", "--format=%s", "main").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "push\n") {
		t.Fatalf("the push did not land: %v %s", err, out)
	}
}

// egPy is a Python one-liner (curl is not in every image) that sends
// EG_TOKEN to url with method and prints the status and the body.
func egPy(method, url string) string {
	return `python3 -c 'import os, urllib.request as u, urllib.error as e
t = os.environ.get("EG_TOKEN", "unset")
print("inside=" + t)
try:
    r = u.urlopen(u.Request("` + url + `".replace("TOKEN", t), method="` + method + `", headers={"Authorization": "Bearer " + t}))
    print(r.status, r.read().decode())
except e.HTTPError as x:
    print(x.code, x.read().decode())'`
}

func TestEgressServeMCPCredentials(t *testing.T) {
	parallel(t)
	forEachBackend(t, testEgressServeMCPCredentials)
}

func testEgressServeMCPCredentials(t *testing.T, backend []string) {
	up := egStart(t, nil)
	host := "api.example.com:" + up.port
	settings := egSettings(t, t.TempDir(), up, []string{"api.example.com"}, nil) // the server trusts only its own user's directories
	state := filepath.Join(reachableTempDir(t), "state")
	srv, err := startServeEnv(t, []string{"EG_TOKEN=" + egSecret}, append(append(pinned("api.example.com"), backend...), "--allow-domain", host, "--settings", settings, "--state-dir", state)...)
	if err != nil {
		t.Fatal(err)
	}
	c := connect(t, srv.url)
	// The tool's description names what the operator offers, never a value.
	tools, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	described := false
	for _, tool := range tools.Tools {
		b, _ := json.Marshal(tool)
		if strings.Contains(string(b), egSecret) {
			t.Fatalf("%s's listing carries the secret", tool.Name)
		}
		if tool.Name == "execute_code" && strings.Contains(tool.Description, "EG_TOKEN (api.example.com)") {
			described = true
		}
	}
	if !described {
		t.Error("execute_code's description does not name the offered credential")
	}
	v, isErr := callTool(t, c, "execute_code", map[string]any{"command": egPy("GET", "https://"+host+"/echo")})
	out := stdoutOf(v)
	if isErr || !strings.Contains(out, "inside=srtmcp_masked_") || !strings.Contains(out, "200 echo GET /echo auth=[Bearer srtmcp_masked_") {
		t.Fatalf("execute_code: %v", v)
	}
	if strings.Contains(out, egSecret) || !up.sawSecret() {
		t.Fatalf("the upstream must get the value and the caller never: %v", out)
	}
	// A call that uses none of the operator's credentials gets none.
	v, isErr = callTool(t, c, "execute_code", map[string]any{"command": egPy("GET", "https://"+host+"/echo"), "sandbox_config": map[string]any{"credentials": []string{}}})
	if isErr || !strings.Contains(stdoutOf(v), "inside=unset") {
		t.Fatalf("credentials: [] must withhold it: %v", v)
	}
	// One it is not offered is an error naming it.
	v, isErr = callTool(t, c, "execute_code", map[string]any{"command": "true", "sandbox_config": map[string]any{"credentials": []string{"AWS_SECRET"}}})
	if !isErr || !strings.HasPrefix(fmt.Sprint(v["error"]), "exceeds_ceiling") || !strings.Contains(fmt.Sprint(v), "AWS_SECRET") {
		t.Fatalf("an unoffered credential: %v", v)
	}
	// A call's request rule narrows: POST refused by the proxy.
	v, _ = callTool(t, c, "execute_code", map[string]any{"command": egPy("POST", "https://"+host+"/echo"),
		"sandbox_config": map[string]any{"network": map[string]any{"request_rules": []any{map[string]any{"host": "api.example.com", "methods": []string{"GET"}}}}}})
	if !strings.Contains(stdoutOf(v), "403 srt-mcp proxy: POST /echo on api.example.com is not allowed") {
		t.Fatalf("a call's request rule: %v", v)
	}
	// In a session, each request is a line of the session's audit log.
	sv, isErr := callTool(t, c, "create_session", map[string]any{"language": "python"})
	sid, _ := sv["session_id"].(string)
	if isErr || sid == "" {
		t.Fatalf("create_session: %v", sv)
	}
	v, isErr = callTool(t, c, "execute_code", map[string]any{"session_id": sid,
		"command": egPy("GET", "https://"+host+"/echo/audited?q=TOKEN")})
	if isErr || !strings.Contains(stdoutOf(v), "echo GET /echo/audited") {
		t.Fatalf("in a session: %v", v)
	}
	auditOut, err := exec.Command(nwBin(t), "audit", "--state-dir", state, sid).Output()
	if err != nil {
		t.Fatalf("srt-mcp audit: %v", err)
	}
	var line map[string]any
	for _, l := range strings.Split(string(auditOut), "\n") {
		if strings.Contains(l, `"op":"egress"`) {
			_ = json.Unmarshal([]byte(l), &line)
		}
	}
	if line == nil || line["method"] != "GET" || line["path"] != "/echo/audited" || line["host"] != "api.example.com" || line["status"] != float64(200) ||
		fmt.Sprint(line["credentials"]) != "[EG_TOKEN]" || line["decision"] != "allow" || line["bytes_in"] == float64(0) || line["ts"] == nil {
		t.Fatalf("the audit line of the request: %v\n%s", line, auditOut)
	}
	if strings.Contains(string(auditOut), egSecret) || strings.Contains(string(auditOut), "srtmcp_masked_") {
		t.Fatalf("the audit log carries the secret or its stand-in (the query): %s", auditOut)
	}
	if strings.Contains(srv.logs.String(), egSecret) {
		t.Fatal("the server's log carries the secret")
	}
	for _, dir := range []string{state, dir0(settings)} {
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(egSecret)) {
					t.Errorf("%s holds the secret", p)
				}
			}
			return nil
		})
	}
}

// stdoutOf joins an execution result's stdout events.
func stdoutOf(v map[string]any) string {
	var b strings.Builder
	out, _ := v["output"].([]any)
	for _, e := range out {
		if m, ok := e.(map[string]any); ok && m["type"] == "stdout" {
			b.WriteString(fmt.Sprint(m["data"]))
		}
	}
	return b.String()
}

func dir0(p string) string { return filepath.Dir(p) }

func TestEgressUnsetCredentialIsAnError(t *testing.T) {
	parallel(t)
	up := egStart(t, nil)
	dir := t.TempDir()
	settings := egSettings(t, dir, up, []string{"api.example.com"}, nil)
	flags := append(pinned("api.example.com"), "--allow-domain", "api.example.com:"+up.port, "--settings", settings)
	// srt-mcp exec: EG_TOKEN is not in its environment.
	cmd := exec.Command(nwBin(t), append(append([]string{"exec"}, flags...), "--", "true")...)
	cmd.Env = append(os.Environ(), "HOME="+sbDir(t))
	cmd.Env = slicesDelete(cmd.Env, "EG_TOKEN")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "EG_TOKEN") || !strings.Contains(string(out), "not set") {
		t.Fatalf("exec with an unset masked variable: %v\n%s", err, out)
	}
	// srt-mcp serve refuses to start, naming it.
	_, err = startServeEnv(t, nil, append(flags, "--state-dir", filepath.Join(reachableTempDir(t), "state"))...)
	if err == nil || !strings.Contains(err.Error(), "EG_TOKEN") {
		t.Fatalf("serve with an unset masked variable: %v", err)
	}
}

func slicesDelete(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
