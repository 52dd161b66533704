package integration

// The run view (an MCP App, ext-apps 2026-01-26) as a chat host embeds
// it: a real srt-mcp serve, Debian's Chromium, and a host page
// (mcpclient/apphost.html) that uses the MCP TypeScript SDK client and
// the ext-apps AppBridge from npm, loaded as ES modules through an import
// map from a loopback server that also proxies /mcp to the server (the
// host's backend). The host finds the view through a tool's
// _meta.ui.resourceUri, reads it, runs it in a sandboxed iframe under the
// CSP its metadata declares, calls execute_code and passes the arguments
// and the result over the bridge. The view must show the output, decode
// the image the run made (read through the host's tools/call), re-run the
// call on a click (a second execution the host sees), and make no network
// request of its own.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// appHostModules are the host page's imports; the import map covers them
// and everything they import in turn.
var appHostModules = []string{"@modelcontextprotocol/client", "@modelcontextprotocol/ext-apps/app-bridge"}

// moduleImport finds the specifiers of static and dynamic imports and
// re-exports in built ES modules (the packages' dist files, minified or
// not). A match inside a string or a comment that names no package is
// harmless: it resolves to nothing and is left out.
var moduleImport = regexp.MustCompile(`(?:\bfrom\s*|\bimport\s*\(?\s*)["']([^"'\s]+)["']`)

// importMap resolves every bare specifier reachable from entries the way a
// bundler targeting browsers would (package.json exports, conditions
// browser, import, module, default), so the browser loads the packages'
// own files from node_modules, unbundled.
func importMap(nodeModules string, entries []string) (map[string]string, error) {
	imports := map[string]string{}
	seen := map[string]bool{}
	var todo []string
	for _, e := range entries {
		f, err := resolvePackageFile(nodeModules, e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e, err)
		}
		imports[e] = f
		todo = append(todo, f)
	}
	for len(todo) > 0 {
		f := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[f] {
			continue
		}
		seen[f] = true
		src, err := os.ReadFile(filepath.Join(nodeModules, f))
		if err != nil {
			return nil, err
		}
		for _, m := range moduleImport.FindAllStringSubmatch(string(src), -1) {
			spec := m[1]
			if strings.HasPrefix(spec, "./") || strings.HasPrefix(spec, "../") {
				todo = append(todo, path.Join(path.Dir(f), spec))
				continue
			}
			if strings.Contains(spec, ":") || strings.HasPrefix(spec, "/") {
				continue // node:fs and the like: not on the browser's path
			}
			if _, ok := imports[spec]; ok {
				continue
			}
			if r, err := resolvePackageFile(nodeModules, spec); err == nil {
				imports[spec] = r
				todo = append(todo, r)
			}
		}
	}
	return imports, nil
}

// resolvePackageFile maps a bare specifier to a file under node_modules.
func resolvePackageFile(nodeModules, spec string) (string, error) {
	parts := strings.Split(spec, "/")
	n := 1
	if strings.HasPrefix(spec, "@") {
		n = 2
	}
	if len(parts) < n {
		return "", fmt.Errorf("not a package specifier")
	}
	name, sub := strings.Join(parts[:n], "/"), "."
	if len(parts) > n {
		sub = "./" + strings.Join(parts[n:], "/")
	}
	raw, err := os.ReadFile(filepath.Join(nodeModules, name, "package.json"))
	if err != nil {
		return "", err
	}
	var pj struct {
		Exports json.RawMessage `json:"exports"`
		Module  string          `json:"module"`
		Main    string          `json:"main"`
	}
	if err := json.Unmarshal(raw, &pj); err != nil {
		return "", err
	}
	var target string
	if len(pj.Exports) > 0 {
		var exports any
		_ = json.Unmarshal(pj.Exports, &exports)
		if m, ok := exports.(map[string]any); !ok || !hasSubpathKeys(m) {
			exports = map[string]any{".": exports}
		}
		m := exports.(map[string]any)
		if e, ok := m[sub]; ok {
			target = pickCondition(e)
		} else {
			for k, e := range m { // a "./x/*" pattern
				if pre, post, ok := strings.Cut(k, "*"); ok && strings.HasPrefix(sub, pre) && strings.HasSuffix(sub, post) {
					target = strings.ReplaceAll(pickCondition(e), "*", strings.TrimSuffix(strings.TrimPrefix(sub, pre), post))
				}
			}
		}
		if target == "" {
			return "", fmt.Errorf("%s is not exported", sub)
		}
	} else if sub != "." {
		target = sub
	} else if target = pj.Module; target == "" {
		if target = pj.Main; target == "" {
			target = "index.js"
		}
	}
	f := path.Join(name, target)
	if _, err := os.Stat(filepath.Join(nodeModules, f)); err != nil {
		return "", err
	}
	return f, nil
}

