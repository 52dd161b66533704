package integration

// The web playground in a real browser: Debian's Chromium, driven with
// chromedp. A screenshot is kept as a test artifact.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("SRT_MCP_REQUIRE_CLIENTS") == "1" {
		t.Fatal("no Chromium (apt-get install -y chromium)")
	}
	t.Skip("no Chromium")
	return ""
}

// browserPage is a headless Chromium tab for one test, with helpers that
// fail the test on error.
type browserPage struct {
	t   *testing.T
	ctx context.Context
}

func newBrowserPage(t *testing.T, browser string, timeout time.Duration) *browserPage {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Headless,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelTimeout(); cancelTab(); cancelAlloc() })
	return &browserPage{t: t, ctx: ctx}
}

func (p *browserPage) must(what string, err error) {
	p.t.Helper()
	if err != nil {
		p.t.Fatalf("browser, %s: %v (status %q)", what, err, p.statusNoFail())
	}
}

// statusNoFail is the page's status line, for error messages.
func (p *browserPage) statusNoFail() string {
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById('status') || {}).textContent || ''`))
	return s
}

func (p *browserPage) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	p.must(what, chromedp.Do(p.ctx, steps...))
}

func (p *browserPage) poll(what, expr string, d time.Duration) {
	p.t.Helper()
	_, err := chromedp.Run(p.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(d)))
	p.must(what, err)
}

func (p *browserPage) str(what, expr string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](expr))
	p.must(what, err)
	return s
}

func (p *browserPage) num(what, expr string) int {
	p.t.Helper()
	n, err := chromedp.Run(p.ctx, chromedp.Evaluate[int](expr))
	p.must(what, err)
	return n
}

// setCode puts code in the editor and says which editor the page has.
func (p *browserPage) setCode(code string) string {
	p.t.Helper()
	js := "`" + code + "`"
	return p.str("set code", `(function(){ const cm = document.querySelector('.CodeMirror'); if (cm) { cm.CodeMirror.setValue(`+js+`); return 'codemirror'; } document.getElementById('code').value = `+js+`; return 'textarea'; })()`)
}

// pickLanguage chooses a language in the list as a user would, and fails
// the test when the list does not offer it.
func (p *browserPage) pickLanguage(lang string) {
	p.t.Helper()
	p.do("pick "+lang, chromedp.SetValue("#language", lang))
	got := p.str("language", `(function(){ const s = document.getElementById('language'); s.dispatchEvent(new Event('change', { bubbles: true })); return s.value; })()`)
	if got != lang {
		p.t.Fatalf("picked %q in the language list, it holds %q (options %s)", lang, got,
			p.str("options", `JSON.stringify([...document.querySelectorAll('#language option')].map(o => o.value))`))
	}
}

const pgStatus = `document.getElementById('status').textContent`

// runFinished is true once a run has ended one way or another.
const runFinished = `['done','failed','error'].includes(` + pgStatus + `)`

// TestPlaygroundInBrowser uses the playground of a server started with a
// token the way a person does: the page loads before the key is typed in,
// so the first listing of runtimes is refused; typing the key must list
// them, and Run must never send an empty language.
func TestPlaygroundInBrowser(t *testing.T) {
	browser := chromium(t)
	requirePythonData(t)
	s := startServe(t, "--token", "pg-token")
	base := strings.TrimSuffix(s.url, "/mcp")
	p := newBrowserPage(t, browser, 120*time.Second)

	p.do("navigate", chromedp.Navigate(base+"/"))
	p.do("page", chromedp.WaitVisible("#run"))
	// Without the key the listing is refused: the page says so, once the
	// request has come back.
	p.poll("refused listing: a message asking for the API key", `/api key/i.test(`+pgStatus+`)`, 30*time.Second)
	if n := p.num("languages", `[...document.querySelectorAll('#language option')].filter(o => o.value).length`); n != 0 {
		t.Errorf("before the key is typed, the language list offers %d languages", n)
	}
	// Count the page's calls to the run API from here on.
	p.str("watch fetch", `(function(){ window.runCalls = 0; const f = window.fetch; window.fetch = function (u) { if (/api\/run$/.test(String(u))) window.runCalls++; return f.apply(this, arguments); }; return 'ok'; })()`)
	// Run with no language chosen: a message, and no call to the API.
	p.do("click run without a language", chromedp.Click("#run"))
	p.poll("no-language message", `/language/i.test(`+pgStatus+`) || document.getElementById('output').textContent !== ''`, 10*time.Second)
	time.Sleep(300 * time.Millisecond)
	if n, out, st := p.num("run calls", `window.runCalls`), p.str("output", `document.getElementById('output').textContent`), p.str("status", pgStatus); n != 0 || strings.Contains(out, "unsupported language") || !strings.Contains(strings.ToLower(st+out), "language") {
		t.Errorf("Run with no language: %d calls to the run API, status %q, output %q; want none and a message about the language", n, st, out)
	}

	// Now the user types the key, after the page has loaded: the runtimes
	// must be listed with it, without reloading the page.
	p.do("type the api key", chromedp.SendKeys("#apikey", "pg-token"))
	p.poll("runtimes listed after typing the key", pgStatus+` === 'ready' && document.querySelector('#language option[value="python"]') !== null`, 30*time.Second)
	p.pickLanguage("python")
	editorKind := p.setCode("import matplotlib.pyplot as plt\nprint('hello from the browser test')\nplt.plot([1, 3, 2, 4])\nplt.savefig('browser-chart.png')\n")
	p.do("click run", chromedp.Click("#run"))
	p.poll("run finished", runFinished, 60*time.Second)
	status := p.str("status", pgStatus)
	output := p.str("output", `document.getElementById('output').textContent`)
	p.poll("image shown", `(document.querySelector('#images img') || {}).naturalWidth > 0`, 20*time.Second)
	imgWidth := p.num("image", `document.querySelector('#images img').naturalWidth`)
	shot, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	p.must("screenshot", err)
	if status != "done" || !strings.Contains(output, "hello from the browser test") || imgWidth < 100 {
		t.Fatalf("status %q, output %q, image width %d", status, output, imgWidth)
	}
	if n := p.num("run calls", `window.runCalls`); n != 1 {
		t.Errorf("%d calls to the run API for one click on Run", n)
	}
	if editorKind != "codemirror" && os.Getenv("SRT_MCP_REQUIRE_CLIENTS") == "1" {
		t.Errorf("the code editor component did not load (%s): make assets", editorKind)
	}
	dir := os.Getenv("SRT_MCP_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir()
	}
	out := filepath.Join(dir, "playground-"+strings.ReplaceAll(t.Name(), "/", "_")+".png")
	if err := os.WriteFile(out, shot, 0o644); err == nil {
		t.Logf("screenshot: %s (%d bytes)", out, len(shot))
	}
	// Usable on a phone: nothing wider than the screen.
	p.do("phone viewport", chromedp.EmulateViewport(375, 740))
	if scroll := p.num("width", `document.documentElement.scrollWidth`); scroll > 380 {
		t.Errorf("at 375 px the page is %d px wide", scroll)
	}
	// The key is remembered for the tab: a reload lists the runtimes at once.
	p.do("reload", chromedp.Reload())
	p.do("page after reload", chromedp.WaitVisible("#run"))
	p.poll("runtimes listed after reload", pgStatus+` === 'ready' && document.getElementById('language').value === 'python'`, 30*time.Second)
}

// TestPlaygroundInBrowserNoToken: on a server without a token the page
// lists the runtimes at once and runs code with no key typed.
func TestPlaygroundInBrowserNoToken(t *testing.T) {
	browser := chromium(t)
	s := startServe(t)
	base := strings.TrimSuffix(s.url, "/mcp")
	p := newBrowserPage(t, browser, 90*time.Second)

	p.do("navigate", chromedp.Navigate(base+"/"))
	p.do("page", chromedp.WaitVisible("#run"))
	p.poll("runtimes listed", pgStatus+` === 'ready'`, 30*time.Second)
	p.pickLanguage("python")
	p.setCode("print('hello without a token')\n")
	p.do("click run", chromedp.Click("#run"))
	p.poll("run finished", runFinished, 60*time.Second)
	status := p.str("status", pgStatus)
	output := p.str("output", `document.getElementById('output').textContent`)
	if status != "done" || !strings.Contains(output, "hello without a token") {
		t.Fatalf("status %q, output %q", status, output)
	}
}