func hasSubpathKeys(m map[string]any) bool {
	for k := range m {
		if strings.HasPrefix(k, ".") {
			return true
		}
	}
	return false
}

// pickCondition chooses an export's file for a browser's ES module loader.
func pickCondition(e any) string {
	switch v := e.(type) {
	case string:
		return v
	case map[string]any:
		for _, c := range []string{"browser", "import", "module", "default"} {
			if x, ok := v[c]; ok {
				if r := pickCondition(x); r != "" {
					return r
				}
			}
		}
	}
	return ""
}

// startAppHost serves the host page, node_modules, and /mcp proxied to
// the server, on a loopback port of its own; it returns the page's URL.
// It counts the requests that are not the host's own: one from the
// view's opaque origin carries Origin: null or Sec-Fetch-Site: cross-site.
func startAppHost(t *testing.T, clients, mcpURL string) (string, func() []string) {
	t.Helper()
	nodeModules := filepath.Join(clients, "node_modules")
	imports, err := importMap(nodeModules, appHostModules)
	if err != nil {
		t.Fatalf("import map: %v", err)
	}
	for k, f := range imports {
		imports[k] = "/node_modules/" + f
	}
	im, _ := json.Marshal(map[string]any{"imports": imports})
	page, err := os.ReadFile(filepath.Join(clients, "apphost.html"))
	if err != nil {
		t.Fatal(err)
	}
	hostPage := strings.Replace(string(page), "<!--IMPORTMAP-->", `<script type="importmap">`+string(im)+`</script>`, 1)

	target, _ := url.Parse(mcpURL)
	proxy := &httputil.ReverseProxy{FlushInterval: -1, Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(&url.URL{Scheme: target.Scheme, Host: target.Host})
		// The host's backend holds the MCP connection, not the browser:
		// nothing of the page's browsing context goes on.
		for _, h := range []string{"Origin", "Referer", "Cookie", "Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest"} {
			r.Out.Header.Del(h)
		}
	}}

	var mu sync.Mutex
	var foreign []string
	files := http.StripPrefix("/node_modules/", http.FileServer(http.Dir(nodeModules)))
	mux := http.NewServeMux()
	mux.Handle("/mcp", proxy)
	mux.Handle("/node_modules/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".js") || strings.HasSuffix(r.URL.Path, ".mjs") {
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		}
		files.ServeHTTP(w, r)
	}))
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(hostPage))
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") == "null" || r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			mu.Lock()
			foreign = append(foreign, r.Method+" "+r.URL.String())
			mu.Unlock()
		}
		mux.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String() + "/", func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), foreign...)
	}
}

// appFrame evaluates JavaScript in the view's iframe, in its own process
// (Chrome isolates sandboxed iframes) or in the page's.
type appFrame struct {
	t    *testing.T
	ctx  context.Context
	opts []chromedp.EvaluateOption
}

func (f *appFrame) str(expr string) (string, error) {
	ctx, cancel := context.WithTimeout(f.ctx, 5*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[string](expr, f.opts...))
}

// poll waits until expr is true in the view.
func (f *appFrame) poll(what, expr string, d time.Duration, diag func() string) {
	f.t.Helper()
	deadline := time.Now().Add(d)
	for {
		v, err := f.str(`String(!!(` + expr + `))`)
		if err == nil && v == "true" {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("view: %s: not within %v (last error %v)\n%s", what, d, err, diag())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// requestLog is every network request Chrome reports, by frame.
type requestLog struct {
	mu   sync.Mutex
	reqs []string // frame id + " " + URL
	ctxs map[string]runtime.ExecutionContextID
}

func (l *requestLog) listen(ev any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		l.reqs = append(l.reqs, string(ev.FrameID)+" "+ev.Request.URL)
	case *runtime.EventExecutionContextCreated:
		var aux struct {
			FrameID   string `json:"frameId"`
			IsDefault bool   `json:"isDefault"`
		}
		if json.Unmarshal(ev.Context.AuxData, &aux) == nil && aux.IsDefault {
			l.ctxs[aux.FrameID] = ev.Context.ID
		}
	}
}

func (l *requestLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reqs...)
}

func TestMCPAppRunViewInHost(t *testing.T) {
	browser := chromium(t)
	requirePythonData(t)
	clients := mcpClients(t)
	if _, err := os.Stat(filepath.Join(clients, "node_modules", "@modelcontextprotocol", "ext-apps", "dist", "src", "app-bridge.js")); err != nil {
		t.Fatalf("the ext-apps package is not installed in %s (npm ci there): %v", clients, err)
	}
	s := startServe(t)
	hostURL, foreign := startAppHost(t, clients, s.url)

	pageLog := &requestLog{ctxs: map[string]runtime.ExecutionContextID{}}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Headless,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tabCtx, cancelTab := chromedp.NewContext(actx, chromedp.WithListener(pageLog.listen))
	ctx, cancelTimeout := context.WithTimeout(tabCtx, 150*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelTab(); cancelAlloc() })
	p := &browserPage{t: t, ctx: ctx}

	marker := fmt.Sprintf("app-view-%d", time.Now().UnixNano())
	code := "import random\nimport matplotlib.pyplot as plt\n" +
		"print('" + marker + "', random.randrange(10**9))\n" +
		"plt.plot([1, 3, 2, 4])\nplt.savefig('/mnt/data/app-chart.png')\n"
	args, _ := json.Marshal(map[string]any{"code": code, "language": "python"})
	q := url.Values{"tool": {"execute_code"}, "args": {string(args)}}
	p.do("navigate", chromedp.Navigate(hostURL+"?"+q.Encode()))
	hostState := func() string {
		return p.str("host state", `JSON.stringify(window.host || null)`) + "\nserver log tail: " + tail(s.logs.String(), 1500)
	}
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.host && (window.host.calls.length > 0 || window.host.errors.length > 0)`,
		chromedp.WithPollingTimeout(90*time.Second)))
	if err != nil {
		t.Fatalf("the host made no call: %v\n%s", err, hostState())
	}
	var host struct {
		URI           string   `json:"uri"`
		Linked        []string `json:"linked"`
		MIME          string   `json:"mime"`
		ResourceBytes int      `json:"resourceBytes"`
		CSP           map[string]any
		AppInitialzed bool `json:"appInitialized"`
		Calls         []struct {
			Name, Execution string
			IsError         bool
		}
		AppCalls []struct {
			Name      string
			Arguments map[string]any
			Execution string
			IsError   bool
		}
		Errors []string
	}
	readHost := func() {
		t.Helper()
		host.AppCalls = nil
		if err := json.Unmarshal([]byte(p.str("host", `JSON.stringify(window.host)`)), &host); err != nil {
			t.Fatal(err)
		}
	}
	readHost()
	if len(host.Errors) > 0 || len(host.Calls) != 1 || host.Calls[0].IsError || host.Calls[0].Execution == "" {
		t.Fatalf("host: %s", hostState())
	}
	if host.URI != "ui://srt-mcp/run.html" || host.MIME != "text/html;profile=mcp-app" || strings.Join(host.Linked, ",") != "execute_code,run_python" {
		t.Errorf("the view: uri %q, MIME %q, linked from %v", host.URI, host.MIME, host.Linked)
	}
	if len(host.CSP) != 2 || fmt.Sprint(host.CSP["connectDomains"]) != "[]" || fmt.Sprint(host.CSP["resourceDomains"]) != "[]" {
		t.Errorf("the view declares CSP %v; want no domains at all", host.CSP)
	}
	t.Logf("view %s: %d bytes; first execution %s", host.URI, host.ResourceBytes, host.Calls[0].Execution)

	view := findAppFrame(t, ctx, pageLog)
	viewText := func() string {
		v, err := view.str(`document.body.innerText`)
		return fmt.Sprintf("view text: %q (%v)\n%s", v, err, hostState())
	}
	view.poll("stdout shown", `document.getElementById('stdout').textContent.includes('`+marker+`')`, 60*time.Second, viewText)
	view.poll("image decoded", `(document.querySelector('#images img') || {}).naturalWidth > 100`, 30*time.Second, viewText)
	firstOut, _ := view.str(`document.getElementById('stdout').textContent`)
	status, _ := view.str(`document.getElementById('status').textContent`)
	if !strings.HasPrefix(status, "exit 0") {
		t.Errorf("view status %q", status)
	}
	readHost()
	if len(host.AppCalls) == 0 || host.AppCalls[0].Name != "read_artifact" || host.AppCalls[0].IsError {
		t.Errorf("the image did not come through the host's read_artifact: %+v", host.AppCalls)
	}
	if src, _ := view.str(`document.querySelector('#images img').src.slice(0, 22)`); src != "data:image/png;base64," {
		t.Errorf("image source %q", src)
	}

	// Re-run: the same call again, through the host.
	view.poll("re-run enabled", `!document.getElementById('rerun').disabled`, 10*time.Second, viewText)
	if _, err := view.str(`document.getElementById('rerun').click(), 'clicked'`); err != nil {
		t.Fatal(err)
	}
	view.poll("second run shown", `(t => t.includes('`+marker+`') && t !== `+jsString(firstOut)+`)(document.getElementById('stdout').textContent)`, 60*time.Second, viewText)
	view.poll("second image decoded", `(document.querySelector('#images img') || {}).naturalWidth > 100`, 30*time.Second, viewText)
	readHost()
	var reruns []string
	for _, c := range host.AppCalls {
		if c.Name == "execute_code" {
			reruns = append(reruns, c.Execution)
			if c.Arguments["code"] != code || c.Arguments["language"] != "python" || c.IsError {
				t.Errorf("re-run with %v (error %v); want the first call's arguments", c.Arguments, c.IsError)
			}
		}
	}
	if len(reruns) != 1 || reruns[0] == "" || reruns[0] == host.Calls[0].Execution {
		t.Errorf("re-run: executions %v after %s; want one new one", reruns, host.Calls[0].Execution)
	}
	meta, _ := view.str(`document.getElementById('meta').textContent`)
	if len(reruns) == 1 && !strings.Contains(meta, reruns[0]) {
		t.Errorf("the view shows %q, not the re-run's execution %s", meta, reruns[0])
	}

	// No network of its own: every request Chrome saw came from the host
	// page (its modules and /mcp), none from the view's frame, and none
	// reached the host's server from the view's opaque origin.
	for _, r := range append(pageLog.list(), view.log.list()...) {
		frame, u, _ := strings.Cut(r, " ")
		if strings.HasPrefix(u, "data:") || strings.HasPrefix(u, "about:") {
			continue
		}
		if frame == view.frameID || !strings.HasPrefix(u, hostURL) {
			t.Errorf("a request not of the host page: %s (frame %s; the view is %s)", u, frame, view.frameID)
		}
	}
	// And it cannot: the CSP it runs under refuses a fetch and an image
	// from anywhere, here the host's own server.
	probe := `(async () => {
  let fetched = 'fetch blocked';
  try { await fetch(` + jsString(hostURL+"probe-fetch") + `); fetched = 'fetch reached'; } catch (e) { /* refused */ }
  const img = await new Promise((done) => { const i = new Image(); i.onload = () => done('image loaded'); i.onerror = () => done('image blocked');
    setTimeout(() => done('image pending'), 3000); i.src = ` + jsString(hostURL+"probe.png") + `; });
  return fetched + ', ' + img; })()`
	pctx, cancel := context.WithTimeout(view.ctx, 10*time.Second)
	got, err := chromedp.Run(pctx, chromedp.Evaluate[string](probe, append(view.opts, chromedp.EvalAwaitPromise)...))
	cancel()
	if err != nil || got != "fetch blocked, image blocked" {
		t.Errorf("the view's own requests: %q (%v); want both blocked", got, err)
	}
	if f := foreign(); len(f) > 0 {
		t.Errorf("requests from the view's origin reached the host: %v", f)
	}

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		dir := os.Getenv("SRT_MCP_ARTIFACTS")
		if dir == "" {
			dir = os.TempDir()
		}
		out := filepath.Join(dir, "mcpapp-"+strings.ReplaceAll(t.Name(), "/", "_")+".png")
		if os.WriteFile(out, shot, 0o644) == nil {
			t.Logf("screenshot: %s (%d bytes)", out, len(shot))
		}
	}
}

// appView is the view's iframe: where to evaluate, its frame id, and the
// requests its own target reports when Chrome runs it out of process.
type appView struct {
	*appFrame
	frameID string
	log     *requestLog
}

// findAppFrame finds the view's iframe: a target of its own when Chrome
// isolates the sandboxed frame in another process (then attached to, with
// its requests logged from then on), else a frame of the page, evaluated
// in its default context.
func findAppFrame(t *testing.T, ctx context.Context, pageLog *requestLog) *appView {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		infos, err := chromedp.Targets(ctx)
		for _, info := range infos {
			if info.Type == "iframe" && info.URL == "about:srcdoc" {
				log := &requestLog{ctxs: map[string]runtime.ExecutionContextID{}}
				fctx, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(info.TargetID), chromedp.WithListener(log.listen))
				t.Cleanup(cancel)
				// The first run attaches; the target stays attached for
				// as long as the context it gets, so not a timeout's.
				if err := chromedp.Do(fctx); err != nil {
					t.Fatalf("attach to the view's target: %v", err)
				}
				t.Logf("the view runs in a process of its own (target %s)", info.TargetID)
				return &appView{appFrame: &appFrame{t: t, ctx: fctx}, frameID: string(info.TargetID), log: log}
			}
		}
		res, err2 := chromedp.Call(ctx, page.GetFrameTree, cdp.Empty{})
		if err2 == nil && res.FrameTree != nil && len(res.FrameTree.ChildFrames) > 0 {
			frame := res.FrameTree.ChildFrames[0].Frame
			pageLog.mu.Lock()
			id, ok := pageLog.ctxs[string(frame.ID)]
			pageLog.mu.Unlock()
			if ok && frame.URL == "about:srcdoc" {
				t.Logf("the view runs in the page's process (frame %s)", frame.ID)
				return &appView{appFrame: &appFrame{t: t, ctx: ctx, opts: []chromedp.EvaluateOption{func(p *runtime.EvaluateParams) { p.ContextID = id }}},
					frameID: string(frame.ID), log: &requestLog{ctxs: map[string]runtime.ExecutionContextID{}}}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no view iframe found: targets %+v (%v), frame tree %+v (%v)", infos, err, res, err2)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
